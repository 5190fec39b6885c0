// The FP8 row dots with NEON: bit for bit the definition (fp8_format.cpp): scalar::Dot of the decoded row,
// eight lanes in two float32x4_t (neon_lanes.h says why the bits match), then the scale.
//
// FP8 decoding goes through FP16, whose conversion to float is exact: an E5M2 code is the top byte of the
// FP16 with the same value; an E4M3 code's exponent and mantissa, moved 7 bits up, are an FP16 of 2^-8
// times its value (bias 15 instead of 7), and the multiply by 2^8 is exact. NaN codes are replaced by the
// FP16 quiet NaN of their sign, which gives exactly Fp8ToF32's ±quiet NaN. A row's last cols mod 8 columns
// are decoded from a zero-padded copy (so nothing past the row is read) and summed in scalar code, lane by
// lane, as scalar::Dot's tail loop does.
#include "fp8_kernels.h"

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cstring>

#include "../simd/neon_lanes.h"
#include "fp8_neon.h"

namespace plumb::kernels::fp8::neon {
namespace {

using neon_lanes::AddTail;
using neon_lanes::Lanes8;

constexpr int kRows = 4;

template <Fp8Format kFormat, int R>
void Fp8Dots(const WeightMatrix& W, int row0, const float* x, float* y) {
  const int cols = W.cols;
  Lanes8 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = neon_lanes::Zero8();
  int c = 0;
  for (; c + 8 <= cols; c += 8) {
    const Lanes8 xv = neon_lanes::Load8(x + c);
    for (int r = 0; r < R; ++r) {
      neon_lanes::MulAdd(acc[r], DecodeFp8<kFormat>(vld1_u8(W.Row(row0 + r) + c)), xv);
    }
  }
  if (c < cols) {
    for (int r = 0; r < R; ++r) {
      std::uint8_t padded[8] = {};
      std::memcpy(padded, W.Row(row0 + r) + c, static_cast<std::size_t>(cols - c));
      AddTail(acc[r], DecodeFp8<kFormat>(vld1_u8(padded)), x + c, cols - c);
    }
  }
  for (int r = 0; r < R; ++r) {
    float lane[8];
    neon_lanes::Store8(acc[r], lane);
    const float scale = W.fp8_per_row ? W.fp8_scales[row0 + r] : W.fp8_scales[0];
    y[r] = scale * neon_lanes::ReduceLanes(lane);  // the epilogue: one rounded multiply after the dot
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
  if (W.fp8_format == Fp8Format::kE4M3) {
    return RunRows<Fp8Dots<Fp8Format::kE4M3, kRows>, Fp8Dots<Fp8Format::kE4M3, 1>>(W, row_begin, row_end, x,
                                                                                   y);
  }
  return RunRows<Fp8Dots<Fp8Format::kE5M2, kRows>, Fp8Dots<Fp8Format::kE5M2, 1>>(W, row_begin, row_end, x, y);
}

}  // namespace plumb::kernels::fp8::neon

#endif  // defined(__aarch64__)
