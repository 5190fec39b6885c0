// The microscaled format's row dots with AVX2: the definition (microscaled_format.cpp), eight lanes at a
// time. AVX-512 hosts run these too (KernelsFor's fallback).
//
// Why the bits match the definition: one __m256 accumulator per row holds scalar::Dot's eight lanes (column
// i in lane i mod 8; every group of 8 columns is one vector, starting at a multiple of 8, and so inside one
// block of 16 or 32); each step is _mm256_mul_ps then _mm256_add_ps (no FMA: the target leaves "fma" out and
// the build has -ffp-contract=off); a row's last cols mod 8 columns are added lane by lane as scalar::Dot's
// tail loop does (avx2_common::Finish), and the tensor scale multiplies the reduced dot. Each weight is the
// definition's product, the element's value times its block's scale in one rounded (here exact) multiply:
//   FP4: the 8 nibbles of 4 bytes (element 2i in the low nibble of byte i, so element j at bits 4j of the
//   little-endian word) index the eight magnitudes (Fp4DecodeTable's first eight) with a permute; the code's
//   bit 3 is the sign, xor-ed in.
//   FP8: a gather from Fp8DecodeTable, Fp8ToF32's values.
//   Block scales: E8M0DecodeTable (or Fp8DecodeTable for NVFP4's E4M3), one lookup per 8 columns.
#include "microscaled_kernels.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>

#include "../simd/avx2_common.h"
#include "plumb/core/extent.h"
#include "plumb/formats/e8m0.h"
#include "plumb/formats/fp4.h"
#include "plumb/formats/fp8.h"

namespace plumb::kernels::microscaled::avx2 {
namespace {

using avx2_common::Finish;
using avx2_common::Prefetch;
using avx2_common::ReadU32;

constexpr int kRows = 4;

const float* ScaleTable(MicroscalingScheme scheme) {
  return scheme == MicroscalingScheme::kNvfp4 ? Fp8DecodeTable(Fp8Format::kE4M3) : E8M0DecodeTable();
}

const float* ElementTable(MicroscalingScheme scheme) {
  return scheme == MicroscalingScheme::kMxfp8E5M2 ? Fp8DecodeTable(Fp8Format::kE5M2)
                                                  : Fp8DecodeTable(Fp8Format::kE4M3);
}

// Columns c .. c + 7 of a row (c a multiple of 8) as weights: each element's value times `scale`.
template <bool kFp4>
PLUMB_AVX2 inline __m256 Weights8(const std::uint8_t* codes, int c, const float* elements, __m256 scale) {
  if constexpr (kFp4) {
    const __m256i word = _mm256_set1_epi32(static_cast<int>(ReadU32(codes + c / 2)));
    const __m256i nibble = _mm256_and_si256(
        _mm256_srlv_epi32(word, _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)), _mm256_set1_epi32(0xF));
    // permutevar8x32 reads the low 3 bits of each index: the magnitude's code.
    const __m256 magnitude = _mm256_permutevar8x32_ps(_mm256_loadu_ps(Fp4DecodeTable()), nibble);
    const __m256i sign = _mm256_slli_epi32(_mm256_srli_epi32(nibble, 3), 31);
    return _mm256_mul_ps(_mm256_xor_ps(magnitude, _mm256_castsi256_ps(sign)), scale);
  } else {
    const __m256i index = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + c)));
    return _mm256_mul_ps(_mm256_i32gather_ps(elements, index, 4), scale);
  }
}

// y[r0 .. r0 + R) of W (R rows side by side: independent accumulator chains, x loaded once for them).
template <bool kFp4, int R>
PLUMB_AVX2 void Dots(const WeightMatrix& W, int r0, const float* x, float* y) {
  const MicroscalingScheme scheme = W.mx_scheme;
  const int block = MicroscalingBlockSize(scheme), blocks = MicroscaledBlocks(scheme, W.cols);
  const float* scales = ScaleTable(scheme);
  const float* elements = kFp4 ? nullptr : ElementTable(scheme);
  const int full = W.cols / 8 * 8;
  const std::size_t ahead = avx2_common::kPrefetchAheadBytes;
  __m256 acc[R];
  for (int i = 0; i < R; ++i) acc[i] = _mm256_setzero_ps();
  for (int c = 0; c < full; c += 8) {
    const __m256 xv = _mm256_loadu_ps(x + c);
    const std::size_t byte = kFp4 ? static_cast<std::size_t>(c) / 2 : static_cast<std::size_t>(c);
    for (int i = 0; i < R; ++i) {
      const std::uint8_t* codes = W.Row(r0 + i);
      if (byte % 64 == 0) Prefetch(codes, byte + ahead);  // a step of at most 64 bytes (avx2_common)
      const std::uint8_t scale_code =
          W.mx_scales[Extent(r0 + i, blocks) + static_cast<std::size_t>(c / block)];
      const __m256 w = Weights8<kFp4>(codes, c, elements, _mm256_set1_ps(scales[scale_code]));
      acc[i] = _mm256_add_ps(acc[i], _mm256_mul_ps(w, xv));
    }
  }
  for (int i = 0; i < R; ++i) {
    const int r = r0 + i;
    const std::uint8_t* codes = W.Row(r);
    const std::uint8_t* row_scales = W.mx_scales + Extent(r, blocks);
    const float dot = Finish(acc[i], full, W.cols, x, [&](int c) {
      return MicroscaledElement(scheme, MicroscaledElementCode(scheme, codes, c)) *
             scales[row_scales[c / block]];
    });
    y[r] = W.mx_tensor_scale * dot;
  }
}

template <bool kFp4>
void RowDotsOf(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  int r = row_begin;
  for (; r + kRows <= row_end; r += kRows) Dots<kFp4, kRows>(W, r, x, y);
  for (; r < row_end; ++r) Dots<kFp4, 1>(W, r, x, y);
}

}  // namespace

void RowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  if (MicroscalingElementIsFp4(W.mx_scheme)) {
    RowDotsOf<true>(W, row_begin, row_end, x, y);
  } else {
    RowDotsOf<false>(W, row_begin, row_end, x, y);
  }
}

}  // namespace plumb::kernels::microscaled::avx2

#endif  // __x86_64__
