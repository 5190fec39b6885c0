// The fast family's integer step on NEON, shared by every format's int8 kernels (ggml/ggml_int8_neon.cpp,
// int4/int4_int8_neon.cpp): int32 lane j = Σ c_i·q_i over bytes i = 4j .. 4j + 3 of 16 signed weight codes
// c and x's 16 signed codes q. Internal to src/kernels/; aarch64 only.
//   SdotSums: the dotprod extension's sdot, one instruction. Compiled for armv8.2-a+dotprod (GCC 12's
//             arm_neon.h declares vdotq_s32 for that target, and every CPU with dotprod implements it), so it
//             inlines only into callers compiled for that target, reached only where HasDotprod().
//   PlainSums: vmull_s8 makes the 16 products in int16 (|c·q| ≤ 128·127: exact) and two pairwise widening
//             adds group them in fours, on any CPU.
// Both are the exact integers.
#pragma once

#if defined(__aarch64__)

#include <arm_neon.h>
#include <sys/auxv.h>

#define PLUMB_INT8_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))

namespace plumb::kernels::int8_sums {

// The CPU's HWCAP says it has dotprod (sdot, udot); read once.
inline bool HasDotprod() {
  static const bool has = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
  return has;
}

PLUMB_INT8_DOTPROD inline int32x4_t SdotSums(int8x16_t c, int8x16_t q) {
  return vdotq_s32(vdupq_n_s32(0), c, q);
}

inline int32x4_t PlainSums(int8x16_t c, int8x16_t q) {
  const int16x8_t first = vmull_s8(vget_low_s8(c), vget_low_s8(q));
  const int16x8_t second = vmull_high_s8(c, q);
  return vpaddq_s32(vpaddlq_s16(first), vpaddlq_s16(second));
}

}  // namespace plumb::kernels::int8_sums

#endif  // defined(__aarch64__)
