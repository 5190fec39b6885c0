// The fast family's GGUF row dots with AVX2, FMA and F16C: ggml_int8.cpp's definition, bit for bit.
//
// Per 32-element block and row: the 32 weight codes in element order in one register (4-bit blocks: the 16
// low nibbles in bytes 0-15, the high ones in bytes 16-31), x's 32 int8 codes in another; maddubs multiplies
// unsigned by signed bytes and adds adjacent pairs into int16, madd with ones adds adjacent int16 pairs into
// int32: lane j = Σ of the products of elements 4j .. 4j + 3, the definition's p[b][j]. Q4_1's codes are
// unsigned already; Q4_0's and Q8_0's signed ones go in as |w| with w's sign moved onto x (sign_epi8), the
// same products. No int16 saturates: |x| ≤ 127 and |w| ≤ 128, so a pair is at most 2·128·127 = 32512. The
// int32 lanes convert exactly (|p| < 2^24) and the FMA into the 8 float lanes is the definition's.
// The loop is int8_dots_x86_body.h, shared with the AVX-512 VNNI variant.
#include "ggml_kernels.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>

#include "../avx2_common.h"
#include "../int8_gemm_tiling.h"
#include "../int8_sums_x86.h"
#include "plumb/core/extent.h"
#include "plumb/kernels/int8_activations.h"
#include "plumb/kernels/weight_format.h"

namespace plumb::kernels::ggml::avx2 {
namespace {

constexpr int kRows = 4;

// acc + p[j] for unsigned codes u (int8_sums_x86.h).
PLUMB_INT8_AVX2 inline __m256i AddPartials(__m256i acc, __m256i u, __m256i q) {
  return int8_sums::Avx2(acc, u, q);
}

#define PLUMB_I8_TARGET PLUMB_INT8_AVX2
#include "int8_dots_x86_body.h"

// 16 vector registers: 2 weight rows × 4 x rows of accumulators; maddubs's int16 pairs take unsigned codes
// only up to 128, so Q8_0 keeps Dots's sign moving.
constexpr int kGemmRows = 2;
constexpr bool kWideUnsigned = false;
#include "int8_gemm_x86_body.h"
#undef PLUMB_I8_TARGET

}  // namespace

void Int8RowDots(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y) {
  static const bool fma = __builtin_cpu_supports("fma");
  if (!fma) return scalar::Int8RowDots(W, row_begin, row_end, x, y);
  RunAnyType(W, row_begin, row_end, x, y);
}

void Int8Gemm(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs, int m, float* Y,
              std::size_t ldy) {
  static const bool fma = __builtin_cpu_supports("fma");
  if (!fma) return Int8GemmByRows<scalar::Int8RowDots>(W, row_begin, row_end, xs, m, Y, ldy);
  GemmAnyType(W, row_begin, row_end, xs, m, Y, ldy);
}

}  // namespace plumb::kernels::ggml::avx2

#endif  // defined(__x86_64__)
