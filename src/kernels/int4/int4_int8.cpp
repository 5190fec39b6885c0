// The fast family's INT4 row dots (kernels/int8_activations.h): packed INT4 rows, every scheme and group
// size, times x quantized to int8, and their scalar definition.
//
// Definition, for row r of a matrix whose columns are whole 32-element blocks, and x quantized as
// QuantizeActivations defines (q_x, d_x, s_x per block). Every group size (32, 64, 128) is a multiple of 32,
// so block b lies in the one group g = 32b / G, with FP16 scale s_g (and zero point z_g):
//   c_k       column k's integer code (formats/int4.h): sym the nibble as two's complement (−8 … 7); asym
//             the nibble minus z_g's nibble (−15 … 15); asym-f16zero the nibble (0 … 15)
//   p[b][j] = Σ c_k · q_x[k] over the four columns k = 32b + 2i + h, i = 4(j mod 4) … 4(j mod 4) + 3, with
//             h = 0 for j < 4 and h = 1 for j ≥ 4                  (int32, exact), j = 0..7
//   f[b]    = s_g · d_x[b]                                           (one float product)
//   lane[j] = fma(f[b], float(p[b][j]), lane[j])                     for b = 0, 1, ... (lanes start at +0)
//   asym-f16zero: z_sum = fma(s_g · z_g, s_x[b], z_sum)              (s_g · z_g one float product; from +0)
//   y[r]    = ((lane0 + lane4) + (lane2 + lane6)) + ((lane1 + lane5) + (lane3 + lane7))  [− z_sum]
// Lanes 0-3 take the even columns and lanes 4-7 the odd ones: a block's 16 code bytes hold the even columns
// in their low nibbles and the odd ones in their high nibbles (docs/formats.md "INT4"), so the vector
// kernels use the nibbles where they lie and reorder x once per block for all the rows they compute, not
// the codes of every row. The f16-zero scheme's (q − z)·s·x is s·q·x − (s·z)·x, and Σ x over a block is
// s_x. Every step is exact but the float ones, which the vector kernels repeat in this order.
#include <cmath>
#include <cstddef>

#include "../simd/bytes.h"
#include "../simd/chunked_dot.h"
#include "int4_kernels.h"
#include "plumb/core/extent.h"
#include "plumb/formats/dtype.h"
#include "plumb/kernels/int8_activations.h"

namespace plumb::kernels::int4 {

bool HasInt8(const WeightMatrix& W) {
  return W.cols % 32 == 0;
}

namespace scalar {

void Int8RowDots(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y) {
  const int G = W.int4.group_size;
  const int groups = Int4Groups(W.cols, G);
  const std::size_t zero_row = Int4ZeroRowBytes(W.int4, W.cols);
  for (int r = row_begin; r < row_end; ++r) {
    const std::uint8_t* codes = W.Row(r);
    const std::uint16_t* scales = W.int4_scales + Extent(r, groups);
    const std::uint8_t* zeros = W.int4_zeros == nullptr ? nullptr : W.int4_zeros + Extent(r, zero_row);
    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    float z_sum = 0.0f;
    for (int b = 0; b < W.cols / 32; ++b) {
      const int g = 32 * b / G;
      const float s = F16ToF32(scales[g]);
      int zero = 0;
      if (W.int4.scheme == Int4Scheme::kAsymmetric) zero = static_cast<int>(Int4Code(zeros, g));
      const std::int8_t* q = x.q.data() + Extent(b, 32);
      const float f = s * x.d[b];
      for (int j = 0; j < 8; ++j) {
        int p = 0;
        for (int i = 4 * (j % 4); i < 4 * (j % 4) + 4; ++i) {
          const int k = 2 * i + (j < 4 ? 0 : 1);
          const int nibble = static_cast<int>(Int4Code(codes, 32 * b + k));
          const int c = W.int4.scheme == Int4Scheme::kSymmetric ? (nibble ^ 8) - 8 : nibble - zero;
          p += c * q[k];
        }
        lane[j] = std::fma(f, static_cast<float>(p), lane[j]);
      }
      if (W.int4.scheme == Int4Scheme::kAsymmetricF16Zero) {
        z_sum = std::fma(s * F16ToF32(ReadU16(zeros + Extent(g, 2))), x.s[b], z_sum);
      }
    }
    const float dot = ReduceLanes(lane);
    y[r] = W.int4.scheme == Int4Scheme::kAsymmetricF16Zero ? dot - z_sum : dot;
  }
}

}  // namespace scalar
}  // namespace plumb::kernels::int4
