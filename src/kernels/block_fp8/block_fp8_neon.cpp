// The block-scaled FP8 format's row dots and row decoding with NEON: the definition (block_fp8_format.cpp),
// eight lanes at a time.
//
// Why the bits match the definition: one Lanes8 accumulator per row holds scalar::Dot's eight lanes (column i
// in lane i mod 8; every group of 8 columns starts at a multiple of 8, and so lies inside one 128-column
// block); each step is vmulq_f32 then vaddq_f32 (neon_lanes.h); a row's last cols mod 8 columns are added
// lane by lane in scalar code as scalar::Dot's tail loop does (neon_lanes::AddTail), and the lanes are
// reduced in its tree. Each weight is the definition's one rounded product of the code's value and its
// block's scale: the value is fp8_neon.h's DecodeFp8, Fp8ToF32's exactly (NaN codes included, as the quiet
// NaN of their sign), so one vmulq_f32 by the scale rounds as the definition's multiply does, whatever the
// scale (unlike the AVX2 kernels' 2^8-scaled scales, nothing here is left to the definition).
#include "block_fp8_kernels.h"

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cstdint>

#include "../fp8/fp8_neon.h"
#include "../simd/neon_lanes.h"
#include "plumb/core/extent.h"
#include "plumb/formats/fp8.h"

namespace plumb::kernels::block_fp8::neon {
namespace {

using neon_lanes::Lanes8;

constexpr int kRows = 4;

const float* Scales(const WeightMatrix& W, int r) {
  return W.fp8_block_scales + Extent(r / kFp8BlockSize, Fp8BlockCount(W.cols));
}

// Columns c .. c + 7 of a row (c a multiple of 8) as weights: each code's value times its block's scale.
inline Lanes8 Weights8(const std::uint8_t* row, const float* scales, int c) {
  return neon_lanes::Mul8(fp8::neon::DecodeFp8<Fp8Format::kE4M3>(vld1_u8(row + c)),
                          vdupq_n_f32(scales[c / kFp8BlockSize]));
}

// y[r0 .. r0 + R) of W (R rows side by side: independent accumulator chains, x loaded once for them).
template <int R>
void Dots(const WeightMatrix& W, int r0, const float* x, float* y) {
  const int cols = W.cols;
  const std::uint8_t* row[R];
  const float* scales[R];
  Lanes8 acc[R];
  for (int i = 0; i < R; ++i) {
    row[i] = W.Row(r0 + i);
    scales[i] = Scales(W, r0 + i);
    acc[i] = neon_lanes::Zero8();
  }
  int c = 0;
  for (; c + 8 <= cols; c += 8) {
    const Lanes8 xv = neon_lanes::Load8(x + c);
    for (int i = 0; i < R; ++i) neon_lanes::MulAdd(acc[i], Weights8(row[i], scales[i], c), xv);
  }
  const float* table = Fp8DecodeTable(Fp8Format::kE4M3);
  for (int i = 0; i < R; ++i) {
    if (c < cols) {
      float w[8] = {};
      for (int t = 0; t < cols - c; ++t) w[t] = table[row[i][c + t]] * scales[i][(c + t) / kFp8BlockSize];
      neon_lanes::AddTail(acc[i], neon_lanes::Load8(w), x + c, cols - c);
    }
    float lane[8];
    neon_lanes::Store8(acc[i], lane);
    y[r0 + i] = neon_lanes::ReduceLanes(lane);
  }
}

}  // namespace

void RowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  int r = row_begin;
  for (; r + kRows <= row_end; r += kRows) Dots<kRows>(W, r, x, y);
  for (; r < row_end; ++r) Dots<1>(W, r, x, y);
}

void DecodeRows(const WeightMatrix& W, int r0, int count, float* out) {
  const float* table = Fp8DecodeTable(Fp8Format::kE4M3);
  const int cols = W.cols;
  for (int i = 0; i < count; ++i) {
    const std::uint8_t* row = W.Row(r0 + i);
    const float* scales = Scales(W, r0 + i);
    float* o = out + Extent(i, cols);
    int c = 0;
    for (; c + 8 <= cols; c += 8) neon_lanes::Store8(Weights8(row, scales, c), o + c);
    for (; c < cols; ++c) o[c] = table[row[c]] * scales[c / kFp8BlockSize];
  }
}

}  // namespace plumb::kernels::block_fp8::neon

#endif  // defined(__aarch64__)
