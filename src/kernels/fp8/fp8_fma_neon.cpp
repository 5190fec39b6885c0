// The fast family's FP8 rows with NEON: fp8_format.cpp's FMA definition through fma_dots_neon.h's loop
// (which says why the bits match), the codes decoded to their exact values by DecodeFp8 (fp8_neon.h), NaNs
// included.
#include "fp8_kernels.h"

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cstdint>

#include "../simd/fma_dots_neon.h"
#include "fp8_neon.h"

namespace plumb::kernels::fp8::neon {
namespace {

template <Fp8Format F>
struct Fp8 {
  static void Load32(const std::uint8_t* row, int c, float32x4_t w[8]) {
    for (int h = 0; h < 4; ++h) {
      const neon_lanes::Lanes8 v = DecodeFp8<F>(vld1_u8(row + c + 8 * h));
      w[2 * h] = v.lo;
      w[2 * h + 1] = v.hi;
    }
  }
  static float At(const std::uint8_t* row, int c) { return Fp8DecodeTable(F)[row[c]]; }
  static float Scale(const WeightMatrix& W, int r, float dot) {
    return W.fp8_scales[W.fp8_per_row ? r : 0] * dot;
  }
};

}  // namespace

void FmaRowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  if (W.fp8_format == Fp8Format::kE5M2)
    return fma_neon::FmaRowDots<Fp8<Fp8Format::kE5M2>>(W, row_begin, row_end, x, y);
  return fma_neon::FmaRowDots<Fp8<Fp8Format::kE4M3>>(W, row_begin, row_end, x, y);
}

}  // namespace plumb::kernels::fp8::neon

#endif  // defined(__aarch64__)
