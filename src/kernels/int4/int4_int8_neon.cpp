// The fast family's INT4 row dots on NEON: int4_int8.cpp's definition, bit for bit, with sdot where the CPU
// has the dotprod extension and plain NEON otherwise; the loop is int4_int8_neon_body.h, compiled once for
// each.
//
// Per block, x's 32 codes are split once into its even and odd columns (vuzp1/vuzp2), for all the rows
// computed together; a row's 16 code bytes give the even columns' codes in their low nibbles and the odd
// ones' in their high nibbles, as signed bytes (sym (n ^ 8) − 8, asym n − z, asym-f16zero n), so one sum of
// each half (int8_sums_neon.h: sdot, or vmull_s8 and pairwise adds without dotprod; the same integers)
// makes lanes 0-3 and 4-7 of the definition's p[b][j].
// The float steps are the definition's: f = s·d_x, vfmaq_f32 (fused, as std::fma) per lane, the f16-zero
// term's chain of scalar FMAs, the lanes' tree.
#include "int4_kernels.h"

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cstdint>

#include "../int8_activations/int8_sums_neon.h"
#include "../simd/bytes.h"
#include "../simd/chunked_dot.h"
#include "../simd/neon_lanes.h"
#include "plumb/core/extent.h"
#include "plumb/formats/dtype.h"
#include "plumb/kernels/int8_activations.h"

namespace plumb::kernels::int4 {
namespace {

constexpr int kRows = 4;

namespace with_sdot {
#define PLUMB_BODY_TARGET PLUMB_INT8_DOTPROD
PLUMB_BODY_TARGET inline int32x4_t Sums(int8x16_t c, int8x16_t q) {
  return int8_sums::SdotSums(c, q);
}
#include "int4_int8_neon_body.h"
#undef PLUMB_BODY_TARGET
}  // namespace with_sdot

namespace plain {
#define PLUMB_BODY_TARGET
inline int32x4_t Sums(int8x16_t c, int8x16_t q) {
  return int8_sums::PlainSums(c, q);
}
#include "int4_int8_neon_body.h"
#undef PLUMB_BODY_TARGET
}  // namespace plain

}  // namespace

namespace neon {

void Int8RowDotsPath(bool sdot, const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x,
                     float* y) {
  if (sdot) return with_sdot::RunAnyScheme(W, row_begin, row_end, x, y);
  plain::RunAnyScheme(W, row_begin, row_end, x, y);
}

void Int8RowDots(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y) {
  Int8RowDotsPath(int8_sums::HasDotprod(), W, row_begin, row_end, x, y);
}

}  // namespace neon
}  // namespace plumb::kernels::int4

#endif  // defined(__aarch64__)
