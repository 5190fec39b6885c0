// The fast family's GGUF row dots with NEON: ggml_int8.cpp's definition, bit for bit (the K-quants:
// kquant_int8_neon.h, included below). A block's 32 weight codes are made as int8 in element order, elements
// 0-15 (the low nibbles) in one register and 16-31 (the high ones) in another. Every code fits int8 (Q4_1's
// and Q5_1's unsigned 0..31 too), so one signed multiply serves every type. With the dotprod extension one
// sdot (vdotq_s32) makes four sums of 4 products from 16 codes; without it vmull_s8 makes the 16 products
// in int16 (|w·q| ≤ 128·127: exact) and two pairwise widening adds group them in fours. Both are the exact
// integers. Two pairwise adds turn 4 blocks' partial sums into one vector of their block sums s, so the
// definition's float steps run 4 blocks to an instruction: f = d_w·d_x (one product per lane), lane =
// fma(f, float(s), lane) as vfmaq_f32 (fused, as std::fma is) on lanes 0-3 for blocks 8k .. 8k + 3 and 4-7
// for the next 4, Q4_1/Q5_1's m_lane likewise, and ReduceLanes' tree. kRows rows at a time share each
// block's load of x. Its int8_gemm is the row dots per x row, over chunks of weight rows.
//
// Whether the CPU has dotprod is read once from the kernel's HWCAP. Only the sdot path is compiled for
// armv8.2-a+dotprod (GCC 12's arm_neon.h declares vdotq_s32 for that target, and every CPU with dotprod
// implements it), so nothing of it reaches a CPU without; the plain path is built for the base architecture.
#include "ggml_kernel_table.h"
#include "ggml_kernels.h"

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

#include "../int8_activations/int8_sums_neon.h"
#include "../simd/bytes.h"
#include "../simd/neon_lanes.h"
#include "plumb/core/extent.h"
#include "plumb/kernels/int8_activations.h"
#include "plumb/kernels/weight_format.h"

namespace plumb::kernels::ggml::neon {
namespace {

using neon_lanes::Lanes8;

constexpr int kRows = 4;

// 32 int8 codes in element order: [0, 16) in lo, [16, 32) in hi.
struct Codes32 {
  int8x16_t lo;
  int8x16_t hi;
};

inline Codes32 Load32(const std::uint8_t* p) {
  return {vreinterpretq_s8_u8(vld1q_u8(p)), vreinterpretq_s8_u8(vld1q_u8(p + 16))};
}

// Byte i = 0x10 where bit i of the low 16 bits is set, else 0: elements' fifth bits (qh) in place.
inline uint8x16_t FifthBits(std::uint32_t bits) {
  static constexpr std::uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t bytes = vcombine_u8(vdup_n_u8(static_cast<std::uint8_t>(bits)),
                                       vdup_n_u8(static_cast<std::uint8_t>(bits >> 8)));
  return vandq_u8(vtstq_u8(bytes, vld1q_u8(kBit)), vdupq_n_u8(0x10));
}

// BlockCodes of ggml_int8.cpp.
template <GgmlType kType>
inline Codes32 Codes(const std::uint8_t* block) {
  if constexpr (kType == GgmlType::Q8_0) {
    return Load32(block + 2);
  } else {
    constexpr Int8Layout kLayout = Int8LayoutOf(kType);
    const uint8x16_t qs = vld1q_u8(block + kLayout.qs);
    uint8x16_t lo = vandq_u8(qs, vdupq_n_u8(0x0F));
    uint8x16_t hi = vshrq_n_u8(qs, 4);
    if constexpr (kLayout.five_bits) {
      const std::uint32_t qh = ReadU32(block + kLayout.qs - 4);
      lo = vorrq_u8(lo, FifthBits(qh));
      hi = vorrq_u8(hi, FifthBits(qh >> 16));
    }
    if constexpr (kLayout.offset != 0) {  // wraps mod 256: the signed code − offset
      lo = vsubq_u8(lo, vdupq_n_u8(kLayout.offset));
      hi = vsubq_u8(hi, vdupq_n_u8(kLayout.offset));
    }
    return {vreinterpretq_s8_u8(lo), vreinterpretq_s8_u8(hi)};
  }
}

using int8_sums::PlainSums;
using int8_sums::SdotSums;

// The FP16s at p, p + stride, p + 2·stride and p + 3·stride as floats (exact).
inline float32x4_t Halves4(const std::uint8_t* p, int stride) {
  const std::uint16_t h[4] = {ReadU16(p), ReadU16(p + stride), ReadU16(p + 2 * stride),
                              ReadU16(p + 3 * stride)};
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
}

// The definition's end for one row: its lanes (and m_lanes) stored, the blocks from `first` on (fewer than
// 4) added one at a time, and the trees.
template <GgmlType kType, class Sums>
inline float FinishRow(const float32x4_t lane[2], const float32x4_t m_lane[2], const std::uint8_t* row,
                       int first, const Int8Activations& x, Sums sums) {
  constexpr int kB = Int8LayoutOf(kType).block_bytes;
  float l[8], m[8];
  vst1q_f32(l, lane[0]);
  vst1q_f32(l + 4, lane[1]);
  vst1q_f32(m, m_lane[0]);
  vst1q_f32(m + 4, m_lane[1]);
  for (int b = first; b < x.n / 32; ++b) {
    const std::uint8_t* block = row + Extent(b, kB);
    const Codes32 w = Codes<kType>(block);
    const Codes32 q = Load32(reinterpret_cast<const std::uint8_t*>(x.q.data() + Extent(b, 32)));
    const int s = vaddvq_s32(vaddq_s32(sums(w.lo, q.lo), sums(w.hi, q.hi)));
    const float f = vgetq_lane_f32(neon_lanes::HalfBroadcast(block), 0) * x.d[b];
    l[b % 8] = __builtin_fmaf(f, static_cast<float>(s), l[b % 8]);
    if constexpr (Int8LayoutOf(kType).has_min) {
      m[b % 8] = __builtin_fmaf(vgetq_lane_f32(neon_lanes::HalfBroadcast(block + 2), 0), x.s[b], m[b % 8]);
    }
  }
  const float dot = neon_lanes::ReduceLanes(l);
  return Int8LayoutOf(kType).has_min ? dot + neon_lanes::ReduceLanes(m) : dot;
}

// NAME<kType, R>(W, r0, x, y): rows r0 .. r0 + R − 1 into y[r0 ..], with SUMS making the integer sums. A
// macro because it is defined twice, for the two targets: GCC fixes a function's target where it is
// defined, and vdotq_s32 inlines only into a dotprod one.
#define PLUMB_INT8_NEON_DOTS(NAME, TARGET, SUMS)                                                           \
  template <GgmlType kType, int R>                                                                         \
  TARGET void NAME(const WeightMatrix& W, int r0, const Int8Activations& x, float* y) {                    \
    constexpr int kB = Int8LayoutOf(kType).block_bytes;                                                    \
    const int blocks = W.cols / 32;                                                                        \
    const std::uint8_t* row[R];                                                                            \
    float32x4_t lane[R][2], m_lane[R][2];                                                                  \
    for (int r = 0; r < R; ++r) {                                                                          \
      row[r] = W.Row(r0 + r);                                                                              \
      lane[r][0] = lane[r][1] = m_lane[r][0] = m_lane[r][1] = vdupq_n_f32(0.0f);                           \
    }                                                                                                      \
    int b = 0;                                                                                             \
    for (; b + 4 <= blocks; b += 4) {                                                                      \
      const int half = (b / 4) % 2; /* lanes 0-3: blocks 8k .. 8k + 3; 4-7: the next 4 */                  \
      Codes32 q[4];                                                                                        \
      for (int t = 0; t < 4; ++t)                                                                          \
        q[t] = Load32(reinterpret_cast<const std::uint8_t*>(x.q.data() + Extent(b + t, 32)));              \
      const float32x4_t d_x = vld1q_f32(x.d.data() + b);                                                   \
      for (int r = 0; r < R; ++r) {                                                                        \
        const std::uint8_t* group = row[r] + Extent(b, kB);                                                \
        int32x4_t p[4];                                                                                    \
        for (int t = 0; t < 4; ++t) {                                                                      \
          const Codes32 w = Codes<kType>(group + t * kB);                                                  \
          p[t] = vaddq_s32(SUMS(w.lo, q[t].lo), SUMS(w.hi, q[t].hi));                                      \
        }                                                                                                  \
        const int32x4_t s = vpaddq_s32(vpaddq_s32(p[0], p[1]), vpaddq_s32(p[2], p[3]));                    \
        const float32x4_t f = vmulq_f32(Halves4(group, kB), d_x);                                          \
        lane[r][half] = vfmaq_f32(lane[r][half], f, vcvtq_f32_s32(s));                                     \
        if constexpr (Int8LayoutOf(kType).has_min) {                                                       \
          m_lane[r][half] = vfmaq_f32(m_lane[r][half], Halves4(group + 2, kB), vld1q_f32(x.s.data() + b)); \
        }                                                                                                  \
      }                                                                                                    \
    }                                                                                                      \
    for (int r = 0; r < R; ++r) {                                                                          \
      y[r0 + r] = FinishRow<kType>(lane[r], m_lane[r], row[r], b, x,                                       \
                                   [](int8x16_t c, int8x16_t v) { return SUMS(c, v); });                   \
    }                                                                                                      \
  }

PLUMB_INT8_NEON_DOTS(SdotDots, PLUMB_INT8_DOTPROD, SdotSums)
PLUMB_INT8_NEON_DOTS(PlainDots, , PlainSums)

#undef PLUMB_INT8_NEON_DOTS

}  // namespace
#include "kquant_int8_neon.h"
namespace {

using DotsFn = void (*)(const WeightMatrix&, int, const Int8Activations&, float*);

// Rows in groups of kRows by Group, then one at a time by Single.
template <DotsFn Group, DotsFn Single>
void RunRows(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y) {
  int r = row_begin;
  for (; r + kRows <= row_end; r += kRows) Group(W, r, x, y);
  for (; r < row_end; ++r) Single(W, r, x, y);
}

template <GgmlType kType, bool kSdot>
void Run(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y) {
  constexpr bool kK = KLayoutOf(kType).block_bytes != 0;
  if constexpr (kSdot && kK) {
    RunRows<KSdotDots<kType, kRows>, KSdotDots<kType, 1>>(W, row_begin, row_end, x, y);
  } else if constexpr (kK) {
    RunRows<KPlainDots<kType, kRows>, KPlainDots<kType, 1>>(W, row_begin, row_end, x, y);
  } else if constexpr (kSdot) {
    RunRows<SdotDots<kType, kRows>, SdotDots<kType, 1>>(W, row_begin, row_end, x, y);
  } else {
    RunRows<PlainDots<kType, kRows>, PlainDots<kType, 1>>(W, row_begin, row_end, x, y);
  }
}

// Each type HasInt8 accepts (every one the definition covers), entered with its own kernel on one path.
template <bool kSdot, GgmlType... kTypes>
void EnterTypes(GgmlKernelTable& table) {
  ((table.At(kTypes, Isa::kNeon).int8_row_dots = Run<kTypes, kSdot>,
    table.At(kTypes, Isa::kNeon).int8_gemm = Int8GemmByRowChunks<Run<kTypes, kSdot>>),
   ...);
}

template <bool kSdot>
void EnterPath(GgmlKernelTable& table) {
  EnterTypes<kSdot, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
             GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K>(table);
}

// Both paths' columns, for the functions below that take the path as an argument (the tests run both).
const GgmlKernelTable& PathTable(bool sdot) {
  static const GgmlKernelTable sdot_table = [] {
    GgmlKernelTable t;
    EnterPath<true>(t);
    return t;
  }();
  static const GgmlKernelTable plain_table = [] {
    GgmlKernelTable t;
    EnterPath<false>(t);
    return t;
  }();
  return sdot ? sdot_table : plain_table;
}

}  // namespace

void FillInt8(GgmlKernelTable& table) {
  if (int8_sums::HasDotprod()) return EnterPath<true>(table);
  EnterPath<false>(table);
}

void Int8RowDotsPath(bool sdot, const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x,
                     float* y) {
  const Int8RowDotsFn dots = PathTable(sdot).At(W.type, Isa::kNeon).int8_row_dots;
  if (dots == nullptr) return scalar::Int8RowDots(W, row_begin, row_end, x, y);  // no type HasInt8 accepts
  dots(W, row_begin, row_end, x, y);
}

void Int8RowDots(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y) {
  Int8RowDotsPath(int8_sums::HasDotprod(), W, row_begin, row_end, x, y);
}

void Int8GemmPath(bool sdot, const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs,
                  int m, float* Y, std::size_t ldy) {
  const Int8GemmFn gemm = PathTable(sdot).At(W.type, Isa::kNeon).int8_gemm;
  if (gemm == nullptr) return Int8GemmByRowChunks<scalar::Int8RowDots>(W, row_begin, row_end, xs, m, Y, ldy);
  gemm(W, row_begin, row_end, xs, m, Y, ldy);
}

void Int8Gemm(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs, int m, float* Y,
              std::size_t ldy) {
  Int8GemmPath(int8_sums::HasDotprod(), W, row_begin, row_end, xs, m, Y, ldy);
}

}  // namespace plumb::kernels::ggml::neon

#endif  // defined(__aarch64__)
