// FP4 E2M1 decoding and encoding (include/plumb/formats/fp4.h; docs/formats.md "FP4 E2M1").
#include "plumb/formats/fp4.h"

#include <array>
#include <cmath>

namespace plumb {

namespace {

// The eight magnitudes, by code 0 .. 7: e = 0 is the subnormal 0.5·m; e = 1 .. 3 is 2^(e − 1)·(1 + m/2).
constexpr std::array<float, 8> kMagnitudes = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

}  // namespace

float Fp4ToF32(std::uint8_t code) {
  const float magnitude = kMagnitudes[code & 0x7u];
  return (code & 0x8u) != 0 ? -magnitude : magnitude;
}

const float* Fp4DecodeTable() {
  static const auto table = [] {
    std::array<float, 16> t{};
    for (int code = 0; code < 16; ++code) t[code] = Fp4ToF32(static_cast<std::uint8_t>(code));
    return t;
  }();
  return table.data();
}

std::uint8_t F32ToFp4(float value, Fp4Rounding rounding) {
  // CUDA replaces a NaN by +max (its sign is lost), as it does nothing else with the sign.
  if (std::isnan(value)) return 0x7;
  const std::uint8_t sign = std::signbit(value) ? 0x8 : 0x0;
  const float a = std::fabs(value);
  // With only eight magnitudes the code is a count: of the magnitudes at or below |x| (toward zero), or of
  // the midpoints between neighbours that |x| passes (to nearest). At a midpoint the even code wins, so a
  // midpoint whose upper neighbour has an even code counts when reached, one whose lower neighbour is even
  // only when passed. Every magnitude and midpoint is exact in FP32, so the comparisons are exact; |x| above
  // the last threshold is 6 (saturation: nothing larger exists, ±inf included).
  std::uint8_t code = 0;
  if (rounding == Fp4Rounding::kTowardZero) {
    for (int c = 1; c < 8; ++c) code += a >= kMagnitudes[c] ? 1 : 0;
  } else {
    for (int c = 1; c < 8; ++c) {
      const float midpoint = (kMagnitudes[c - 1] + kMagnitudes[c]) / 2;
      const bool upper_is_even = c % 2 == 0;
      code += (upper_is_even ? a >= midpoint : a > midpoint) ? 1 : 0;
    }
  }
  return static_cast<std::uint8_t>(sign | code);
}

}  // namespace plumb
