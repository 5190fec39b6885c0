// The FP8 codes' exact decoding with NEON, shared by the exact family's row dots (fp8_neon.cpp, whose header
// comment says why it is exact) and the fast family's FMA ones (fp8_fma_neon.cpp). Internal to src/kernels/;
// aarch64 only.
#pragma once

#if defined(__aarch64__)

#include <arm_neon.h>

#include "../simd/neon_lanes.h"
#include "plumb/formats/fp8.h"

namespace plumb::kernels::fp8::neon {

// The 8 codes as their values, Fp8ToF32's bit for bit (NaNs as the quiet NaN of their sign).
template <Fp8Format kFormat>
inline neon_lanes::Lanes8 DecodeFp8(uint8x8_t codes) {
  const uint16x8_t c = vmovl_u8(codes);
  const uint16x8_t sign = vshlq_n_u16(vandq_u16(c, vdupq_n_u16(0x80)), 8);
  const uint16x8_t magnitude = vandq_u16(c, vdupq_n_u16(0x7F));
  uint16x8_t half;
  uint16x8_t nan;
  if constexpr (kFormat == Fp8Format::kE4M3) {
    half = vorrq_u16(sign, vshlq_n_u16(magnitude, 7));
    nan = vceqq_u16(magnitude, vdupq_n_u16(0x7F));  // S.1111.111
  } else {
    half = vshlq_n_u16(c, 8);
    nan = vcgtq_u16(magnitude, vdupq_n_u16(0x7C));  // S.11111.{01,10,11}
  }
  half = vbslq_u16(nan, vorrq_u16(sign, vdupq_n_u16(0x7E00)), half);
  const neon_lanes::Lanes8 w = neon_lanes::HalvesToFloat(half);
  if constexpr (kFormat == Fp8Format::kE4M3) return neon_lanes::Mul8(w, vdupq_n_f32(256.0f));
  return w;
}

}  // namespace plumb::kernels::fp8::neon

#endif  // defined(__aarch64__)
