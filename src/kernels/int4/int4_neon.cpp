// The INT4 row dots with NEON: bit for bit the definition (int4_format.cpp): scalar::Dot of the decoded row,
// eight lanes in two float32x4_t (neon_lanes.h says why the bits match).
//
// The kernels follow DequantizeInt4Row (formats/int4.h, docs/formats.md "INT4") operation for operation:
// the nibbles (low = even column) are interleaved back into column order, made into small integers (q − 8
// for the two's complement of sym, q − z for asym, both exact) and then into float: float(q)·scale, or
// (float(q) − z)·scale for an FP16 zero (two roundings, kept as two instructions).
//
// Groups are multiples of 8 columns, so they start in lane 0; only a row's last group can be partial, and
// only its last eight columns can be short of a full vector. Those are decoded from a zero-padded copy (so
// nothing past the row is read) and summed in scalar code, lane by lane, as scalar::Dot's tail loop does.
#include "int4_kernels.h"

#if defined(__aarch64__)

#include <arm_neon.h>

#include <algorithm>
#include <cstring>

#include "../simd/neon_lanes.h"

#include "plumb/core/extent.h"

namespace plumb::kernels::int4::neon {
namespace {

using neon_lanes::AddTail;
using neon_lanes::Lanes8;

constexpr int kRows = 4;

// A decoder holds one group's scale (and zero) and turns 8 codes, in column order, into weights.

// Where one row's scales and zeros start, and the group in hand.
struct Int4Group {
  const std::uint16_t* scales;  // the row's FP16 scales
  const std::uint8_t* zeros;    // the row's zero points (null for kSymmetric)
  int group;
  float32x4_t Scale() const {
    return neon_lanes::HalfBroadcast(reinterpret_cast<const std::uint8_t*>(scales + group));
  }
};

struct SymDecoder {  // float(q)·scale, q the nibble as two's complement
  float32x4_t scale;
  SymDecoder() = default;
  explicit SymDecoder(const Int4Group& g) : scale(g.Scale()) {}
  Lanes8 operator()(uint8x8_t q) const {
    const int8x8_t signed_q = vsub_s8(vreinterpret_s8_u8(veor_u8(q, vdup_n_u8(8))), vdup_n_s8(8));
    return neon_lanes::Mul8(neon_lanes::S16ToFloat(vmovl_s8(signed_q)), scale);
  }
};

struct AsymDecoder {  // float(q − z)·scale, z a nibble
  float32x4_t scale;
  int8x8_t zero;
  AsymDecoder() = default;
  explicit AsymDecoder(const Int4Group& g)
      : scale(g.Scale()), zero(vdup_n_s8(static_cast<std::int8_t>(Int4Code(g.zeros, g.group)))) {}
  Lanes8 operator()(uint8x8_t q) const {
    const int8x8_t shifted = vsub_s8(vreinterpret_s8_u8(q), zero);
    return neon_lanes::Mul8(neon_lanes::S16ToFloat(vmovl_s8(shifted)), scale);
  }
};

struct F16ZeroDecoder {  // (float(q) − z)·scale, z an FP16
  float32x4_t scale;
  float32x4_t zero;
  F16ZeroDecoder() = default;
  explicit F16ZeroDecoder(const Int4Group& g)
      : scale(g.Scale()), zero(neon_lanes::HalfBroadcast(g.zeros + 2 * static_cast<std::size_t>(g.group))) {}
  Lanes8 operator()(uint8x8_t q) const {
    const Lanes8 value = neon_lanes::S16ToFloat(vreinterpretq_s16_u16(vmovl_u8(q)));
    return neon_lanes::Mul8({vsubq_f32(value.lo, zero), vsubq_f32(value.hi, zero)}, scale);
  }
};

// The codes of 8 columns from 4 bytes: byte j's low nibble, then its high nibble.
uint8x8_t Codes8(const std::uint8_t* bytes) {
  std::uint32_t word;
  std::memcpy(&word, bytes, sizeof word);
  const uint8x8_t b = vreinterpret_u8_u32(vdup_n_u32(word));
  return vzip1_u8(vand_u8(b, vdup_n_u8(0x0F)), vshr_n_u8(b, 4));
}

template <class Decoder, int R>
void Int4Dots(const WeightMatrix& W, int row0, const float* x, float* y) {
  const int cols = W.cols;
  const int group_size = W.int4.group_size;
  Lanes8 acc[R];
  const std::uint16_t* scales[R];
  const std::uint8_t* zeros[R];
  const std::size_t zero_bytes = Int4ZeroRowBytes(W.int4, cols);
  for (int r = 0; r < R; ++r) {
    acc[r] = neon_lanes::Zero8();
    scales[r] = W.int4_scales + static_cast<std::size_t>(row0 + r) * Int4Groups(cols, group_size);
    zeros[r] = W.int4_zeros == nullptr ? nullptr : W.int4_zeros + Extent(row0 + r, zero_bytes);
  }
  for (int g = 0, begin = 0; begin < cols; ++g, begin += group_size) {
    const int end = std::min(cols, begin + group_size);
    Decoder decode[R];
    for (int r = 0; r < R; ++r) decode[r] = Decoder(Int4Group{scales[r], zeros[r], g});
    int c = begin;
    // 32 columns from 16 bytes: the nibbles split, then zipped back into column order.
    for (; c + 32 <= end; c += 32) {
      const Lanes8 xv[4] = {neon_lanes::Load8(x + c), neon_lanes::Load8(x + c + 8),
                            neon_lanes::Load8(x + c + 16), neon_lanes::Load8(x + c + 24)};
      for (int r = 0; r < R; ++r) {
        const uint8x16_t b = vld1q_u8(W.Row(row0 + r) + c / 2);
        const uint8x16_t low = vandq_u8(b, vdupq_n_u8(0x0F));
        const uint8x16_t high = vshrq_n_u8(b, 4);
        const uint8x16_t first = vzip1q_u8(low, high);
        const uint8x16_t second = vzip2q_u8(low, high);
        neon_lanes::MulAdd(acc[r], decode[r](vget_low_u8(first)), xv[0]);
        neon_lanes::MulAdd(acc[r], decode[r](vget_high_u8(first)), xv[1]);
        neon_lanes::MulAdd(acc[r], decode[r](vget_low_u8(second)), xv[2]);
        neon_lanes::MulAdd(acc[r], decode[r](vget_high_u8(second)), xv[3]);
      }
    }
    // The rest of a partial last group.
    for (; c + 8 <= end; c += 8) {
      const Lanes8 xv = neon_lanes::Load8(x + c);
      for (int r = 0; r < R; ++r) neon_lanes::MulAdd(acc[r], decode[r](Codes8(W.Row(row0 + r) + c / 2)), xv);
    }
    if (c < end) {  // the row's last cols − c < 8 columns; an odd row's last byte has a 0 high nibble
      for (int r = 0; r < R; ++r) {
        std::uint8_t padded[4] = {};
        std::memcpy(padded, W.Row(row0 + r) + c / 2, Int4RowBytes(end - c));
        AddTail(acc[r], decode[r](Codes8(padded)), x + c, end - c);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    float lane[8];
    neon_lanes::Store8(acc[r], lane);
    y[r] = neon_lanes::ReduceLanes(lane);
  }
}

// Rows in groups of kRows, then one at a time.
template <void (*Group)(const WeightMatrix&, int, const float*, float*),
          void (*Single)(const WeightMatrix&, int, const float*, float*)>
void RunRows(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  int r = row_begin;
  for (; r + kRows <= row_end; r += kRows) Group(W, r, x, y + r);
  for (; r < row_end; ++r) Single(W, r, x, y + r);
}

}  // namespace

void RowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  switch (W.int4.scheme) {
    case Int4Scheme::kSymmetric:
      return RunRows<Int4Dots<SymDecoder, kRows>, Int4Dots<SymDecoder, 1>>(W, row_begin, row_end, x, y);
    case Int4Scheme::kAsymmetric:
      return RunRows<Int4Dots<AsymDecoder, kRows>, Int4Dots<AsymDecoder, 1>>(W, row_begin, row_end, x, y);
    case Int4Scheme::kAsymmetricF16Zero:
      return RunRows<Int4Dots<F16ZeroDecoder, kRows>, Int4Dots<F16ZeroDecoder, 1>>(W, row_begin, row_end, x,
                                                                                   y);
  }
}

}  // namespace plumb::kernels::int4::neon

#endif  // defined(__aarch64__)
