// The fast family's GGUF row dots with NEON: ggml_int8.cpp's definition, bit for bit (the K-quants:
// kquant_int8_neon.h, included below). A block's 32 weight
// codes are made as int8 in element order, elements 0-15 (the low nibbles) in one register and 16-31 (the
// high ones) in another, so that the definition's p[b][j], the sum of the products of elements 4j .. 4j + 3,
// is lane j mod 4 of an int32 vector. Every code fits int8 (Q4_1's and Q5_1's unsigned 0..31 too), so one
// signed multiply serves every type. With the dotprod extension one sdot (vdotq_s32) makes four of the sums
// from 16 codes; without it vmull_s8 makes the 16 products in int16 (|w·q| ≤ 128·127: exact) and two
// pairwise widening adds group them in fours. Both are the exact integers. The float steps are the
// definition's, in its order: f = d_w·d_x (one product), lane = fma(f, float(p), lane) as vfmaq_f32 (fused,
// as std::fma is) on lanes 0-3 and 4-7, Q4_1/Q5_1's m_sum as a scalar fma in block order, and ReduceLanes'
// tree. kRows rows at a time share each block's load of x. Its int8_gemm takes several x rows per pass over
// a block of weight rows, each weight block's codes made once for all of them, and is bitwise Int8RowDots
// per x row (Int8RowDots has the K-quants' scalar definition; so does the gemm, per x row).
//
// Whether the CPU has dotprod is read once from the kernel's HWCAP. Only the sdot path is compiled for
// armv8.2-a+dotprod (GCC 12's arm_neon.h declares vdotq_s32 for that target, and every CPU with dotprod
// implements it), so nothing of it reaches a CPU without; the plain path is built for the base architecture.
#include "ggml_kernels.h"

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

#include "../bytes.h"
#include "../int8_gemm_tiling.h"
#include "../int8_sums_neon.h"
#include "../neon_lanes.h"
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

// One row's lanes and m_sum, and the definition's float steps on them.
template <GgmlType kType>
struct RowState {
  Lanes8 lane = neon_lanes::Zero8();
  float m_sum = 0.0f;

  void Add(const std::uint8_t* block, float d_x, float s_x, int32x4_t p_lo, int32x4_t p_hi) {
    const float32x4_t f = vmulq_n_f32(neon_lanes::HalfBroadcast(block), d_x);
    lane.lo = vfmaq_f32(lane.lo, f, vcvtq_f32_s32(p_lo));
    lane.hi = vfmaq_f32(lane.hi, f, vcvtq_f32_s32(p_hi));
    if constexpr (Int8LayoutOf(kType).has_min) {
      m_sum = __builtin_fmaf(vgetq_lane_f32(neon_lanes::HalfBroadcast(block + 2), 0), s_x, m_sum);
    }
  }

  float Result() const {
    float l[8];
    neon_lanes::Store8(lane, l);
    const float dot = neon_lanes::ReduceLanes(l);
    return Int8LayoutOf(kType).has_min ? dot + m_sum : dot;
  }
};

// NAME<kType, R>(W, r0, x, y): rows r0 .. r0 + R − 1 into y[r0 ..], with SUMS making the integer sums. A
// macro because it is defined twice, for the two targets: GCC fixes a function's target where it is
// defined, and vdotq_s32 inlines only into a dotprod one.
#define PLUMB_INT8_NEON_DOTS(NAME, TARGET, SUMS)                                                   \
  template <GgmlType kType, int R>                                                                 \
  TARGET void NAME(const WeightMatrix& W, int r0, const Int8Activations& x, float* y) {            \
    constexpr int kBlockBytes = Int8LayoutOf(kType).block_bytes;                                   \
    const int blocks = W.cols / 32;                                                                \
    const std::uint8_t* row[R];                                                                    \
    RowState<kType> state[R];                                                                      \
    for (int r = 0; r < R; ++r) row[r] = W.Row(r0 + r);                                            \
    for (int b = 0; b < blocks; ++b) {                                                             \
      const Codes32 q = Load32(reinterpret_cast<const std::uint8_t*>(x.q.data() + Extent(b, 32))); \
      for (int r = 0; r < R; ++r) {                                                                \
        const std::uint8_t* block = row[r] + Extent(b, kBlockBytes);                               \
        const Codes32 w = Codes<kType>(block);                                                     \
        state[r].Add(block, x.d[b], x.s[b], SUMS(w.lo, q.lo), SUMS(w.hi, q.hi));                   \
      }                                                                                            \
    }                                                                                              \
    for (int r = 0; r < R; ++r) y[r0 + r] = state[r].Result();                                     \
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

// The int8_gemm (kernels/weight_format.h): NAME<kType, RW, RX>(W, r0, xs, Y, ldy), rows r0 .. r0 + RW − 1
// against x rows xs[0 .. RX − 1] into Y[i][r]. Each weight block's codes are made once for the RX x rows,
// each x block loaded once for the RW weight rows; per pair it is Dots's RowState, the same steps in the
// same order, so every Y[i][r] is bitwise Int8RowDots of x row i.
#define PLUMB_INT8_NEON_GEMM(NAME, TARGET, SUMS)                                                          \
  template <GgmlType kType, int RW, int RX>                                                               \
  TARGET void NAME(const WeightMatrix& W, int r0, const Int8Activations* xs, float* Y, std::size_t ldy) { \
    constexpr int kBlockBytes = Int8LayoutOf(kType).block_bytes;                                          \
    const int blocks = W.cols / 32;                                                                       \
    const std::uint8_t* row[RW];                                                                          \
    RowState<kType> state[RW][RX];                                                                        \
    for (int r = 0; r < RW; ++r) row[r] = W.Row(r0 + r);                                                  \
    for (int b = 0; b < blocks; ++b) {                                                                    \
      Codes32 q[RX];                                                                                      \
      for (int i = 0; i < RX; ++i) {                                                                      \
        q[i] = Load32(reinterpret_cast<const std::uint8_t*>(xs[i].q.data() + Extent(b, 32)));             \
      }                                                                                                   \
      for (int r = 0; r < RW; ++r) {                                                                      \
        const std::uint8_t* block = row[r] + Extent(b, kBlockBytes);                                      \
        const Codes32 w = Codes<kType>(block);                                                            \
        for (int i = 0; i < RX; ++i) {                                                                    \
          state[r][i].Add(block, xs[i].d[b], xs[i].s[b], SUMS(w.lo, q[i].lo), SUMS(w.hi, q[i].hi));       \
        }                                                                                                 \
      }                                                                                                   \
    }                                                                                                     \
    for (int r = 0; r < RW; ++r) {                                                                        \
      for (int i = 0; i < RX; ++i) Y[Extent(i, ldy) + r0 + r] = state[r][i].Result();                     \
    }                                                                                                     \
  }

PLUMB_INT8_NEON_GEMM(SdotGemm, PLUMB_INT8_DOTPROD, SdotSums)
PLUMB_INT8_NEON_GEMM(PlainGemm, , PlainSums)

#undef PLUMB_INT8_NEON_GEMM

constexpr int kGemmRows = 2;  // weight rows per block of the gemm: 2 × 4 pairs of 8 float lanes
constexpr int kGemmX = 4;     // x rows per block

// SdotGemm or PlainGemm as Int8GemmTiling's block kernel.
template <GgmlType kType, bool kSdot>
struct GgmlGemmBlock {
  template <int RW, int RX>
  static void Run(const WeightMatrix& W, int r0, const Int8Activations* xs, float* Y, std::size_t ldy) {
    if constexpr (kSdot) {
      SdotGemm<kType, RW, RX>(W, r0, xs, Y, ldy);
    } else {
      PlainGemm<kType, RW, RX>(W, r0, xs, Y, ldy);
    }
  }
};

template <GgmlType kType, bool kSdot>
void Gemm(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs, int m, float* Y,
          std::size_t ldy) {
  Int8GemmTiling<GgmlGemmBlock<kType, kSdot>, kGemmRows, kGemmX>::Run(W, row_begin, row_end, xs, m, Y, ldy);
}

template <bool kSdot>
void GemmAnyType(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs, int m,
                 float* Y, std::size_t ldy) {
  switch (W.type) {
    case GgmlType::Q4_0:
      return Gemm<GgmlType::Q4_0, kSdot>(W, row_begin, row_end, xs, m, Y, ldy);
    case GgmlType::Q4_1:
      return Gemm<GgmlType::Q4_1, kSdot>(W, row_begin, row_end, xs, m, Y, ldy);
    case GgmlType::Q5_0:
      return Gemm<GgmlType::Q5_0, kSdot>(W, row_begin, row_end, xs, m, Y, ldy);
    case GgmlType::Q5_1:
      return Gemm<GgmlType::Q5_1, kSdot>(W, row_begin, row_end, xs, m, Y, ldy);
    case GgmlType::Q8_0:
      return Gemm<GgmlType::Q8_0, kSdot>(W, row_begin, row_end, xs, m, Y, ldy);
    default:  // the K-quants: their row dots per x row
      return Int8GemmByRows<Int8RowDots>(W, row_begin, row_end, xs, m, Y, ldy);
  }
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

template <bool kSdot>
void RunAnyType(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y) {
  switch (W.type) {
    case GgmlType::Q4_0:
      return Run<GgmlType::Q4_0, kSdot>(W, row_begin, row_end, x, y);
    case GgmlType::Q4_1:
      return Run<GgmlType::Q4_1, kSdot>(W, row_begin, row_end, x, y);
    case GgmlType::Q5_0:
      return Run<GgmlType::Q5_0, kSdot>(W, row_begin, row_end, x, y);
    case GgmlType::Q5_1:
      return Run<GgmlType::Q5_1, kSdot>(W, row_begin, row_end, x, y);
    case GgmlType::Q8_0:
      return Run<GgmlType::Q8_0, kSdot>(W, row_begin, row_end, x, y);
    case GgmlType::Q2_K:
      return Run<GgmlType::Q2_K, kSdot>(W, row_begin, row_end, x, y);
    case GgmlType::Q3_K:
      return Run<GgmlType::Q3_K, kSdot>(W, row_begin, row_end, x, y);
    case GgmlType::Q4_K:
      return Run<GgmlType::Q4_K, kSdot>(W, row_begin, row_end, x, y);
    case GgmlType::Q5_K:
      return Run<GgmlType::Q5_K, kSdot>(W, row_begin, row_end, x, y);
    case GgmlType::Q6_K:
      return Run<GgmlType::Q6_K, kSdot>(W, row_begin, row_end, x, y);
    default:  // no type HasInt8 accepts
      return scalar::Int8RowDots(W, row_begin, row_end, x, y);
  }
}

}  // namespace

void Int8RowDotsPath(bool sdot, const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x,
                     float* y) {
  if (sdot) return RunAnyType<true>(W, row_begin, row_end, x, y);
  RunAnyType<false>(W, row_begin, row_end, x, y);
}

void Int8RowDots(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y) {
  Int8RowDotsPath(int8_sums::HasDotprod(), W, row_begin, row_end, x, y);
}

void Int8GemmPath(bool sdot, const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs,
                  int m, float* Y, std::size_t ldy) {
  if (sdot) return GemmAnyType<true>(W, row_begin, row_end, xs, m, Y, ldy);
  GemmAnyType<false>(W, row_begin, row_end, xs, m, Y, ldy);
}

void Int8Gemm(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs, int m, float* Y,
              std::size_t ldy) {
  Int8GemmPath(int8_sums::HasDotprod(), W, row_begin, row_end, xs, m, Y, ldy);
}

}  // namespace plumb::kernels::ggml::neon

#endif  // defined(__aarch64__)
