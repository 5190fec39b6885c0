// The fast family's GGUF row dots (kernels/int8_activations.h): Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K,
// Q4_K, Q5_K and Q6_K rows times x quantized to int8, and their scalar definition.
//
// Definition, for row r and x quantized as QuantizeActivations defines (q_x, d_x, s_x per 32-element block):
//   w_i     the block's integer codes in element order (docs/formats.md "GGUF blocks"): Q4_0 nibble − 8,
//           Q4_1 nibble, Q5_0 (nibble | fifth bit << 4) − 16, Q5_1 nibble | fifth bit << 4, Q8_0 the int8;
//           element i < 16 of a 4- or 5-bit block is qs[i]'s low nibble, i ≥ 16 qs[i − 16]'s high one, and
//           its fifth bit is bit i of qh
//   s[b]    = Σ w_i · q_x[32b + i] over i = 0 .. 31       (int32, exact; |s| ≤ 32·128·127 < 2^24, so
//                                                         float(s) is exact too)
//   f[b]    = d_w[b] · d_x[b]                             (one float product; d_w the block's FP16 d)
//   lane[b mod 8] = fma(f[b], float(s[b]), lane[b mod 8]) for b = 0, 1, ... (lanes start at +0)
//   Q4_1, Q5_1: m_lane[b mod 8] = fma(m_w[b], s_x[b], m_lane[b mod 8])   for b = 0, 1, ... (from +0)
//   y[r]    = tree(lane) [+ tree(m_lane) for Q4_1, Q5_1], where
//   tree(l) = ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))
// One integer sum, one conversion and one FMA per block, and 8 consecutive blocks in the 8 lanes: a vector
// kernel reduces 8 blocks' integer partial sums into one vector (horizontal adds) and converts, scales and
// accumulates them with one instruction each, where converting and scaling every block on its own cost more
// than its integer work (docs/performance.md, "one FMA per block"). Every step is exact but the float ones,
// which the vector kernels repeat in order, lane by lane.
//
// The K-quants (rows of whole 256-element super-blocks; x block b = 8B + t is elements 32t .. 32t + 31 of
// super-block B):
//   w_i     the element's q (docs/formats.md "GGUF blocks"): Q2_K 0..3, Q3_K −4..3, Q4_K 0..15, Q5_K 0..31,
//           Q6_K q − 32 (−32..31)
// Q4_K and Q5_K have one scale per 32-element sub-block, so an x block is a sub-block, and they take the
// 32-element types' one sum per block (lane t = b mod 8):
//   s[b]    = Σ w_i · q_x[32b + i] over i = 0 .. 31                (|s| ≤ 32·31·127 < 2^24)
//   f[b]    = (d · float(scale_t)) · d_x[b]                        (d · scale exact, as below)
//   lane[t] = fma(f[b], float(s[b]), lane[t])                      for b = 0, 1, ...
//   m_lane[t] = fma(dmin · float(min_t), s_x[b], m_lane[t])        for b = 0, 1, ...
//   y[r]    = tree(lane) − tree(m_lane)
// Q3_K and Q6_K have one scale per 16-element sub-block, so one sum per half block (h = 0, 1), and the
// halves of x blocks t and t + 4 share a lane:
//   s[b][h] = Σ w_i · q_x[32b + i] over i = 16h .. 16h + 15
//   f[b][h] = (d · float(c_{2t+h})) · d_x[b]                      (c: Q3_K scale − 32, Q6_K scales[·])
//   lane[t mod 4 + 4h] = fma(f[b][h], float(s[b][h]), lane[t mod 4 + 4h])   for b = 0, 1, ..., h = 0, 1
//   y[r]    = tree(lane)
// Q2_K (16-element sub-blocks with a minimum each) keeps 8 lanes of the block's groups of 4 elements:
//   p[b][j] = Σ w_i · q_x[32b + i] over i = 4j .. 4j + 3          (int32, exact), j = 0..7: what x86's
//                                                                  maddubs + madd (VNNI's dpbusd) produce
//   c[b][j] the integer scale of the sub-block holding elements 4j .. 4j + 3 of x block b: Q2_K's scale of
//           sub-block 2t + j / 4 (lanes 0-3 take one, lanes 4-7 the next)
//   f[b][j] = (d · float(c[b][j])) · d_x[b]                     (d the super-block's FP16 d; d · c is exact,
//                                                                ≤ 11 + 8 significant bits, so f is the
//                                                                exact d·c·d_x rounded once)
//   lane[j] = fma(f[b][j], float(p[b][j]), lane[j])              for b = 0, 1, ...
//   Q2_K:       m_lane[j] = fma((dmin · float(min[b][j])) · d_x[b], float(σ[b][j]), m_lane[j])   for b = 0,
//               1, ...; σ[b][j] = Σ q_x[32b + i] over i = 4j .. 4j + 3, min[b][j] as c[b][j] for the mins
//   y[r]    = tree(lane) − tree(m_lane)
// (dmin · min is exact as d · c is; the m_lanes start at +0.) Q4_K's and Q5_K's minimum goes through s_x;
// Q2_K's 16-element sub-blocks do not match s_x's 32, so its minimum takes x's sums per lane, which the
// vector kernels compute once per x block for all rows.
#include <cmath>

#include "../simd/bytes.h"
#include "../simd/chunked_dot.h"
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

// One x block (32 elements, t = 0..7) of a K-quant super-block: its codes w, and the integer scale and
// minimum of its two halves (elements 0..15, 16..31; the same sub-block for Q4_K and Q5_K).
struct KBlock {
  int w[32];
  int scale[2], min[2];
};

// ggml's get_scale_min_k4 (docs/formats.md "Q4_K"): the (scale, min) pair of sub-block s.
void ScaleMinK4(const std::uint8_t* b, int s, int* scale, int* min) {
  if (s < 4) {
    *scale = b[s] & 63;
    *min = b[s + 4] & 63;
  } else {
    *scale = (b[s + 4] & 0x0F) | (b[s - 4] >> 6) << 4;
    *min = (b[s + 4] >> 4) | (b[s] >> 6) << 4;
  }
}

// Q3_K's scale s − 32 (docs/formats.md "Q3_K").
int Q3KScale(const std::uint8_t* scales, int s) {
  const int low = s < 8 ? (scales[s] & 0x0F) : (scales[s - 8] >> 4);
  const int high = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  return (low | high << 4) - 32;
}

// The integer scale and minimum of x block t's two halves (its 16-element sub-blocks 2t and 2t + 1; one
// 32-element sub-block for Q4_K and Q5_K, so both halves alike). min stays 0 for Q3_K and Q6_K.
void KScales(GgmlType type, const std::uint8_t* sb, int t, int scale[2], int min[2]) {
  for (int half = 0; half < 2; ++half) {
    const int s = 2 * t + half;  // the 16-element sub-block
    min[half] = 0;
    switch (type) {
      case GgmlType::Q2_K:
        scale[half] = sb[s] & 0x0F;
        min[half] = sb[s] >> 4;
        break;
      case GgmlType::Q3_K:
        scale[half] = Q3KScale(sb + 96, s);
        break;
      case GgmlType::Q4_K:
      case GgmlType::Q5_K:
        ScaleMinK4(sb + 4, t, &scale[half], &min[half]);
        break;
      default:  // Q6_K
        scale[half] = static_cast<std::int8_t>(sb[192 + s]);
    }
  }
}

KBlock KBlockOf(GgmlType type, const std::uint8_t* sb, int t) {
  KBlock k{};
  const int h = t / 4, kk = t % 4;  // Q2_K, Q3_K, Q6_K: element 32t + l = 128h + 32kk + l
  for (int l = 0; l < 32; ++l) {
    switch (type) {
      case GgmlType::Q2_K:
        k.w[l] = (sb[16 + 32 * h + l] >> (2 * kk)) & 3;
        break;
      case GgmlType::Q3_K:
        k.w[l] = ((sb[32 + 32 * h + l] >> (2 * kk)) & 3) - (((sb[l] >> (4 * h + kk)) & 1) != 0 ? 0 : 4);
        break;
      case GgmlType::Q4_K:
        k.w[l] = (sb[16 + 32 * (t / 2) + l] >> (4 * (t % 2))) & 0x0F;
        break;
      case GgmlType::Q5_K:
        k.w[l] = ((sb[48 + 32 * (t / 2) + l] >> (4 * (t % 2))) & 0x0F) | ((sb[16 + l] >> t) & 1) << 4;
        break;
      default: {  // Q6_K
        const int low = (sb[64 * h + 32 * (kk % 2) + l] >> (4 * (kk / 2))) & 0x0F;
        const int high = (sb[128 + 32 * h + l] >> (2 * kk)) & 3;
        k.w[l] = (low | high << 4) - 32;
      }
    }
  }
  KScales(type, sb, t, k.scale, k.min);
  return k;
}

// Rows [row_begin, row_end) of a K-quant matrix, as the definition above states.
void KRowDots(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y) {
  const KLayout layout = KLayoutOf(W.type);
  const int supers = W.cols / 256;
  for (int r = row_begin; r < row_end; ++r) {
    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    float m_lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int B = 0; B < supers; ++B) {
      const std::uint8_t* sb = W.Row(r) + Extent(B, layout.block_bytes);
      const float d = F16ToF32(ReadU16(sb + layout.d));
      const float dmin = layout.dmin >= 0 ? F16ToF32(ReadU16(sb + layout.dmin)) : 0.0f;
      for (int t = 0; t < 8; ++t) {
        const int b = 8 * B + t;
        const KBlock k = KBlockOf(W.type, sb, t);
        const std::int8_t* q = x.q.data() + Extent(b, 32);
        if (W.type == GgmlType::Q4_K || W.type == GgmlType::Q5_K) {  // one sum and one FMA per x block
          int s = 0;
          for (int i = 0; i < 32; ++i) s += k.w[i] * q[i];
          const float f = (d * static_cast<float>(k.scale[0])) * x.d[b];
          lane[t] = std::fma(f, static_cast<float>(s), lane[t]);
          m_lane[t] = std::fma(dmin * static_cast<float>(k.min[0]), x.s[b], m_lane[t]);
          continue;
        }
        if (W.type == GgmlType::Q3_K || W.type == GgmlType::Q6_K) {  // one sum and one FMA per half block
          for (int half = 0; half < 2; ++half) {
            int s = 0;
            for (int i = 16 * half; i < 16 * half + 16; ++i) s += k.w[i] * q[i];
            const float f = (d * static_cast<float>(k.scale[half])) * x.d[b];
            lane[t % 4 + 4 * half] = std::fma(f, static_cast<float>(s), lane[t % 4 + 4 * half]);
          }
          continue;
        }
        for (int j = 0; j < 8; ++j) {
          int p = 0, sigma = 0;
          for (int i = 4 * j; i < 4 * j + 4; ++i) {
            p += k.w[i] * q[i];
            sigma += q[i];
          }
          const float f = (d * static_cast<float>(k.scale[j / 4])) * x.d[b];
          lane[j] = std::fma(f, static_cast<float>(p), lane[j]);
          if (W.type == GgmlType::Q2_K) {
            const float g = (dmin * static_cast<float>(k.min[j / 4])) * x.d[b];
            m_lane[j] = std::fma(g, static_cast<float>(sigma), m_lane[j]);
          }
        }
      }
    }
    const float dot = ReduceLanes(lane);
    y[r] = layout.dmin >= 0 ? dot - ReduceLanes(m_lane) : dot;
  }
}

}  // namespace

void KSubBlockScales(GgmlType type, const std::uint8_t* sb, int scale[16], int min[16]) {
  for (int t = 0; t < 8; ++t) KScales(type, sb, t, scale + 2 * t, min + 2 * t);
}

bool HasInt8Type(GgmlType type) {
  return KLayoutOf(type).block_bytes != 0 || Int8LayoutOf(type).block_bytes != 0;
}

bool HasInt8(const WeightMatrix& W) {
  if (KLayoutOf(W.type).block_bytes != 0) return W.cols % 256 == 0;
  return Int8LayoutOf(W.type).block_bytes != 0 && W.cols % 32 == 0;
}

bool HasInt8Gemm(const WeightMatrix& W) {
  return Int8LayoutOf(W.type).block_bytes != 0 && W.cols % 32 == 0;
}

namespace scalar {

void Int8RowDots(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y) {
  if (KLayoutOf(W.type).block_bytes != 0) return KRowDots(W, row_begin, row_end, x, y);
  const int blocks = W.cols / 32;
  const Int8Layout layout = Int8LayoutOf(W.type);
  for (int r = row_begin; r < row_end; ++r) {
    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    float m_lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int b = 0; b < blocks; ++b) {
      const std::uint8_t* block = W.Row(r) + Extent(b, layout.block_bytes);
      int w[32];
      BlockCodes(W.type, block, w);
      const std::int8_t* q = x.q.data() + Extent(b, 32);
      const float f = F16ToF32(ReadU16(block)) * x.d[b];
      int s = 0;
      for (int i = 0; i < 32; ++i) s += w[i] * q[i];
      lane[b % 8] = std::fma(f, static_cast<float>(s), lane[b % 8]);
      if (layout.has_min) m_lane[b % 8] = std::fma(F16ToF32(ReadU16(block + 2)), x.s[b], m_lane[b % 8]);
    }
    const float dot = ReduceLanes(lane);
    y[r] = layout.has_min ? dot + ReduceLanes(m_lane) : dot;
  }
}

}  // namespace scalar
}  // namespace plumb::kernels::ggml
