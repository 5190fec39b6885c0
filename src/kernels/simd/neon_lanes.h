// Building blocks shared by the NEON kernels (ggml/, fp8/, int4/ *_neon.cpp, kv_decode): scalar::Dot's eight
// lanes held in two float32x4_t registers, and the exact conversions that feed them. Internal to
// src/kernels/; aarch64 only.
//
// Why the bits match scalar::Dot (kernels/scalar.h): lanes 0-3 live in `lo`, lanes 4-7 in `hi`, so the
// t-th group of eight elements of a row is one Lanes8 value and element i lands in lane i mod 8. Each step
// is vmulq_f32 then vaddq_f32, each rounded like the scalar w·x and lane += . Never vmlaq_f32/vfmaq_f32:
// GCC may turn vmlaq_f32 into a fused FMLA on aarch64, which rounds once instead of twice (the build's
// -ffp-contract=off keeps the separate intrinsics separate). The last partial group of eight and the final
// reduction run through the scalar expressions themselves.
#pragma once

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

namespace plumb::kernels::neon_lanes {

// Eight consecutive elements: [0..4) in lo, [4..8) in hi.
struct Lanes8 {
  float32x4_t lo;
  float32x4_t hi;
};

inline Lanes8 Zero8() {
  return {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
}

// acc += w · x, lane by lane: one rounded product, one rounded sum.
inline void MulAdd(Lanes8& acc, Lanes8 w, Lanes8 x) {
  acc.lo = vaddq_f32(acc.lo, vmulq_f32(w.lo, x.lo));
  acc.hi = vaddq_f32(acc.hi, vmulq_f32(w.hi, x.hi));
}

inline Lanes8 Load8(const float* x) {
  return {vld1q_f32(x), vld1q_f32(x + 4)};
}

inline Lanes8 Mul8(Lanes8 a, float32x4_t s) {
  return {vmulq_f32(a.lo, s), vmulq_f32(a.hi, s)};
}

// One FP16 value (any alignment) broadcast as float; the conversion is exact.
inline float32x4_t HalfBroadcast(const std::uint8_t* p) {
  std::uint16_t bits;
  std::memcpy(&bits, p, sizeof bits);  // aarch64 Linux is little-endian, as every stored format
  return vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(bits)));
}

// Eight FP16 values as float (exact; a signalling NaN comes out quiet, which the following multiply would
// do anyway).
inline Lanes8 HalvesToFloat(uint16x8_t halves) {
  const float16x8_t h = vreinterpretq_f16_u16(halves);
  return {vcvt_f32_f16(vget_low_f16(h)), vcvt_high_f32_f16(h)};
}

// Eight small integers as float (exact).
inline Lanes8 S16ToFloat(int16x8_t q) {
  return {vcvtq_f32_s32(vmovl_s16(vget_low_s16(q))), vcvtq_f32_s32(vmovl_high_s16(q))};
}

// Sixteen int8 values as two groups of eight floats: [0..8) and [8..16).
inline void S8ToFloat(int8x16_t q, Lanes8& first, Lanes8& second) {
  first = S16ToFloat(vmovl_s8(vget_low_s8(q)));
  second = S16ToFloat(vmovl_high_s8(q));
}

inline void Store8(Lanes8 v, float* lane) {
  vst1q_f32(lane, v.lo);
  vst1q_f32(lane + 4, v.hi);
}

// scalar::Dot's reduction tree.
inline float ReduceLanes(const float* lane) {
  return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

// Adds w[t]·x[t] for t < count (< 8) to lanes 0.. of acc, in scalar code: scalar::Dot's tail.
inline void AddTail(Lanes8& acc, Lanes8 w, const float* x, int count) {
  float lane[8];
  float weight[8];
  Store8(acc, lane);
  Store8(w, weight);
  for (int t = 0; t < count; ++t) lane[t] += weight[t] * x[t];
  acc = {vld1q_f32(lane), vld1q_f32(lane + 4)};
}

}  // namespace plumb::kernels::neon_lanes

#endif  // defined(__aarch64__)
