// E8M0 decoding and encoding (include/plumb/formats/e8m0.h; docs/formats.md "E8M0").
#include "plumb/formats/e8m0.h"

#include <array>
#include <bit>
#include <cmath>
#include <limits>

namespace plumb {

float E8M0ToF32(std::uint8_t code) {
  if (code == kE8M0Nan) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(code) - 127);  // exact down to 2^−127, an FP32 subnormal
}

const float* E8M0DecodeTable() {
  static const auto table = [] {
    std::array<float, 256> t{};
    for (int code = 0; code < 256; ++code) t[code] = E8M0ToF32(static_cast<std::uint8_t>(code));
    return t;
  }();
  return table.data();
}

std::uint8_t F32ToE8M0(float value, E8M0Rounding rounding, Fp8Overflow overflow) {
  const std::uint32_t magnitude = std::bit_cast<std::uint32_t>(value) & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return kE8M0Nan;
  constexpr std::uint32_t kTwoToMinus127 = 0x00400000u;  // the FP32 subnormal 2^−127, E8M0's code 0
  // Toward zero the code is the FP32 exponent field itself: a normal |x| = 2^(e − 127)·(1.m) lies in
  // [2^(e − 127), 2^(e − 126)); a subnormal or zero has field 0, the smallest scale; ±inf has 0xFF.
  std::uint32_t code = magnitude >> 23;
  if (rounding == E8M0Rounding::kTowardPosInf) {
    if (code == 0) {
      // Below 2^−126 the powers of two available are 2^−127 and 2^−126.
      code = magnitude > kTwoToMinus127 ? 1 : 0;
    } else if (code < 0xFF && (magnitude & 0x007FFFFFu) != 0) {
      ++code;  // not a power of two: the next one up (past 2^127 that is 0xFF, an overflow below)
    }
  }
  if (code == 0xFF) return overflow == Fp8Overflow::kSaturate ? 0xFE : kE8M0Nan;  // E8M0 has no inf
  return static_cast<std::uint8_t>(code);
}

}  // namespace plumb
