// QuantizeActivations' whole blocks with NEON: scalar::QuantizeBlock's bits (kernels/int8_activations.h's
// definition), 32 elements in eight vectors.
//
// Why the bits are the same: |x| and the maximum are exact (vmaxq_f32 equals fmax on finite values; a block
// holding an inf or NaN is found first, by its all-ones exponent, and left to the scalar code for the
// definition's NaN d and s and zero codes); d = amax / 127 and 1 / d are the same scalar divisions;
// x · (1 / d) is one rounded product per element; FCVTAS (vcvtaq_s32_f32) rounds to the nearest integer with
// ties away from zero, which is std::round; the codes are within ±127, so the saturating narrows change
// nothing, and their integer sum is exact.
#include "int8_activations_blocks.h"

#if defined(__aarch64__)

#include <arm_neon.h>

namespace plumb::kernels::neon {

int QuantizeBlocks(const float* x, int blocks, std::int8_t* q, float* d, float* s, std::int32_t* sums) {
  for (int b = 0; b < blocks; ++b) {
    const float* xb = x + 32 * b;
    float32x4_t v[8];
    float32x4_t amax = vdupq_n_f32(0.0f);
    uint32x4_t special = vdupq_n_u32(0);  // lanes whose exponent is all ones: inf or NaN
    for (int j = 0; j < 8; ++j) {
      v[j] = vld1q_f32(xb + 4 * j);
      amax = vmaxq_f32(amax, vabsq_f32(v[j]));
      const uint32x4_t e = vandq_u32(vreinterpretq_u32_f32(v[j]), vdupq_n_u32(0x7F800000));
      special = vorrq_u32(special, vceqq_u32(e, vdupq_n_u32(0x7F800000)));
    }
    std::int8_t* qb = q + 32 * b;
    if (vmaxvq_u32(special) != 0) {
      scalar::QuantizeBlock(xb, 32, qb, d + b, s + b, sums + b);  // the definition's NaN block
      continue;
    }
    const float scale = vmaxvq_f32(amax) / 127.0f;
    const float32x4_t inverse = vdupq_n_f32(scale != 0.0f ? 1.0f / scale : 0.0f);
    int32x4_t sum = vdupq_n_s32(0);
    int16x8_t halves[4];
    for (int j = 0; j < 4; ++j) {
      const int32x4_t a = vcvtaq_s32_f32(vmulq_f32(v[2 * j], inverse));
      const int32x4_t c = vcvtaq_s32_f32(vmulq_f32(v[2 * j + 1], inverse));
      sum = vaddq_s32(sum, vaddq_s32(a, c));
      halves[j] = vcombine_s16(vqmovn_s32(a), vqmovn_s32(c));
    }
    vst1q_s8(qb, vcombine_s8(vqmovn_s16(halves[0]), vqmovn_s16(halves[1])));
    vst1q_s8(qb + 16, vcombine_s8(vqmovn_s16(halves[2]), vqmovn_s16(halves[3])));
    d[b] = scale;
    sums[b] = vaddvq_s32(sum);
    s[b] = scale * static_cast<float>(sums[b]);
  }
  return blocks;
}

}  // namespace plumb::kernels::neon

#endif  // defined(__aarch64__)
