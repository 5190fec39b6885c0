// FP8 decoding, encoding and weight quantization (include/plumb/formats/fp8.h; docs/formats.md "FP8").
#include "plumb/formats/fp8.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <limits>

#include "plumb/core/error.h"
#include "plumb/core/extent.h"

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

namespace {

// float -> FP8 for a format with kMantissaBits stored mantissa bits and exponent bias kBias (docs/formats.md
// "FP8"), the format's constants known at compile time.
template <int kMantissaBits, int kBias>
std::uint8_t EncodeFp8(float value, bool saturate) {
  constexpr std::uint32_t kMaxFiniteCode = kMantissaBits == 3 ? 0x7Eu : 0x7Bu;  // 448 / 57344
  constexpr std::uint32_t kOverflowCode = kMantissaBits == 3 ? 0x7Fu : 0x7Cu;   // NaN (E4M3) / inf (E5M2)
  constexpr int kDropped = 23 - kMantissaBits;                                  // float mantissa bits cut
  constexpr std::uint32_t kMinNormal = static_cast<std::uint32_t>(127 + 1 - kBias) << 23;  // 2^(1 − bias)

  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  // CUDA first replaces every NaN by the canonical 0x7FFFFFFF (positive, all payload bits set), whose
  // encoding is 0x7F in both formats: the input's sign and payload are lost.
  if (magnitude > 0x7F800000u) return 0x7F;
  const auto sign = static_cast<std::uint32_t>((bits >> 24) & 0x80u);

  std::uint32_t code;
  if (magnitude >= kMinNormal) {
    // Normal (or too large, or inf): round the float's mantissa to kMantissaBits bits, ties to even, by
    // adding just under half of the last kept place plus the lowest kept bit and truncating; a carry out of
    // the mantissa bumps the exponent, as the encoding wants. Then rebias the exponent from 127 to kBias.
    const std::uint32_t lowest_kept_bit = (magnitude >> kDropped) & 1u;
    const std::uint32_t rounded = magnitude + ((1u << (kDropped - 1)) - 1u) + lowest_kept_bit;
    code = (rounded >> kDropped) - (static_cast<std::uint32_t>(127 - kBias) << kMantissaBits);
  } else {
    // Subnormal result: the code is |x| in units of the smallest subnormal, 2^(1 − bias − kMantissaBits),
    // rounded to an integer, ties to even. With the implicit bit restored |x| = significand · 2^(e − 150),
    // so that is significand >> (151 − bias − kMantissaBits − e). A code that rounds up to
    // 1 << kMantissaBits is the smallest normal, correctly encoded as it stands.
    const int exponent = static_cast<int>(magnitude >> 23);
    const int shift = 151 - kBias - kMantissaBits - exponent;
    if (shift > 24) {
      code = 0;  // below half the smallest subnormal, or exactly half (a tie, to the even 0), or ±0
    } else {
      const std::uint32_t significand = (magnitude & 0x007FFFFFu) | 0x00800000u;
      code = significand >> shift;
      const std::uint32_t remainder = significand & ((1u << shift) - 1u);
      const std::uint32_t half = 1u << (shift - 1);
      if (remainder > half || (remainder == half && (code & 1u) != 0)) ++code;
    }
  }
  if (code > kMaxFiniteCode) {
    // Too large after rounding, or ±inf: __NV_SATFINITE gives ±max finite; __NV_NOSAT the format's overflow
    // value with the input's sign (E4M3 has no inf, so NaN; E5M2 ±inf).
    code = saturate ? kMaxFiniteCode : kOverflowCode;
  }
  return static_cast<std::uint8_t>(sign | code);
}

}  // namespace

std::uint8_t F32ToFp8(float value, Fp8Format format, Fp8Overflow overflow) {
  const bool saturate = overflow == Fp8Overflow::kSaturate;
  return format == Fp8Format::kE4M3 ? EncodeFp8<3, 7>(value, saturate) : EncodeFp8<2, 15>(value, saturate);
}

void F32ToFp8Divided(const float* x, int n, float divisor, Fp8Format format, Fp8Overflow overflow,
                     std::uint8_t* out) {
  const bool saturate = overflow == Fp8Overflow::kSaturate;
  if (format == Fp8Format::kE4M3) {
    for (int i = 0; i < n; ++i) out[i] = EncodeFp8<3, 7>(x[i] / divisor, saturate);
  } else {
    for (int i = 0; i < n; ++i) out[i] = EncodeFp8<2, 15>(x[i] / divisor, saturate);
  }
}

Fp8Matrix QuantizeFp8(const float* w, int rows, int cols, Fp8Format format, bool per_row) {
  if (rows < 0 || cols < 0) throw MakeError("QuantizeFp8: bad shape [", rows, "][", cols, "]");
  Fp8Matrix m;
  m.format = format;
  m.rows = rows;
  m.cols = cols;
  m.per_row = per_row;
  const auto count = Extent(rows, cols);
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
      const std::size_t begin = Extent(r, cols);
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
