// FP8 decoding (include/plumb/formats/fp8.h; docs/formats.md "FP8").
#include "plumb/formats/fp8.h"

#include <array>
#include <cmath>
#include <limits>

namespace plumb {

const char* Fp8FormatName(Fp8Format format) {
  return format == Fp8Format::kE4M3 ? "e4m3" : "e5m2";
}

float Fp8MaxFinite(Fp8Format format) {
  return format == Fp8Format::kE4M3 ? 448.0f : 57344.0f;
}

float Fp8ToF32(std::uint8_t bits, Fp8Format format) {
  const bool e4m3 = format == Fp8Format::kE4M3;
  const int mantissa_bits = e4m3 ? 3 : 2;
  const int bias = e4m3 ? 7 : 15;
  const int max_exponent = e4m3 ? 15 : 31;
  const int sign = bits >> 7;
  const int exponent = (bits & 0x7F) >> mantissa_bits;
  const int mantissa = bits & ((1 << mantissa_bits) - 1);
  float magnitude;
  if (e4m3 && exponent == max_exponent && mantissa == (1 << mantissa_bits) - 1) {
    magnitude = std::numeric_limits<float>::quiet_NaN();  // E4M3 has one NaN pattern per sign, no inf
  } else if (!e4m3 && exponent == max_exponent) {
    magnitude =
        mantissa == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), 1 - bias - mantissa_bits);  // subnormal (or zero)
  } else {
    magnitude =
        std::ldexp(static_cast<float>((1 << mantissa_bits) + mantissa), exponent - bias - mantissa_bits);
  }
  return sign ? -magnitude : magnitude;
}

const float* Fp8DecodeTable(Fp8Format format) {
  static const auto tables = [] {
    std::array<std::array<float, 256>, 2> t{};
    for (int code = 0; code < 256; ++code) {
      t[0][code] = Fp8ToF32(static_cast<std::uint8_t>(code), Fp8Format::kE4M3);
      t[1][code] = Fp8ToF32(static_cast<std::uint8_t>(code), Fp8Format::kE5M2);
    }
    return t;
  }();
  return tables[format == Fp8Format::kE4M3 ? 0 : 1].data();
}

}  // namespace plumb
