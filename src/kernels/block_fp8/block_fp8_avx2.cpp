// The block-scaled FP8 format's row dots and row decoding with AVX2 + F16C: the definition
// (block_fp8_format.cpp), eight lanes at a time. AVX-512 hosts run these too (KernelsFor's fallback).
//
// Why the bits match the definition: one __m256 accumulator per row holds scalar::Dot's eight lanes (column
// i in lane i mod 8; every group of 8 columns is one vector starting at a multiple of 8, and so inside one
// 128-column block); each step is _mm256_mul_ps then _mm256_add_ps (no FMA: the target leaves "fma" out and
// the build has -ffp-contract=off); a row's last cols mod 8 columns are added lane by lane as scalar::Dot's
// tail loop does (avx2_common::Finish). Each weight is the definition's one rounded product of the code's
// value and its block's scale s, made as the FP8 kernels make E4M3 values (fp8_avx2.cpp): the code's bits
// placed in an FP16 give h = value · 2^-8 exactly, and h · (2^8 · s) is the same real number as value · s,
// so it rounds to the same float, as long as 2^8 · s is exact: for every finite s below 2^120 (and an inf or
// NaN s gives inf or NaN either way). A row with a block scale of 2^120 or more is left to the definition.
// E4M3's NaN codes, which the FP16 trick reads as finite, make the definition's dot NaN; they are noted per
// row (E4M3NanTracker) and the row's result is then NaN.
#include "block_fp8_kernels.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "../fp8/fp8_avx2.h"
#include "../simd/avx2_common.h"
#include "plumb/core/extent.h"

namespace plumb::kernels::block_fp8::avx2 {
namespace {

using avx2_common::Finish;
using fp8::avx2_shared::E4M3NanTracker;
using fp8::avx2_shared::Fp8Exact16;
using fp8::avx2_shared::Fp8ToHalf;
using fp8::avx2_shared::Halves;

constexpr int kRows = 4;

const float* Scales(const WeightMatrix& W, int r) {
  return W.fp8_block_scales + Extent(r / kFp8BlockSize, Fp8BlockCount(W.cols));
}

// y[r0 .. r0 + R) of W (R rows side by side: independent accumulator chains, x loaded once for them).
template <int R>
PLUMB_AVX2 void Dots(const WeightMatrix& W, int r0, const float* x, float* y) {
  const int cols = W.cols;
  const int full32 = cols - cols % 32;  // 32 divides 128: a step of 32 never straddles two blocks
  const std::size_t ahead = avx2_common::PrefetchAhead(R * W.row_bytes);
  const std::uint8_t* row[R];
  const float* scales[R];
  __m256 acc[R], scale8[R];
  E4M3NanTracker nan[R];
  bool exact[R];
  for (int i = 0; i < R; ++i) {
    row[i] = W.Row(r0 + i);
    scales[i] = Scales(W, r0 + i);
    acc[i] = _mm256_setzero_ps();
    scale8[i] = _mm256_setzero_ps();
    nan[i].Reset();
    exact[i] = true;
  }
  for (int c = 0; c < full32; c += 32) {
    __m256 xv[4];
    for (int v = 0; v < 4; ++v) xv[v] = _mm256_loadu_ps(x + c + 8 * v);
    if (c % kFp8BlockSize == 0) {
      for (int i = 0; i < R; ++i) {
        const float s = scales[i][c / kFp8BlockSize], s8 = s * 256.0f;
        exact[i] = exact[i] && !(std::isfinite(s) && !std::isfinite(s8));
        scale8[i] = _mm256_set1_ps(s8);
      }
    }
    for (int i = 0; i < R; ++i) {
      if (c % 64 == 0) avx2_common::Prefetch(row[i], ahead + static_cast<std::size_t>(c));
      nan[i].Add(row[i] + c);
      for (int h = 0; h < 2; ++h) {
        const Halves half = Fp8ToHalf<Fp8Format::kE4M3>(row[i] + c + 16 * h);
        const __m256 w0 = _mm256_mul_ps(_mm256_cvtph_ps(half.lo), scale8[i]);
        const __m256 w1 = _mm256_mul_ps(_mm256_cvtph_ps(half.hi), scale8[i]);
        acc[i] = _mm256_add_ps(acc[i], _mm256_mul_ps(w0, xv[2 * h]));
        acc[i] = _mm256_add_ps(acc[i], _mm256_mul_ps(w1, xv[2 * h + 1]));
      }
    }
  }
  const float* table = Fp8DecodeTable(Fp8Format::kE4M3);
  const int full = cols - cols % 8;
  for (int i = 0; i < R; ++i) {
    const int r = r0 + i;
    if (!exact[i]) {
      scalar::RowDots(W, r, r + 1, x, y);
      continue;
    }
    const auto weight = [&](int c) { return table[row[i][c]] * scales[i][c / kFp8BlockSize]; };
    __m256 a = acc[i];
    for (int c = full32; c < full; c += 8) {
      alignas(32) float w[8];
      for (int j = 0; j < 8; ++j) w[j] = weight(c + j);
      a = _mm256_add_ps(a, _mm256_mul_ps(_mm256_load_ps(w), _mm256_loadu_ps(x + c)));
    }
    const float dot = Finish(a, full, cols, x, weight);
    y[r] = nan[i].Any() ? table[0x7F] : dot;  // NaN, as the definition gives for a NaN code
  }
}

}  // namespace

void RowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  avx2_common::RunRowBlocks<kRows>(Dots<kRows>, Dots<1>, W, row_begin, row_end, x, y);
}

// Each element's exact value (Fp8Exact16: NaN codes included) times its block's scale, one rounded multiply
// as the definition's.
PLUMB_AVX2 void DecodeRows(const WeightMatrix& W, int r0, int count, float* out) {
  const float* table = Fp8DecodeTable(Fp8Format::kE4M3);
  const int cols = W.cols, full16 = cols - cols % 16;  // 16 divides 128
  for (int i = 0; i < count; ++i) {
    const std::uint8_t* row = W.Row(r0 + i);
    const float* scales = Scales(W, r0 + i);
    float* o = out + Extent(i, cols);
    for (int c = 0; c < full16; c += 16) {
      const __m256 s = _mm256_set1_ps(scales[c / kFp8BlockSize]);
      __m256 w[2];
      Fp8Exact16<Fp8Format::kE4M3>(row + c, w);
      _mm256_storeu_ps(o + c, _mm256_mul_ps(w[0], s));
      _mm256_storeu_ps(o + c + 8, _mm256_mul_ps(w[1], s));
    }
    for (int c = full16; c < cols; ++c) o[c] = table[row[c]] * scales[c / kFp8BlockSize];
  }
}

}  // namespace plumb::kernels::block_fp8::avx2

#endif  // __x86_64__
