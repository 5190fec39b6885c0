// Tests of FP8 encoding and weight quantization (docs/formats.md "FP8"). Encoding is checked against a
// nearest-value search over the 256 decoded codes, in double, so it does not share F32ToFp8's bit
// arithmetic; the exact agreement with CUDA's own __nv_cvt_float_to_fp8 over every float is
// tests/cuda_headers/.
#include "plumb/formats/fp8.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "plumb/core/error.h"

namespace plumb {
namespace {

constexpr Fp8Format kFormats[] = {Fp8Format::kE4M3, Fp8Format::kE5M2};
constexpr Fp8Overflow kModes[] = {Fp8Overflow::kSaturate, Fp8Overflow::kNoSaturate};

bool IsFinite(std::uint8_t code, Fp8Format format) {
  return std::isfinite(Fp8ToF32(code, format));
}

// The RNE result by search: the finite code nearest to x; on a tie the one with an even code (the code's
// lowest bit is the mantissa's lowest bit). Values beyond max finite + half a step overflow: saturate to
// ±max, or NaN (E4M3) / ±inf (E5M2). Returns the code for |x|, then applies the sign.
std::uint8_t Fp8BySearch(float x, Fp8Format format, Fp8Overflow overflow) {
  if (std::isnan(x)) return 0x7F;
  const bool e4m3 = format == Fp8Format::kE4M3;
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const double a = std::fabs(static_cast<double>(x));
  const std::uint8_t max_code = e4m3 ? 0x7E : 0x7B;
  const double max = Fp8ToF32(max_code, format);
  const double step_at_max = max - Fp8ToF32(max_code - 1, format);
  const double limit = max + step_at_max / 2;  // the tie at the limit rounds to the odd max's even neighbour
  if (a >= limit && !(e4m3 && a == limit)) {
    if (overflow == Fp8Overflow::kSaturate) return sign | max_code;
    return sign | (e4m3 ? 0x7F : 0x7C);
  }
  int best = 0;
  double best_distance = a;
  for (int code = 1; code <= max_code; ++code) {
    const double distance = std::fabs(Fp8ToF32(static_cast<std::uint8_t>(code), format) - a);
    if (distance < best_distance || (distance == best_distance && code % 2 == 0)) {
      best = code;
      best_distance = distance;
    }
  }
  return static_cast<std::uint8_t>(sign | best);
}

// Decoding, by a route other than Fp8ToF32's ldexp: the integer significand (implicit bit added for
// normals) doubled or halved one step at a time in double, and NaN / inf recognised from explicit code
// lists rather than field tests.
double Fp8ByRepeatedScaling(std::uint8_t code, Fp8Format format) {
  const bool e4m3 = format == Fp8Format::kE4M3;
  const int mantissa_bits = e4m3 ? 3 : 2;
  const int bias = e4m3 ? 7 : 15;
  const int field = (code & 0x7F) >> mantissa_bits;
  const int mantissa = code & ((1 << mantissa_bits) - 1);
  double value = field == 0 ? mantissa : (1 << mantissa_bits) + mantissa;
  for (int k = (field == 0 ? 1 : field) - bias - mantissa_bits; k != 0; k += (k > 0 ? -1 : 1)) {
    value = k > 0 ? value * 2 : value / 2;
  }
  return (code & 0x80) ? -value : value;
}

TEST(Fp8, AllCodesDecodeExactly) {
  for (const Fp8Format format : kFormats) {
    const bool e4m3 = format == Fp8Format::kE4M3;
    const float* table = Fp8DecodeTable(format);
    for (int c = 0; c < 256; ++c) {
      const auto code = static_cast<std::uint8_t>(c);
      const float got = Fp8ToF32(code, format);
      ASSERT_EQ(std::bit_cast<std::uint32_t>(table[c]), std::bit_cast<std::uint32_t>(got)) << c;
      ASSERT_EQ(std::signbit(got), c >= 0x80) << c;  // ±0 and the NaNs too
      const int low = c & 0x7F;
      const bool nan = e4m3 ? low == 0x7F : (low == 0x7D || low == 0x7E || low == 0x7F);
      const bool inf = !e4m3 && low == 0x7C;
      if (nan) {
        ASSERT_TRUE(std::isnan(got)) << Fp8FormatName(format) << " " << c;
      } else if (inf) {
        ASSERT_EQ(got, c >= 0x80 ? -std::numeric_limits<float>::infinity()
                                 : std::numeric_limits<float>::infinity());
      } else {
        ASSERT_EQ(static_cast<double>(got), Fp8ByRepeatedScaling(code, format))
            << Fp8FormatName(format) << " " << c;
      }
    }
    // Finite codes 0x00 .. max are strictly increasing: no code is skipped or repeated.
    const int max_code = e4m3 ? 0x7E : 0x7B;
    for (int c = 0; c < max_code; ++c) ASSERT_LT(table[c], table[c + 1]) << Fp8FormatName(format) << " " << c;
  }
}

TEST(Fp8, HandCheckedCodes) {
  // E4M3: S EEEE MMM, bias 7. 0x38 = 0.0111.000 = 2^(7-7) = 1; 0x7E = 0.1111.110 = 2^8 * 1.75 = 448;
  // 0x01 = subnormal 1/8 * 2^-6 = 2^-9; 0x08 = 0.0001.000 = 2^-6; 0x77 = 0.1110.111 = 2^7 * 1.875 = 240.
  const struct {
    std::uint8_t code;
    double e4m3;
    double e5m2;
  } anchors[] = {
      {0x00, 0.0, 0.0},
      {0x01, 0.001953125, 1.52587890625e-05},   // 2^-9; 2^-16
      {0x03, 0.005859375, 4.57763671875e-05},   // 3 * 2^-9; 3 * 2^-16
      {0x04, 0.0078125, 6.103515625e-05},       // 2^-7 (subnormal 4/8 * 2^-6); 2^-14 (smallest normal)
      {0x07, 0.013671875, 0.0001068115234375},  // 7 * 2^-9 (largest subnormal); 1.75 * 2^-14
      {0x08, 0.015625, 0.0001220703125},        // 2^-6 (smallest normal); 2^-13
      {0x38, 1.0, 0.5},                         // E5M2: 0.01110.00 = 2^(14-15)
      {0x3C, 1.5, 1.0},                         // E5M2: 0.01111.00 = 1
      {0x3E, 1.75, 1.5},
      {0x40, 2.0, 2.0},
      {0x77, 240.0, 28672.0},  // E5M2: 0.11101.11 = 2^14 * 1.75
      {0x78, 256.0, 32768.0},
      {0x7B, 352.0, 57344.0},  // E4M3: 2^8 * 1.375; E5M2: largest finite, 2^15 * 1.75
      {0x7E, 448.0, std::numeric_limits<double>::quiet_NaN()},  // E4M3 largest finite
      {0xB8, -1.0, -0.5},
      {0xFE, -448.0, std::numeric_limits<double>::quiet_NaN()},
  };
  for (const auto& a : anchors) {
    EXPECT_EQ(Fp8ToF32(a.code, Fp8Format::kE4M3), a.e4m3) << std::hex << int{a.code};
    if (std::isnan(a.e5m2)) {
      EXPECT_TRUE(std::isnan(Fp8ToF32(a.code, Fp8Format::kE5M2))) << std::hex << int{a.code};
    } else {
      EXPECT_EQ(Fp8ToF32(a.code, Fp8Format::kE5M2), a.e5m2) << std::hex << int{a.code};
    }
  }
  EXPECT_TRUE(std::signbit(Fp8ToF32(0x80, Fp8Format::kE4M3)));
  EXPECT_TRUE(std::isnan(Fp8ToF32(0x7F, Fp8Format::kE4M3)));
  EXPECT_TRUE(std::isnan(Fp8ToF32(0xFF, Fp8Format::kE4M3)));
  EXPECT_EQ(Fp8ToF32(0x7C, Fp8Format::kE5M2), std::numeric_limits<float>::infinity());
  EXPECT_EQ(Fp8ToF32(0xFC, Fp8Format::kE5M2), -std::numeric_limits<float>::infinity());
  for (const std::uint8_t nan : {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF}) {
    EXPECT_TRUE(std::isnan(Fp8ToF32(nan, Fp8Format::kE5M2))) << int{nan};
  }
  EXPECT_EQ(Fp8MaxFinite(Fp8Format::kE4M3), 448.0f);
  EXPECT_EQ(Fp8MaxFinite(Fp8Format::kE5M2), 57344.0f);
  EXPECT_STREQ(Fp8FormatName(Fp8Format::kE4M3), "e4m3");
  EXPECT_STREQ(Fp8FormatName(Fp8Format::kE5M2), "e5m2");
}

TEST(Fp8, EncodingMatchesNearestValueSearch) {
  // Every float whose exponent is in FP8's range and its neighbourhood, sampled densely in the low
  // mantissa bits and fully at the bits near the FP8 rounding point, plus the midpoints of adjacent codes.
  for (const Fp8Format format : kFormats) {
    std::vector<float> inputs;
    for (std::uint32_t e = 100; e <= 150; ++e) {
      for (std::uint32_t m = 0; m < (1u << 23); m += 0x1111) {
        inputs.push_back(std::bit_cast<float>((e << 23) | m));
        inputs.push_back(std::bit_cast<float>((e << 23) | (m & 0x7E0000u) | 0x10000u));  // E4M3 ties
        inputs.push_back(std::bit_cast<float>((e << 23) | (m & 0x7C0000u) | 0x20000u));  // E5M2 ties
      }
    }
    for (int c = 0; c < 0x7E; ++c) {
      const double lo = Fp8ToF32(static_cast<std::uint8_t>(c), format);
      const double hi = Fp8ToF32(static_cast<std::uint8_t>(c + 1), format);
      if (!std::isfinite(hi)) continue;
      const auto mid = static_cast<float>((lo + hi) / 2);
      inputs.insert(inputs.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)});
    }
    for (const Fp8Overflow mode : kModes) {
      for (const float x : inputs) {
        for (const float v : {x, -x}) {
          ASSERT_EQ(F32ToFp8(v, format, mode), Fp8BySearch(v, format, mode))
              << Fp8FormatName(format) << " " << static_cast<int>(mode) << " x=" << v << " bits " << std::hex
              << std::bit_cast<std::uint32_t>(v);
        }
      }
    }
  }
}

TEST(Fp8, EveryFiniteCodeRoundTrips) {
  for (const Fp8Format format : kFormats) {
    for (int c = 0; c < 256; ++c) {
      const auto code = static_cast<std::uint8_t>(c);
      if (!IsFinite(code, format)) continue;
      for (const Fp8Overflow mode : kModes) {
        ASSERT_EQ(F32ToFp8(Fp8ToF32(code, format), format, mode), code) << Fp8FormatName(format) << " " << c;
      }
    }
  }
}

TEST(Fp8, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float negative_nan = std::bit_cast<float>(0xFFC00001u);
  // E4M3 (no infinity): overflow saturates to ±448 or becomes NaN with the input's sign.
  EXPECT_EQ(F32ToFp8(448.0f, Fp8Format::kE4M3, Fp8Overflow::kNoSaturate), 0x7E);
  EXPECT_EQ(F32ToFp8(464.0f, Fp8Format::kE4M3, Fp8Overflow::kNoSaturate), 0x7E);  // tie, to even (448)
  EXPECT_EQ(F32ToFp8(std::nextafter(464.0f, 1e9f), Fp8Format::kE4M3, Fp8Overflow::kNoSaturate), 0x7F);
  EXPECT_EQ(F32ToFp8(-1e6f, Fp8Format::kE4M3, Fp8Overflow::kNoSaturate), 0xFF);
  EXPECT_EQ(F32ToFp8(-1e6f, Fp8Format::kE4M3, Fp8Overflow::kSaturate), 0xFE);
  EXPECT_EQ(F32ToFp8(inf, Fp8Format::kE4M3, Fp8Overflow::kSaturate), 0x7E);  // CUDA: inf saturates too
  EXPECT_EQ(F32ToFp8(-inf, Fp8Format::kE4M3, Fp8Overflow::kNoSaturate), 0xFF);
  // E5M2: 61440 is the tie between 57344 (odd mantissa) and 2^16, so it overflows.
  EXPECT_EQ(F32ToFp8(std::nextafter(61440.0f, 0.0f), Fp8Format::kE5M2, Fp8Overflow::kNoSaturate), 0x7B);
  EXPECT_EQ(F32ToFp8(61440.0f, Fp8Format::kE5M2, Fp8Overflow::kNoSaturate), 0x7C);
  EXPECT_EQ(F32ToFp8(61440.0f, Fp8Format::kE5M2, Fp8Overflow::kSaturate), 0x7B);
  EXPECT_EQ(F32ToFp8(-inf, Fp8Format::kE5M2, Fp8Overflow::kNoSaturate), 0xFC);
  EXPECT_EQ(F32ToFp8(-inf, Fp8Format::kE5M2, Fp8Overflow::kSaturate), 0xFB);
  // NaN of either sign and any payload: CUDA's canonical NaN, 0x7F, in both formats and modes.
  for (const Fp8Format format : kFormats) {
    for (const Fp8Overflow mode : kModes) {
      EXPECT_EQ(F32ToFp8(nan, format, mode), 0x7F);
      EXPECT_EQ(F32ToFp8(negative_nan, format, mode), 0x7F);
      EXPECT_EQ(F32ToFp8(std::bit_cast<float>(0x7F800001u), format, mode), 0x7F);
    }
  }
  // Zeros keep their sign; the smallest subnormals and the ties around them round to even.
  EXPECT_EQ(F32ToFp8(-0.0f, Fp8Format::kE4M3, Fp8Overflow::kSaturate), 0x80);
  EXPECT_EQ(F32ToFp8(std::ldexp(1.0f, -10), Fp8Format::kE4M3, Fp8Overflow::kSaturate), 0x00);  // tie 0 / 2^-9
  EXPECT_EQ(F32ToFp8(std::ldexp(3.0f, -10), Fp8Format::kE4M3, Fp8Overflow::kSaturate), 0x02);  // tie 1 / 2
  EXPECT_EQ(F32ToFp8(-std::ldexp(1.0f, -9), Fp8Format::kE4M3, Fp8Overflow::kSaturate), 0x81);
  EXPECT_EQ(F32ToFp8(std::ldexp(1.0f, -17), Fp8Format::kE5M2, Fp8Overflow::kSaturate), 0x00);
  EXPECT_EQ(F32ToFp8(std::ldexp(1.0f, -16), Fp8Format::kE5M2, Fp8Overflow::kSaturate), 0x01);
  EXPECT_EQ(F32ToFp8(std::numeric_limits<float>::denorm_min(), Fp8Format::kE5M2, Fp8Overflow::kSaturate), 0);
}

std::vector<float> RandomWeights(std::size_t n, std::uint32_t seed, float spread) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, spread);
  std::vector<float> w(n);
  for (float& x : w) x = normal(rng);
  return w;
}

TEST(Fp8, QuantizeFollowsVllmsRule) {
  for (const Fp8Format format : kFormats) {
    for (const bool per_row : {true, false}) {
      for (const int cols : {1, 7, 33, 129}) {
        const int rows = 5;
        std::vector<float> w = RandomWeights(static_cast<std::size_t>(rows) * cols, 7u + cols, 0.05f);
        for (int c = 0; c < cols; ++c) w[2 * static_cast<std::size_t>(cols) + c] = 0.0f;  // an all-zero row
        w[0] = -0.3f;                                                                     // row 0's extreme
        const Fp8Matrix m = QuantizeFp8(w.data(), rows, cols, format, per_row);
        ASSERT_EQ(m.codes.size(), w.size());
        ASSERT_EQ(m.scales.size(), per_row ? static_cast<std::size_t>(rows) : 1u);
        for (int r = 0; r < rows; ++r) {
          const float scale = m.scales[per_row ? r : 0];
          if (per_row) {
            float amax = 0.0f;
            for (int c = 0; c < cols; ++c)
              amax = std::fmax(amax, std::fabs(w[static_cast<std::size_t>(r) * cols + c]));
            EXPECT_EQ(scale, amax == 0.0f ? 1.0f : amax / Fp8MaxFinite(format));
          }
          for (int c = 0; c < cols; ++c) {
            const std::size_t i = static_cast<std::size_t>(r) * cols + c;
            ASSERT_EQ(m.codes[i], F32ToFp8(w[i] * (1.0f / scale), format, Fp8Overflow::kSaturate));
            // Relative error of a normal FP8 value is at most half a step: 2^-4 (E4M3) / 2^-3 (E5M2) of
            // the binade, plus the subnormal step near zero.
            const float back = Fp8ToF32(m.codes[i], format) * scale;
            const double rel = format == Fp8Format::kE4M3 ? 1.0 / 16 : 1.0 / 8;
            const double floor =
                (format == Fp8Format::kE4M3 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -17)) * scale;
            ASSERT_LE(std::fabs(back - w[i]), rel * std::fabs(w[i]) + floor * 1.0001) << r << "," << c;
          }
        }
        EXPECT_EQ(Fp8ToF32(m.codes[0], format), -Fp8MaxFinite(format));  // -0.3 is the amax of row 0
        if (per_row) {
          EXPECT_EQ(m.scales[2], 1.0f);
        }
      }
    }
  }
}

TEST(Fp8, QuantizeEdgeCases) {
  // A tiny amax whose reciprocal scale would overflow: scale 1, every code ±0.
  const float tiny[] = {1e-40f, -1e-41f};
  const Fp8Matrix m = QuantizeFp8(tiny, 1, 2, Fp8Format::kE4M3, true);
  EXPECT_EQ(m.scales[0], 1.0f);
  EXPECT_EQ(m.codes[0], 0x00);
  EXPECT_EQ(m.codes[1], 0x80);
  const float bad[] = {1.0f, std::numeric_limits<float>::infinity()};
  EXPECT_THROW(QuantizeFp8(bad, 1, 2, Fp8Format::kE4M3, true), Error);
  EXPECT_THROW(QuantizeFp8(bad, -1, 2, Fp8Format::kE4M3, true), Error);
  const Fp8Matrix empty = QuantizeFp8(nullptr, 0, 0, Fp8Format::kE5M2, false);
  EXPECT_TRUE(empty.codes.empty());
  EXPECT_EQ(empty.scales.size(), 1u);
}

}  // namespace
}  // namespace plumb
