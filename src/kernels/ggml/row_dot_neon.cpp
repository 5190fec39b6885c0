// RowDot with NEON (Advanced SIMD): the scalar definition (row_dot.h), eight lanes at a time in two
// float32x4_t registers (neon_lanes.h says why the bits are the definition's).
//
// The weights are made with the same float operations as DequantizeRow (docs/formats.md "GGUF blocks"):
// Q4_0 float(q − 8)·d, Q8_0 float(q)·d, Q4_1 float(q)·d + m (two roundings, kept as two instructions). The
// integer-to-float and FP16-to-float conversions are exact, and BF16 is its bits shifted left by 16.
//
// Several rows are computed together (kRows accumulator pairs): one row's adds form a single dependency
// chain (the definition fixes it), so interleaving rows is what keeps the adders busy.
#include "plumb/kernels/row_dot.h"

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cstring>

#include "../simd/bytes.h"
#include "../simd/neon_lanes.h"
#include "ggml_kernel_table.h"
#include "plumb/core/extent.h"
#include "plumb/formats/dtype.h"

namespace plumb::kernels::neon {
namespace {

using neon_lanes::Lanes8;

constexpr int kRows = 4;

// ---- plain types: Load8 converts 8 stored elements (any alignment), LoadOne one (the tail of a row) -----

struct PlainF32 {
  static constexpr int kBytes = 4;
  static Lanes8 Load8(const std::uint8_t* p) {
    return {vreinterpretq_f32_u8(vld1q_u8(p)), vreinterpretq_f32_u8(vld1q_u8(p + 16))};
  }
  static float LoadOne(const std::uint8_t* p) {
    float value;
    std::memcpy(&value, p, sizeof value);
    return value;
  }
};

struct PlainF16 {
  static constexpr int kBytes = 2;
  static Lanes8 Load8(const std::uint8_t* p) {
    return neon_lanes::HalvesToFloat(vreinterpretq_u16_u8(vld1q_u8(p)));
  }
  static float LoadOne(const std::uint8_t* p) { return F16ToF32(ReadU16(p)); }
};

struct PlainBF16 {
  static constexpr int kBytes = 2;
  static Lanes8 Load8(const std::uint8_t* p) {
    const uint16x8_t bits = vreinterpretq_u16_u8(vld1q_u8(p));
    return {vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(bits), 16)),
            vreinterpretq_f32_u32(vshll_high_n_u16(bits, 16))};
  }
  static float LoadOne(const std::uint8_t* p) { return BF16ToF32(ReadU16(p)); }
};

template <class Plain, int R>
void PlainDots(const std::uint8_t* rows, std::size_t stride, const float* x, std::int64_t n, float* y) {
  Lanes8 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = neon_lanes::Zero8();
  const std::int64_t full = n - n % 8;
  for (std::int64_t i = 0; i < full; i += 8) {
    const Lanes8 xv = neon_lanes::Load8(x + i);
    for (int r = 0; r < R; ++r) {
      neon_lanes::MulAdd(acc[r], Plain::Load8(rows + r * stride + i * Plain::kBytes), xv);
    }
  }
  for (int r = 0; r < R; ++r) {
    float lane[8];
    neon_lanes::Store8(acc[r], lane);
    // The last n − full elements go to lanes 0.., as in scalar::Dot's tail loop.
    for (std::int64_t i = full; i < n; ++i) {
      lane[i - full] += Plain::LoadOne(rows + r * stride + i * Plain::kBytes) * x[i];
    }
    y[r] = neon_lanes::ReduceLanes(lane);
  }
}

// ---- 32-element blocks: Decode writes the block's 4 groups of eight weights ----------------------------

// Element j < 16 of a Q4 block is the low nibble of qs[j], element j + 16 its high nibble.
inline void Nibbles(const std::uint8_t* qs, int8x16_t& low, int8x16_t& high) {
  const uint8x16_t bytes = vld1q_u8(qs);
  low = vreinterpretq_s8_u8(vandq_u8(bytes, vdupq_n_u8(0x0F)));
  high = vreinterpretq_s8_u8(vshrq_n_u8(bytes, 4));
}

struct BlockQ4_0 {  // [d f16][qs 16 B]: float(q − 8)·d
  static constexpr int kElements = 32, kBytes = 18;
  static void Decode(const std::uint8_t* b, Lanes8 w[4]) {
    const float32x4_t d = neon_lanes::HalfBroadcast(b);
    int8x16_t low, high;
    Nibbles(b + 2, low, high);
    const int8x16_t eight = vdupq_n_s8(8);
    neon_lanes::S8ToFloat(vsubq_s8(low, eight), w[0], w[1]);
    neon_lanes::S8ToFloat(vsubq_s8(high, eight), w[2], w[3]);
    for (int v = 0; v < 4; ++v) w[v] = neon_lanes::Mul8(w[v], d);
  }
};

struct BlockQ4_1 {  // [d f16][m f16][qs 16 B]: float(q)·d + m
  static constexpr int kElements = 32, kBytes = 20;
  static void Decode(const std::uint8_t* b, Lanes8 w[4]) {
    const float32x4_t d = neon_lanes::HalfBroadcast(b);
    const float32x4_t m = neon_lanes::HalfBroadcast(b + 2);
    int8x16_t low, high;
    Nibbles(b + 4, low, high);
    neon_lanes::S8ToFloat(low, w[0], w[1]);
    neon_lanes::S8ToFloat(high, w[2], w[3]);
    for (int v = 0; v < 4; ++v) {
      const Lanes8 scaled = neon_lanes::Mul8(w[v], d);
      w[v] = {vaddq_f32(scaled.lo, m), vaddq_f32(scaled.hi, m)};
    }
  }
};

struct BlockQ8_0 {  // [d f16][qs 32 × int8]: float(q)·d
  static constexpr int kElements = 32, kBytes = 34;
  static void Decode(const std::uint8_t* b, Lanes8 w[4]) {
    const float32x4_t d = neon_lanes::HalfBroadcast(b);
    neon_lanes::S8ToFloat(vreinterpretq_s8_u8(vld1q_u8(b + 2)), w[0], w[1]);
    neon_lanes::S8ToFloat(vreinterpretq_s8_u8(vld1q_u8(b + 18)), w[2], w[3]);
    for (int v = 0; v < 4; ++v) w[v] = neon_lanes::Mul8(w[v], d);
  }
};

template <class Block, int R>
void BlockDots(const std::uint8_t* rows, std::size_t stride, const float* x, std::int64_t n, float* y) {
  constexpr int kGroups = Block::kElements / 8;
  Lanes8 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = neon_lanes::Zero8();
  const std::int64_t n_blocks = n / Block::kElements;
  for (std::int64_t b = 0; b < n_blocks; ++b) {
    const float* xb = x + b * Block::kElements;
    Lanes8 xv[kGroups];
    for (int v = 0; v < kGroups; ++v) xv[v] = neon_lanes::Load8(xb + 8 * v);
    for (int r = 0; r < R; ++r) {
      Lanes8 w[kGroups];
      Block::Decode(rows + r * stride + b * Block::kBytes, w);
      for (int v = 0; v < kGroups; ++v) neon_lanes::MulAdd(acc[r], w[v], xv[v]);
    }
  }
  for (int r = 0; r < R; ++r) {
    float lane[8];
    neon_lanes::Store8(acc[r], lane);
    y[r] = neon_lanes::ReduceLanes(lane);
  }
}

// Rows in groups of kRows, then one at a time.
template <void (*Group)(const std::uint8_t*, std::size_t, const float*, std::int64_t, float*),
          void (*Single)(const std::uint8_t*, std::size_t, const float*, std::int64_t, float*)>
void RunRows(const std::uint8_t* rows, std::size_t stride, std::int64_t n_rows, const float* x,
             std::int64_t n, float* y) {
  std::int64_t r = 0;
  for (; r + kRows <= n_rows; r += kRows) Group(rows + Extent(r, stride), stride, x, n, y + r);
  for (; r < n_rows; ++r) Single(rows + Extent(r, stride), stride, x, n, y + r);
}

}  // namespace
}  // namespace plumb::kernels::neon

namespace plumb::kernels::ggml::neon {

// NEON's column of row dots; the other types run the definition (the table's fallback).
void FillRowDots(GgmlKernelTable& table) {
  namespace k = kernels::neon;  // the kernels above
  using k::BlockDots, k::PlainDots, k::RunRows, k::kRows;
  table.At(GgmlType::F32, Isa::kNeon).row_dots =
      OneTypeRowDots<RunRows<PlainDots<k::PlainF32, kRows>, PlainDots<k::PlainF32, 1>>>;
  table.At(GgmlType::F16, Isa::kNeon).row_dots =
      OneTypeRowDots<RunRows<PlainDots<k::PlainF16, kRows>, PlainDots<k::PlainF16, 1>>>;
  table.At(GgmlType::BF16, Isa::kNeon).row_dots =
      OneTypeRowDots<RunRows<PlainDots<k::PlainBF16, kRows>, PlainDots<k::PlainBF16, 1>>>;
  table.At(GgmlType::Q4_0, Isa::kNeon).row_dots =
      OneTypeRowDots<RunRows<BlockDots<k::BlockQ4_0, kRows>, BlockDots<k::BlockQ4_0, 1>>>;
  table.At(GgmlType::Q4_1, Isa::kNeon).row_dots =
      OneTypeRowDots<RunRows<BlockDots<k::BlockQ4_1, kRows>, BlockDots<k::BlockQ4_1, 1>>>;
  table.At(GgmlType::Q8_0, Isa::kNeon).row_dots =
      OneTypeRowDots<RunRows<BlockDots<k::BlockQ8_0, kRows>, BlockDots<k::BlockQ8_0, 1>>>;
}

}  // namespace plumb::kernels::ggml::neon

#endif  // defined(__aarch64__)
