// FP8 decoding, encoding and weight quantization (include/plumb/formats/fp8.h; docs/formats.md "FP8").
#include "plumb/formats/fp8.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <limits>

#include "plumb/core/error.h"

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

std::uint8_t F32ToFp8(float value, Fp8Format format, Fp8Overflow overflow) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  // CUDA first replaces every NaN by the canonical 0x7FFFFFFF (positive, all payload bits set), whose
  // encoding is 0x7F in both formats: the input's sign and payload are lost.
  if (magnitude > 0x7F800000u) return 0x7F;

  const bool e4m3 = format == Fp8Format::kE4M3;
  const int mantissa_bits = e4m3 ? 3 : 2;
  const int bias = e4m3 ? 7 : 15;
  const std::uint32_t max_finite_code = e4m3 ? 0x7Eu : 0x7Bu;
  const auto sign = static_cast<std::uint8_t>((bits >> 24) & 0x80u);

  // Float subnormals and zero (exponent field 0) are far below half the smallest FP8 subnormal.
  const int exponent = static_cast<int>(magnitude >> 23) - 127;
  std::uint32_t code = max_finite_code + 1;  // stands for "too large" (also for ±inf)
  if (magnitude == 0 || (magnitude >> 23) == 0) {
    code = 0;
  } else if (exponent <= bias + 1) {
    // The value is significand · 2^(exponent − 23) with the implicit bit restored. In units of the FP8
    // code's last place (2^(e − bias − mantissa_bits), e clamped to the smallest normal exponent 1 − bias)
    // it is significand >> shift; rounding that integer to nearest, ties to even, gives the code's
    // magnitude bits directly, the exponent field included: a carry out of the mantissa bumps the exponent
    // (and a subnormal that rounds up to 2^(1 − bias) becomes the smallest normal) as the encoding wants.
    const std::uint32_t significand = (magnitude & 0x007FFFFFu) | 0x00800000u;
    const int unit_exponent = std::max(exponent, 1 - bias) - mantissa_bits;  // log2 of one code step
    const int shift = 23 + unit_exponent - exponent;
    if (shift > 24) {
      code = 0;  // below half the smallest subnormal
    } else {
      std::uint32_t units = significand >> shift;
      const std::uint32_t remainder = significand & ((1u << shift) - 1u);
      const std::uint32_t half = 1u << (shift - 1);
      if (remainder > half || (remainder == half && (units & 1u) != 0)) ++units;
      // For normals units is 1.m in 1 + mantissa_bits bits; replacing its leading 1 by the biased exponent
      // gives the code. For subnormals units is the code itself (biased exponent field 0).
      code = exponent >= 1 - bias ? (static_cast<std::uint32_t>(exponent + bias - 1) << mantissa_bits) + units
                                  : units;
    }
  }
  if (code > max_finite_code) {
    // Too large (after rounding), or ±inf: __NV_SATFINITE gives ±max finite, __NV_NOSAT the format's
    // overflow value (E4M3 has no inf, so NaN with the input's sign; E5M2 ±inf).
    if (overflow == Fp8Overflow::kSaturate) return static_cast<std::uint8_t>(sign | max_finite_code);
    return static_cast<std::uint8_t>(sign | (e4m3 ? 0x7Fu : 0x7Cu));
  }
  return static_cast<std::uint8_t>(sign | code);
}

Fp8Matrix QuantizeFp8(const float* w, int rows, int cols, Fp8Format format, bool per_row) {
  if (rows < 0 || cols < 0) throw MakeError("QuantizeFp8: bad shape [", rows, "][", cols, "]");
  Fp8Matrix m;
  m.format = format;
  m.rows = rows;
  m.cols = cols;
  m.per_row = per_row;
  const auto count = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  m.codes.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    if (!std::isfinite(w[i])) {
      throw MakeError("QuantizeFp8: weight [", i / static_cast<std::size_t>(cols), "][",
                      i % static_cast<std::size_t>(cols), "] is ", w[i], " (FP8 weights must be finite)");
    }
  }
  // vLLM's rule (docs/formats.md "FP8"): scale = amax / max finite, so the largest weight lands on the
  // largest code; 1 where amax is 0, and also where amax is so small that 1 / scale would overflow (every
  // such weight then encodes as ±0 either way).
  const auto scale_of = [format](float amax) {
    const float scale = amax / Fp8MaxFinite(format);
    return scale == 0.0f || !std::isfinite(1.0f / scale) ? 1.0f : scale;
  };
  const auto encode = [&](std::size_t begin, std::size_t end, float scale) {
    const float inverse = 1.0f / scale;
    for (std::size_t i = begin; i < end; ++i)
      m.codes[i] = F32ToFp8(w[i] * inverse, format, Fp8Overflow::kSaturate);
  };
  const auto amax_of = [w](std::size_t begin, std::size_t end) {
    float amax = 0.0f;
    for (std::size_t i = begin; i < end; ++i) amax = std::max(amax, std::fabs(w[i]));
    return amax;
  };
  if (per_row) {
    m.scales.resize(static_cast<std::size_t>(rows));
    for (int r = 0; r < rows; ++r) {
      const std::size_t begin = static_cast<std::size_t>(r) * static_cast<std::size_t>(cols);
      const std::size_t end = begin + static_cast<std::size_t>(cols);
      m.scales[static_cast<std::size_t>(r)] = scale_of(amax_of(begin, end));
      encode(begin, end, m.scales[static_cast<std::size_t>(r)]);
    }
  } else {
    m.scales = {scale_of(amax_of(0, count))};
    encode(0, count, m.scales[0]);
  }
  return m;
}

}  // namespace plumb
