// DecodeKvRow with NEON, four elements per vector, eight per step (kernels/kv_decode.h gives the
// definition). The same construction as kv_decode_avx2.cpp, whose comment says why each dtype gives the
// definition's bits: FCVTL (like vcvtph2ps) quiets a signalling FP16 NaN, so NaN lanes are rebuilt from the
// bits; E4M3 is rebuilt from its fields without an FP32 subnormal (flush-to-zero cannot change it).
#include "plumb/kernels/kv_decode.h"

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cstdint>

namespace plumb::kernels::neon {
namespace {

// The definition's FP32 values of four FP16 codes.
float32x4_t F16Lanes(uint16x4_t codes) {
  const float32x4_t converted = vcvt_f32_f16(vreinterpret_f16_u16(codes));
  const uint32x4_t x = vmovl_u16(codes);
  const uint32x4_t nan = vcgtq_u32(vandq_u32(x, vdupq_n_u32(0x7FFF)), vdupq_n_u32(0x7C00));
  const uint32x4_t kept =
      vorrq_u32(vorrq_u32(vshlq_n_u32(vandq_u32(x, vdupq_n_u32(0x8000)), 16), vdupq_n_u32(0x7F800000)),
                vshlq_n_u32(vandq_u32(x, vdupq_n_u32(0x3FF)), 13));
  return vbslq_f32(nan, vreinterpretq_f32_u32(kept), converted);
}

// ±0x7FC00000 where `nan`, `value` elsewhere; the sign is bit 7 of the FP8 code in `codes`.
float32x4_t Fp8Nan(float32x4_t value, uint32x4_t codes, uint32x4_t nan) {
  const uint32x4_t quiet =
      vorrq_u32(vshlq_n_u32(vandq_u32(codes, vdupq_n_u32(0x80)), 24), vdupq_n_u32(0x7FC00000));
  return vbslq_f32(nan, vreinterpretq_f32_u32(quiet), value);
}

// The definition's FP32 values (before the scale) of four E5M2 codes (in 16-bit lanes).
float32x4_t E5M2Lanes(uint16x4_t codes) {
  const float32x4_t converted = vcvt_f32_f16(vreinterpret_f16_u16(vshl_n_u16(codes, 8)));
  const uint32x4_t x = vmovl_u16(codes);
  return Fp8Nan(converted, x, vcgtq_u32(vandq_u32(x, vdupq_n_u32(0x7F)), vdupq_n_u32(0x7C)));
}

// The same for E4M3 codes: S.EEEE.MMM, bias 7.
float32x4_t E4M3Lanes(uint16x4_t codes) {
  const uint32x4_t x = vmovl_u16(codes);
  const uint32x4_t em = vandq_u32(x, vdupq_n_u32(0x7F));
  const uint32x4_t normal = vaddq_u32(vshlq_n_u32(em, 20), vdupq_n_u32((127 - 7) << 23));
  const float32x4_t subnormal = vmulq_f32(vcvtq_f32_u32(em), vdupq_n_f32(0x1p-9f));
  const uint32x4_t is_subnormal = vcltq_u32(em, vdupq_n_u32(8));
  const float32x4_t magnitude = vbslq_f32(is_subnormal, subnormal, vreinterpretq_f32_u32(normal));
  const uint32x4_t sign = vshlq_n_u32(vandq_u32(x, vdupq_n_u32(0x80)), 24);
  const float32x4_t value = vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(magnitude), sign));
  return Fp8Nan(value, x, vceqq_u32(em, vdupq_n_u32(0x7F)));
}

}  // namespace

void DecodeKvRow(KvDtype dtype, const void* src, int n, float scale, float* dst) {
  const auto* in = static_cast<const std::uint8_t*>(src);
  const int whole = dtype == KvDtype::kF32 ? 0 : n / 8 * 8;
  for (int i = 0; i < whole; i += 8) {
    switch (dtype) {
      case KvDtype::kF32:
        break;
      case KvDtype::kF16: {
        const uint16x8_t codes = vreinterpretq_u16_u8(vld1q_u8(in + 2 * i));  // any alignment
        vst1q_f32(dst + i, F16Lanes(vget_low_u16(codes)));
        vst1q_f32(dst + i + 4, F16Lanes(vget_high_u16(codes)));
        break;
      }
      case KvDtype::kBF16: {
        const uint16x8_t codes = vreinterpretq_u16_u8(vld1q_u8(in + 2 * i));  // any alignment
        vst1q_f32(dst + i, vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(codes), 16)));
        vst1q_f32(dst + i + 4, vreinterpretq_f32_u32(vshll_n_u16(vget_high_u16(codes), 16)));
        break;
      }
      case KvDtype::kFp8E4M3:
      case KvDtype::kFp8E5M2: {
        const uint16x8_t codes = vmovl_u8(vld1_u8(in + i));
        const bool e4m3 = dtype == KvDtype::kFp8E4M3;
        const float32x4_t lo = e4m3 ? E4M3Lanes(vget_low_u16(codes)) : E5M2Lanes(vget_low_u16(codes));
        const float32x4_t hi = e4m3 ? E4M3Lanes(vget_high_u16(codes)) : E5M2Lanes(vget_high_u16(codes));
        vst1q_f32(dst + i, vmulq_n_f32(lo, scale));
        vst1q_f32(dst + i + 4, vmulq_n_f32(hi, scale));
        break;
      }
    }
  }
  if (whole == n) return;
  DecodeKv(dtype, in + whole * static_cast<int>(KvDtypeBytes(dtype)), n - whole, scale, dst + whole);
}

}  // namespace plumb::kernels::neon

#endif
