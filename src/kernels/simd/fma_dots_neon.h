// The fast family's float row dots with NEON (fma_dot.h's definition), written once for every float weight
// format: ggml/float_fma_neon.cpp (F32, F16, BF16) and fp8/fp8_fma_neon.cpp instantiate FmaRowDots with their
// decoder. Internal to src/kernels/; aarch64 only.
//
// Why the bits match the definition: a row's 32 lanes are eight float32x4_t (register v holds lanes
// 4v .. 4v + 3 of each 32-column step, c a multiple of 32); each step is one vfmaq_f32 (FMLA: fused, one
// rounding); the row's last cols mod 32 columns are decoded into a zeroed buffer and dotted with x's tail in
// another, the definition's zero padding as one more step; the reduction adds register v + 4 onto v (lanes j
// and j + 16), v + 2 onto v (j + 8), 1 onto 0 (j + 4), then the upper pair onto the lower (j + 2) and lane 1
// onto lane 0: the definition's halving. The decoders' values are exact, as the definition's are.
#pragma once

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cstdint>

#include "fma_dot.h"
#include "plumb/kernels/weight_matrix.h"

namespace plumb::kernels::fma_neon {

// lane[0] of the definition's halving reduction of the 32 lanes held in acc[0..8).
inline float Reduce(const float32x4_t acc[8]) {
  float32x4_t s[4];
  for (int v = 0; v < 4; ++v) s[v] = vaddq_f32(acc[v], acc[v + 4]);
  const float32x4_t q = vaddq_f32(vaddq_f32(s[0], s[2]), vaddq_f32(s[1], s[3]));
  const float32x2_t d = vadd_f32(vget_low_f32(q), vget_high_f32(q));
  return vget_lane_f32(d, 0) + vget_lane_f32(d, 1);
}

// Rows [r0, r0 + R) of W: y[r] = Decoder::Scale(W, r, FmaDot(row r, x)). Decoder gives Load32(row, c, w[8])
// (the weights of columns [c, c + 32), exactly), At(row, c) (one column's weight: the tail) and
// Scale(W, r, dot).
template <class Decoder, int R>
void FmaRows(const WeightMatrix& W, int r0, const float* x, float* y) {
  const int cols = W.cols;
  const int full = cols - cols % kFmaLanes;
  const std::uint8_t* row[R];
  float32x4_t acc[R][8];
  for (int r = 0; r < R; ++r) {
    row[r] = W.Row(r0 + r);
    for (int v = 0; v < 8; ++v) acc[r][v] = vdupq_n_f32(0.0f);
  }
  for (int c = 0; c < full; c += kFmaLanes) {
    float32x4_t xv[8];
    for (int v = 0; v < 8; ++v) xv[v] = vld1q_f32(x + c + 4 * v);
    for (int r = 0; r < R; ++r) {
      float32x4_t w[8];
      Decoder::Load32(row[r], c, w);
      for (int v = 0; v < 8; ++v) acc[r][v] = vfmaq_f32(acc[r][v], w[v], xv[v]);
    }
  }
  if (full < cols) {  // the definition's zero padding, as one more step
    float xt[kFmaLanes] = {};
    for (int c = full; c < cols; ++c) xt[c - full] = x[c];
    for (int r = 0; r < R; ++r) {
      float wt[kFmaLanes] = {};
      for (int c = full; c < cols; ++c) wt[c - full] = Decoder::At(row[r], c);
      for (int v = 0; v < 8; ++v)
        acc[r][v] = vfmaq_f32(acc[r][v], vld1q_f32(wt + 4 * v), vld1q_f32(xt + 4 * v));
    }
  }
  for (int r = 0; r < R; ++r) y[r0 + r] = Decoder::Scale(W, r0 + r, Reduce(acc[r]));
}

// Rows [row_begin, row_end) of W, four at a time, then one at a time.
template <class Decoder>
void FmaRowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  constexpr int kRows = 4;
  int r = row_begin;
  for (; r + kRows <= row_end; r += kRows) FmaRows<Decoder, kRows>(W, r, x, y);
  for (; r < row_end; ++r) FmaRows<Decoder, 1>(W, r, x, y);
}

}  // namespace plumb::kernels::fma_neon

#endif  // defined(__aarch64__)
