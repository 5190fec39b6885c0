// The FP8 row dots and row decoding with AVX2 + F16C: the definition (fp8_format.cpp), eight lanes at a
// time.
//
// Why the bits match the definition: one __m256 accumulator per row holds scalar::Dot's eight lanes
// (column i in lane i mod 8; every group of 8 columns is one vector, and groups start at multiples of 8);
// each step is _mm256_mul_ps then _mm256_add_ps (no FMA: the target leaves "fma" out and the build has
// -ffp-contract=off); a row's last cols mod 8 columns are added lane by lane in scalar code as scalar::Dot's
// tail loop does; the lanes are reduced by the definition's expression. Weights are made exactly as the
// definition makes them:
//   FP8 E5M2 is the top byte of an FP16 (same sign, exponent width and bias), so code << 8 converted by
//   F16C is Fp8ToF32 exactly, inf and NaN included. FP8 E4M3's sign, exponent and mantissa bits placed in an
//   FP16 (S.0EEEE.MMM0000000) give the value · 2^-8 exactly, subnormals included; the NaN codes (S.1111.111),
//   which would read as 480, are noted apart (see Fp8Dots). The 2^8 goes onto x instead of onto each weight:
//   h·(2^8·x) and (2^8·h)·x are the same real number, so the rounded product is the same bits, as long as
//   2^8·x is exact, i.e. finite; a row times an x with an element of magnitude ≥ 2^120 scales the weights
//   instead.
// F16C conversions are exact and differ from F16ToF32 only in quieting a signalling NaN, which changes no
// result but a NaN's payload.
//
// Several rows are computed together (kRows accumulators, x loaded once for them): one row's adds form a
// single dependency chain (the definition fixes it), so interleaving rows keeps the adders busy.
#include "fp8_kernels.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>

#include "../simd/avx2_common.h"
#include "fp8_avx2.h"

namespace plumb::kernels::fp8::avx2 {
namespace {

constexpr int kRows = 4;

using avx2_shared::CanScaleX;
using avx2_shared::E4M3NanTracker;
using avx2_shared::Fp8Exact16;
using avx2_shared::Fp8ToHalf;
using avx2_shared::Halves;

// The 32 codes at p as weights, for fp8_dots_x86_body.h: two runs of 16 through FP16.
template <Fp8Format F>
PLUMB_AVX2 inline void Fp8Weights32(const std::uint8_t* p, E4M3NanTracker& nan, __m256 w[4]) {
  if constexpr (F == Fp8Format::kE4M3) nan.Add(p);
  for (int h = 0; h < 2; ++h) {
    const Halves half = Fp8ToHalf<F>(p + 16 * h);
    w[2 * h] = _mm256_cvtph_ps(half.lo);
    w[2 * h + 1] = _mm256_cvtph_ps(half.hi);
  }
}

#define PLUMB_BODY_TARGET PLUMB_AVX2
#include "fp8_dots_x86_body.h"

#include "plumb/core/extent.h"
#undef PLUMB_BODY_TARGET

template <Fp8Format F>
PLUMB_AVX2 void DecodeRow(const WeightMatrix& W, int r, float* out) {
  const std::uint8_t* row = W.Row(r);
  const int cols = W.cols;
  const int full16 = cols - cols % 16;
  for (int c = 0; c < full16; c += 16) {
    __m256 w[2];
    Fp8Exact16<F>(row + c, w);
    _mm256_storeu_ps(out + c, w[0]);
    _mm256_storeu_ps(out + c + 8, w[1]);
  }
  const float* table = Fp8DecodeTable(F);
  for (int c = full16; c < cols; ++c) out[c] = table[row[c]];
}

template <Fp8Format F, bool kScaleX>
void Run(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  avx2_common::RunRowBlocks<kRows>(Fp8Dots<F, kScaleX, kRows>, Fp8Dots<F, kScaleX, 1>, W, row_begin, row_end,
                                   x, y);
}

}  // namespace

void RowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  if (W.fp8_format == Fp8Format::kE5M2) return Run<Fp8Format::kE5M2, false>(W, row_begin, row_end, x, y);
  if (CanScaleX(x, W.cols)) return Run<Fp8Format::kE4M3, true>(W, row_begin, row_end, x, y);
  return Run<Fp8Format::kE4M3, false>(W, row_begin, row_end, x, y);
}

void DecodeRows(const WeightMatrix& W, int r0, int count, float* out) {
  for (int i = 0; i < count; ++i) {
    float* row = out + Extent(i, W.cols);
    if (W.fp8_format == Fp8Format::kE5M2) {
      DecodeRow<Fp8Format::kE5M2>(W, r0 + i, row);
    } else {
      DecodeRow<Fp8Format::kE4M3>(W, r0 + i, row);
    }
  }
}

}  // namespace plumb::kernels::fp8::avx2

#endif  // defined(__x86_64__)
