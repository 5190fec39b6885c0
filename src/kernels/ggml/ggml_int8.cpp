// The fast family's GGUF row dots (kernels/int8_activations.h): Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 rows times x
// quantized to int8, and their scalar definition.
//
// Definition, for row r and x quantized as QuantizeActivations defines (q_x, d_x, s_x per 32-element block):
//   w_i     the block's integer codes in element order (docs/formats.md "GGUF blocks"): Q4_0 nibble − 8,
//           Q4_1 nibble, Q5_0 (nibble | fifth bit << 4) − 16, Q5_1 nibble | fifth bit << 4, Q8_0 the int8;
//           element i < 16 of a 4- or 5-bit block is qs[i]'s low nibble, i ≥ 16 qs[i − 16]'s high one, and
//           its fifth bit is bit i of qh
//   p[b][j] = Σ w_i · q_x[32b + i] over i = 4j .. 4j + 3        (int32, exact), j = 0..7
//   f[b]    = d_w[b] · d_x[b]                                    (one float product; d_w the block's FP16 d)
//   lane[j] = fma(f[b], float(p[b][j]), lane[j])                 for b = 0, 1, ... (lanes start at +0)
//   Q4_1, Q5_1: m_sum = fma(m_w[b], s_x[b], m_sum)               for b = 0, 1, ... (starts at +0)
//   y[r]    = ((lane0 + lane4) + (lane2 + lane6)) + ((lane1 + lane5) + (lane3 + lane7))  [+ m_sum for Q4_1,
//             Q5_1]
// The grouping of 4 products per lane is what x86's maddubs + madd (and VNNI's dpbusd) produce, so the
// vector kernels need no reordering; every step is exact but the float ones, which they repeat in order.
#include <cmath>

#include "../bytes.h"
#include "../chunked_dot.h"
#include "ggml_kernels.h"
#include "plumb/core/extent.h"
#include "plumb/formats/dtype.h"
#include "plumb/kernels/int8_activations.h"

namespace plumb::kernels::ggml {
namespace {

// The 32 integer codes of one block, in element order.
void BlockCodes(GgmlType type, const std::uint8_t* block, int w[32]) {
  if (type == GgmlType::Q8_0) {
    for (int i = 0; i < 32; ++i) w[i] = static_cast<std::int8_t>(block[2 + i]);
    return;
  }
  const Int8Layout layout = Int8LayoutOf(type);
  const std::uint8_t* qs = block + layout.qs;
  const std::uint32_t qh = layout.five_bits ? ReadU32(qs - 4) : 0;
  for (int i = 0; i < 16; ++i) {
    w[i] = ((qs[i] & 0x0F) | static_cast<int>((qh >> i) & 1) << 4) - layout.offset;
    w[i + 16] = ((qs[i] >> 4) | static_cast<int>((qh >> (i + 16)) & 1) << 4) - layout.offset;
  }
}

}  // namespace

bool HasInt8(const WeightMatrix& W) {
  return Int8LayoutOf(W.type).block_bytes != 0 && W.cols % 32 == 0;
}

namespace scalar {

void Int8RowDots(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y) {
  const int blocks = W.cols / 32;
  const Int8Layout layout = Int8LayoutOf(W.type);
  for (int r = row_begin; r < row_end; ++r) {
    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    float m_sum = 0.0f;
    for (int b = 0; b < blocks; ++b) {
      const std::uint8_t* block = W.Row(r) + Extent(b, layout.block_bytes);
      int w[32];
      BlockCodes(W.type, block, w);
      const std::int8_t* q = x.q.data() + Extent(b, 32);
      const float f = F16ToF32(ReadU16(block)) * x.d[b];
      for (int j = 0; j < 8; ++j) {
        int p = 0;
        for (int i = 4 * j; i < 4 * j + 4; ++i) p += w[i] * q[i];
        lane[j] = std::fma(f, static_cast<float>(p), lane[j]);
      }
      if (layout.has_min) m_sum = std::fma(F16ToF32(ReadU16(block + 2)), x.s[b], m_sum);
    }
    const float dot = ReduceLanes(lane);
    y[r] = layout.has_min ? dot + m_sum : dot;
  }
}

}  // namespace scalar
}  // namespace plumb::kernels::ggml
