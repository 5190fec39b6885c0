// The fast family's INT4 row dots on x86: int4_int8.cpp's definition, bit for bit, with AVX2 + FMA (maddubs
// + madd) and with AVX-512 VNNI (dpbusd); the loop is int4_int8_x86_body.h, compiled once for each.
//
// Per block and row, the 16 code bytes become one register of 32 nibbles: the low nibbles (even columns) in
// bytes 0-15, the high ones (odd columns) in bytes 16-31, so lane j's four bytes are the definition's p[b][j]
// columns; x's 32 codes are put in the same order once per block, for all the rows computed together. The
// integer sums, per scheme:
//   sym           u = nibble ^ 8 = c + 8 (unsigned, 0 … 15): Σ c·q = Σ u·q − 8·Σ q, the four-element sums
//                 Σ q computed once per block for every row (VNNI starts each dpbusd from −8·Σ q, so the
//                 correction costs no instruction per row)
//   asym          c = nibble − z as signed bytes: |c| on the unsigned side and c's sign moved onto x's
//                 (sign_epi8), the same products
//   asym-f16zero  the nibbles, unsigned
// maddubs's int16 pairs cannot saturate (|u|, |c| ≤ 15 and |q| ≤ 127). Every sum is exact, |p| < 2^24
// converts exactly, and the float steps are the definition's: f = s·d_x, one FMA per lane, the f16-zero
// term's chain of scalar FMAs, the lanes' tree (FMA is part of kAvx2, kernels/isa.h). A CPU with
// AVX-512 but no VNNI (Skylake-X) runs the AVX2 variant. Each also has an int8_gemm
// (int4_int8_gemm_x86_body.h): several x rows per pass over a block of weight rows, each pair bitwise its
// Dots.
#include "int4_kernels.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>

#include "../int8_activations/int8_gemm_tiling.h"
#include "../int8_activations/int8_sums_x86.h"
#include "../simd/avx2_common.h"
#include "plumb/core/extent.h"
#include "plumb/kernels/int8_activations.h"
#include "plumb/kernels/isa.h"
#include "plumb/kernels/weight_format.h"

namespace plumb::kernels::int4 {
namespace {

constexpr int kRows = 4;

namespace with_avx2 {
#define PLUMB_BODY_TARGET PLUMB_INT8_AVX2
PLUMB_BODY_TARGET inline __m256i AddPartials(__m256i acc, __m256i u, __m256i q) {
  return int8_sums::Avx2(acc, u, q);
}
#include "int4_int8_x86_body.h"
constexpr int kGemmRows = 2;  // weight rows per register block: 16 vector registers
#include "int4_int8_gemm_x86_body.h"
#undef PLUMB_BODY_TARGET
}  // namespace with_avx2

namespace with_vnni {
#define PLUMB_BODY_TARGET PLUMB_INT8_VNNI
PLUMB_BODY_TARGET inline __m256i AddPartials(__m256i acc, __m256i u, __m256i q) {
  return int8_sums::Vnni(acc, u, q);
}
#include "int4_int8_x86_body.h"
constexpr int kGemmRows = 4;  // weight rows per register block: 32 vector registers
#include "int4_int8_gemm_x86_body.h"
#undef PLUMB_BODY_TARGET
}  // namespace with_vnni

}  // namespace

namespace avx2 {
void Int8RowDots(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y) {
  with_avx2::RunAnyScheme(W, row_begin, row_end, x, y);
}
void Int8Gemm(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs, int m, float* Y,
              std::size_t ldy) {
  with_avx2::GemmAnyScheme(W, row_begin, row_end, xs, m, Y, ldy);
}
}  // namespace avx2

namespace avx512 {
void Int8RowDots(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y) {
  if (!HasAvx512Vnni()) return avx2::Int8RowDots(W, row_begin, row_end, x, y);
  with_vnni::RunAnyScheme(W, row_begin, row_end, x, y);
}
void Int8Gemm(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs, int m, float* Y,
              std::size_t ldy) {
  if (!HasAvx512Vnni()) return avx2::Int8Gemm(W, row_begin, row_end, xs, m, Y, ldy);
  with_vnni::GemmAnyScheme(W, row_begin, row_end, xs, m, Y, ldy);
}
}  // namespace avx512

}  // namespace plumb::kernels::int4

#endif  // defined(__x86_64__)
