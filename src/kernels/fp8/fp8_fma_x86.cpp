// The fast family's FP8 rows with AVX2 + F16C + FMA: fp8_format.cpp's FMA definition through
// fma_dots_x86.h's loop (which says why the bits match), the codes decoded to their exact values by
// Fp8Exact16 (fp8_avx2.h), NaNs included, so nothing about NaN codes needs noting apart: a NaN weight makes
// its lane, and so the dot, NaN as the definition's does.
#include "fp8_kernels.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>

#include "../fma_dots_x86.h"
#include "fp8_avx2.h"

namespace plumb::kernels::fp8::avx2 {
namespace {

template <Fp8Format F>
struct Fp8 {
  static constexpr std::size_t kBytesPer32 = 32;
  PLUMB_FMA static inline void Load32(const std::uint8_t* row, int c, __m256 w[4]) {
    avx2_shared::Fp8Exact16<F>(row + c, w);
    avx2_shared::Fp8Exact16<F>(row + c + 16, w + 2);
  }
  static float At(const std::uint8_t* row, int c) { return Fp8DecodeTable(F)[row[c]]; }
  static float Scale(const WeightMatrix& W, int r, float dot) {
    return W.fp8_scales[W.fp8_per_row ? r : 0] * dot;
  }
};

}  // namespace

void FmaRowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  if (!fma_x86::FmaSupported()) return scalar::FmaRowDots(W, row_begin, row_end, x, y);
  if (W.fp8_format == Fp8Format::kE5M2)
    return fma_x86::FmaRowDots<Fp8<Fp8Format::kE5M2>>(W, row_begin, row_end, x, y);
  return fma_x86::FmaRowDots<Fp8<Fp8Format::kE4M3>>(W, row_begin, row_end, x, y);
}

}  // namespace plumb::kernels::fp8::avx2

#endif  // defined(__x86_64__)
