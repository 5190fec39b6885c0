// Tests of the DType helpers and the FP16 / BF16 <-> FP32 conversions (docs/formats.md, "FP16 (IEEE
// binary16)" and "BF16"). Decoding is checked exhaustively against an independent formula (std::ldexp);
// encoding against the round-to-nearest-even rule at every halfway point and against a nearest-value search.
#include "plumb/formats/dtype.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace plumb {
namespace {

std::uint32_t Bits(float x) {
  return std::bit_cast<std::uint32_t>(x);
}
float FromBits(std::uint32_t bits) {
  return std::bit_cast<float>(bits);
}

// ---------------------------------------------------------------------------------------------------------
// DType

TEST(DType, SizesNamesAndParsing) {
  const DType all[] = {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64,     DType::I32,
                       DType::I16, DType::I8,  DType::U8,  DType::BOOL, DType::F8_E4M3, DType::F8_E5M2};
  const std::size_t sizes[] = {8, 4, 2, 2, 8, 4, 2, 1, 1, 1, 1, 1};
  const char* names[] = {"F64", "F32", "F16", "BF16", "I64",     "I32",
                         "I16", "I8",  "U8",  "BOOL", "F8_E4M3", "F8_E5M2"};
  for (std::size_t i = 0; i < std::size(all); ++i) {
    EXPECT_EQ(DTypeSize(all[i]), sizes[i]) << names[i];
    EXPECT_EQ(DTypeName(all[i]), names[i]);
    EXPECT_EQ(ParseSafetensorsDType(names[i]), all[i]);
  }
  EXPECT_EQ(ParseSafetensorsDType("f32"), std::nullopt);  // case-sensitive
  EXPECT_EQ(ParseSafetensorsDType("U16"), std::nullopt);
  EXPECT_EQ(ParseSafetensorsDType("F8_E8M0"), std::nullopt);
  EXPECT_EQ(ParseSafetensorsDType("f8_e4m3"), std::nullopt);
  EXPECT_EQ(ParseSafetensorsDType(""), std::nullopt);
  EXPECT_TRUE(IsFloatDType(DType::BF16));
  EXPECT_FALSE(IsFloatDType(DType::I32));
  EXPECT_FALSE(IsFloatDType(DType::F8_E4M3));  // meaningless without its scale
  for (const char* name : names) {
    EXPECT_NE(SupportedDTypeNames().find(name), std::string_view::npos) << name;
  }
}

// ---------------------------------------------------------------------------------------------------------
// FP16

// Independent decoding by the formula of docs/formats.md: (-1)^s * 2^(e-15) * (1 + m/1024) for normals,
// (-1)^s * 2^-14 * (m/1024) for subnormals.
double F16ByFormula(std::uint16_t code) {
  const int sign = code >> 15;
  const int exponent = (code >> 10) & 0x1F;
  const int mantissa = code & 0x3FF;
  double magnitude;
  if (exponent == 0x1F) {
    magnitude =
        mantissa == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(mantissa), -24);
  } else {
    magnitude = std::ldexp(static_cast<double>(1024 + mantissa), exponent - 25);
  }
  return sign ? -magnitude : magnitude;
}

bool IsF16NaN(std::uint16_t code) {
  return (code & 0x7C00) == 0x7C00 && (code & 0x03FF) != 0;
}

TEST(F16, AllCodesDecodeExactly) {
  for (std::uint32_t c = 0; c <= 0xFFFF; ++c) {
    const auto code = static_cast<std::uint16_t>(c);
    const float got = F16ToF32(code);
    const double want = F16ByFormula(code);
    if (IsF16NaN(code)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << c;
      // Sign kept, payload moved to the top of the binary32 mantissa.
      const std::uint32_t expected_bits = (static_cast<std::uint32_t>(c & 0x8000) << 16) | 0x7F800000u |
                                          (static_cast<std::uint32_t>(c & 0x3FF) << 13);
      ASSERT_EQ(Bits(got), expected_bits) << std::hex << c;
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << std::hex << c;
      ASSERT_EQ(std::signbit(got), (c & 0x8000) != 0) << std::hex << c;  // also tells -0 from +0
    }
  }
}

TEST(F16, HandCheckedCodes) {
  // s eeeee mmmmmmmmmm, bias 15: 0x3C00 = 0.01111.0 = 1; 0x3555 = 2^-2 * (1 + 341/1024) = 0.333251953125;
  // 0xC000 = -2; 0x7BFF = 2^15 * (2 - 2^-10) = 65504; 0x0001 = 2^-24; 0x03FF = 1023 * 2^-24; 0x0400 = 2^-14.
  const struct {
    std::uint16_t code;
    double value;
  } anchors[] = {{0x0000, 0.0},
                 {0x0001, 5.9604644775390625e-08},
                 {0x03FF, 6.097555160522461e-05},
                 {0x0400, 6.103515625e-05},
                 {0x3555, 0.333251953125},
                 {0x3BFF, 0.99951171875},
                 {0x3C00, 1.0},
                 {0x3C01, 1.0009765625},
                 {0x4000, 2.0},
                 {0x4248, 3.140625},
                 {0x7BFF, 65504.0},
                 {0xC000, -2.0},
                 {0xFBFF, -65504.0}};
  for (const auto& a : anchors)
    EXPECT_EQ(static_cast<double>(F16ToF32(a.code)), a.value) << std::hex << a.code;
  EXPECT_EQ(Bits(F16ToF32(0x8000)), 0x80000000u);
  EXPECT_EQ(F16ToF32(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(Bits(F16ToF32(0x7E00)), 0x7FC00000u);  // the usual quiet NaN
  EXPECT_EQ(Bits(F16ToF32(0xFC01)), 0xFF802000u);  // a signalling NaN keeps sign and payload
}

TEST(F16, RoundTripOfEveryCodeIsIdentity) {
  for (std::uint32_t c = 0; c <= 0xFFFF; ++c) {
    const auto code = static_cast<std::uint16_t>(c);
    const std::uint16_t back = F32ToF16(F16ToF32(code));
    if (IsF16NaN(code)) {
      ASSERT_EQ(back, 0x7FFF) << std::hex << c;  // CUDA's canonical NaN: sign and payload dropped
    } else {
      ASSERT_EQ(back, code) << std::hex << c;
    }
  }
}

TEST(F16, HalfwayCasesRoundToEven) {
  // Between any two adjacent finite FP16 values (subnormal and normal, across binade boundaries), the
  // midpoint is exact in binary32. It must round to the code with an even mantissa; the floats just below
  // and just above it must round to the nearer code.
  for (std::uint32_t c = 0; c < 0x7BFF; ++c) {
    for (const std::uint16_t sign : {std::uint16_t{0}, std::uint16_t{0x8000}}) {
      const auto lo = static_cast<std::uint16_t>(sign | c);
      const auto hi = static_cast<std::uint16_t>(sign | (c + 1));
      const float mid = static_cast<float>((static_cast<double>(F16ToF32(lo)) + F16ToF32(hi)) / 2);
      const std::uint16_t even = (c % 2 == 0) ? lo : hi;
      ASSERT_EQ(F32ToF16(mid), even) << std::hex << c;
      ASSERT_EQ(F32ToF16(std::nextafter(mid, 0.0f)), lo) << std::hex << c;
      ASSERT_EQ(F32ToF16(std::nextafter(mid, sign ? -1e9f : 1e9f)), hi) << std::hex << c;
    }
  }
  // Specific ties: 2^-25 (between 0 and the smallest subnormal) goes to 0; 3 * 2^-25 goes to 2 * 2^-24;
  // 1 + 2^-11 (between 1 and 1 + 2^-10) goes to 1; 1 + 3 * 2^-11 goes to 1 + 2^-9.
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(F32ToF16(-std::ldexp(1.0f, -25)), 0x8000);
  EXPECT_EQ(F32ToF16(std::ldexp(3.0f, -25)), 0x0002);
  EXPECT_EQ(F32ToF16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  EXPECT_EQ(F32ToF16(1.0f + std::ldexp(3.0f, -11)), 0x3C02);
}

TEST(F16, OverflowToInfinity) {
  EXPECT_EQ(F32ToF16(65504.0f), 0x7BFF);  // largest finite
  EXPECT_EQ(F32ToF16(std::nextafter(65520.0f, 0.0f)), 0x7BFF);
  EXPECT_EQ(F32ToF16(65520.0f), 0x7C00);  // the tie between 65504 (odd) and 2^16 goes to inf
  EXPECT_EQ(F32ToF16(-65520.0f), 0xFC00);
  EXPECT_EQ(F32ToF16(1e10f), 0x7C00);
  EXPECT_EQ(F32ToF16(std::numeric_limits<float>::max()), 0x7C00);
  EXPECT_EQ(F32ToF16(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(F32ToF16(-std::numeric_limits<float>::infinity()), 0xFC00);
  EXPECT_EQ(F16ToF32(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(F16ToF32(0xFC00), -std::numeric_limits<float>::infinity());
}

TEST(F16, SubnormalsAndZeros) {
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));     // smallest subnormal
  EXPECT_EQ(F16ToF32(0x03FF), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(F16ToF32(0x0400), std::ldexp(1.0f, -14));     // smallest normal
  EXPECT_EQ(F32ToF16(std::ldexp(1023.0f, -24)), 0x03FF);
  EXPECT_EQ(F32ToF16(-std::ldexp(1023.0f, -24)), 0x83FF);
  EXPECT_EQ(F32ToF16(std::ldexp(1023.5f, -24)), 0x0400);  // tie above the largest subnormal: to even (normal)
  EXPECT_EQ(F32ToF16(std::ldexp(1022.5f, -24)), 0x03FE);  // tie: to even
  EXPECT_EQ(F32ToF16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(F32ToF16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);  // just above the tie
  EXPECT_EQ(F32ToF16(0.0f), 0x0000);
  EXPECT_EQ(F32ToF16(-0.0f), 0x8000);
  EXPECT_EQ(Bits(F16ToF32(0x0000)), 0x00000000u);
  EXPECT_EQ(Bits(F16ToF32(0x8000)), 0x80000000u);
}

// CUDA's __float2half_rn and __float2bfloat16_rn return 0x7FFF for every NaN: checked on every NaN pattern
// of both signs, including those whose upper 16 bits would truncate to a BF16 inf (payload only in the low
// 16 bits).
void ExpectEveryNaNBecomesCanonical(std::uint16_t (*convert)(float)) {
  for (const std::uint32_t sign : {0u, 0x80000000u}) {
    for (std::uint32_t payload = 1; payload <= 0x7FFFFFu; ++payload) {
      const std::uint32_t bits = sign | 0x7F800000u | payload;
      ASSERT_EQ(convert(FromBits(bits)), 0x7FFF) << std::hex << bits;
    }
  }
}

TEST(F16, EveryNaNBecomesCudasCanonicalNaN) {
  ExpectEveryNaNBecomesCanonical(F32ToF16);
  EXPECT_TRUE(IsF16NaN(0x7FFF));
  EXPECT_TRUE(std::isnan(F16ToF32(0x7FFF)));
}

TEST(F16, EncodingMatchesNearestValueSearch) {
  // Independent reference: the positive finite FP16 values, in code order, are increasing. Find the two
  // neighbours of |x| by binary search and take the nearer one (the even code on a tie); beyond the last
  // tie (65520) the result is inf.
  std::vector<double> values;  // values[c] = value of code c, c = 0 .. 0x7BFF
  for (std::uint32_t c = 0; c <= 0x7BFF; ++c) values.push_back(F16ByFormula(static_cast<std::uint16_t>(c)));
  const auto reference = [&](float x) -> std::uint16_t {
    const auto sign = static_cast<std::uint16_t>(std::signbit(x) ? 0x8000 : 0);
    const double a = std::fabs(static_cast<double>(x));
    if (a >= 65520.0) return sign | 0x7C00;
    const auto it = std::lower_bound(values.begin(), values.end(), a);  // first value >= a
    if (it == values.end()) return sign | 0x7BFF;                       // 65504 < a < 65520
    auto hi = static_cast<std::uint16_t>(it - values.begin());
    if (values[hi] == a || hi == 0) return sign | hi;
    const auto lo = static_cast<std::uint16_t>(hi - 1);
    const double below = a - values[lo];
    const double above = values[hi] - a;
    if (below < above) return sign | lo;
    if (above < below) return sign | hi;
    return sign | ((lo % 2 == 0) ? lo : hi);
  };
  // Every 251st binary32 pattern (17 million values across the whole range), NaNs skipped.
  for (std::uint64_t bits = 0; bits <= 0xFFFFFFFFu; bits += 251) {
    const float x = FromBits(static_cast<std::uint32_t>(bits));
    if (std::isnan(x)) continue;
    ASSERT_EQ(F32ToF16(x), reference(x)) << std::hex << bits;
  }
}

// ---------------------------------------------------------------------------------------------------------
// BF16

// Independent decoding: (-1)^s * 2^(e-127) * (1 + m/128) for normals, (-1)^s * 2^-126 * (m/128) for
// subnormals.
double BF16ByFormula(std::uint16_t code) {
  const int sign = code >> 15;
  const int exponent = (code >> 7) & 0xFF;
  const int mantissa = code & 0x7F;
  double magnitude;
  if (exponent == 0xFF) {
    magnitude =
        mantissa == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(mantissa), -133);
  } else {
    magnitude = std::ldexp(static_cast<double>(128 + mantissa), exponent - 134);
  }
  return sign ? -magnitude : magnitude;
}

bool IsBF16NaN(std::uint16_t code) {
  return (code & 0x7F80) == 0x7F80 && (code & 0x007F) != 0;
}

TEST(BF16, AllCodesDecodeExactly) {
  for (std::uint32_t c = 0; c <= 0xFFFF; ++c) {
    const auto code = static_cast<std::uint16_t>(c);
    const float got = BF16ToF32(code);
    ASSERT_EQ(Bits(got), c << 16) << std::hex << c;
    if (IsBF16NaN(code)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << c;
    } else {
      ASSERT_EQ(static_cast<double>(got), BF16ByFormula(code)) << std::hex << c;
    }
  }
}

TEST(BF16, HandCheckedCodes) {
  // s eeeeeeee mmmmmmm, bias 127: 0x3F80 = 1; 0x4049 = 2 * (1 + 73/128) = 3.140625; 0x7F7F = 2^127 * (2 -
  // 2^-7); 0x0001 = 2^-133 (smallest subnormal); 0x0080 = 2^-126 (smallest normal).
  const struct {
    std::uint16_t code;
    double value;
  } anchors[] = {{0x0000, 0.0},
                 {0x0001, std::ldexp(1.0, -133)},
                 {0x0080, std::ldexp(1.0, -126)},
                 {0x3F80, 1.0},
                 {0x3F81, 1.0078125},
                 {0x4049, 3.140625},
                 {0x3EAB, 0.333984375},
                 {0x7F7F, 3.3895313892515355e38},
                 {0xC000, -2.0}};
  for (const auto& a : anchors)
    EXPECT_EQ(static_cast<double>(BF16ToF32(a.code)), a.value) << std::hex << a.code;
  EXPECT_EQ(BF16ToF32(0xFF80), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(Bits(BF16ToF32(0x7FFF)), 0x7FFF0000u);  // CUDA's canonical NaN
}

TEST(BF16, RoundTripOfEveryCodeIsIdentity) {
  for (std::uint32_t c = 0; c <= 0xFFFF; ++c) {
    const auto code = static_cast<std::uint16_t>(c);
    const std::uint16_t back = F32ToBF16(BF16ToF32(code));
    if (IsBF16NaN(code)) {
      ASSERT_EQ(back, 0x7FFF) << std::hex << c;  // CUDA's canonical NaN: sign and payload dropped
    } else {
      ASSERT_EQ(back, code) << std::hex << c;
    }
  }
}

TEST(BF16, HalfwayCasesRoundToEven) {
  // For adjacent codes c, c + 1 (c = 0 .. 0x7F7E, and the same negated), the float with bits
  // (c << 16) | 0x8000 is exactly halfway between them.
  for (std::uint32_t c = 0; c < 0x7F7F; ++c) {
    for (const std::uint32_t sign : {0u, 0x8000u}) {
      const std::uint32_t mid = ((sign | c) << 16) | 0x8000u;
      const auto even = static_cast<std::uint16_t>(sign | ((c % 2 == 0) ? c : c + 1));
      ASSERT_EQ(F32ToBF16(FromBits(mid)), even) << std::hex << c;
      ASSERT_EQ(F32ToBF16(FromBits(mid - 1)), sign | c) << std::hex << c;
      ASSERT_EQ(F32ToBF16(FromBits(mid + 1)), sign | (c + 1)) << std::hex << c;
    }
  }
  EXPECT_EQ(F32ToBF16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);  // tie between 1 and 1 + 2^-7: to 1 (even)
  EXPECT_EQ(F32ToBF16(1.0f + std::ldexp(3.0f, -8)), 0x3F82);  // tie: to 1 + 2^-6 (even)
}

TEST(BF16, OverflowZerosSubnormalsAndInfinity) {
  // Halfway between the largest finite BF16 (0x7F7F, odd) and 2^128 rounds up to inf; just below stays.
  EXPECT_EQ(F32ToBF16(FromBits(0x7F7F8000u)), 0x7F80);
  EXPECT_EQ(F32ToBF16(FromBits(0x7F7F7FFFu)), 0x7F7F);
  EXPECT_EQ(F32ToBF16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(F32ToBF16(-std::numeric_limits<float>::max()), 0xFF80);
  EXPECT_EQ(F32ToBF16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(F32ToBF16(-std::numeric_limits<float>::infinity()), 0xFF80);
  EXPECT_EQ(F32ToBF16(0.0f), 0x0000);
  EXPECT_EQ(F32ToBF16(-0.0f), 0x8000);
  EXPECT_EQ(F32ToBF16(std::numeric_limits<float>::denorm_min()), 0x0000);  // 2^-149: below half of 2^-133
  EXPECT_EQ(F32ToBF16(FromBits(0x007F8000u)), 0x0080);   // tie at the top of the subnormals: to the normal
  EXPECT_EQ(BF16ToF32(0x0001), std::ldexp(1.0f, -133));  // smallest subnormal
}

TEST(BF16, EveryNaNBecomesCudasCanonicalNaNNeverInfinity) {
  ExpectEveryNaNBecomesCanonical(F32ToBF16);
  EXPECT_TRUE(IsBF16NaN(0x7FFF));
  EXPECT_TRUE(std::isnan(BF16ToF32(0x7FFF)));
}

TEST(BF16, EncodingMatchesRoundingInDouble) {
  // Independent reference for finite x: the BF16 value nearest to x, computed in double. For a finite,
  // non-NaN float, ulp = 2^(max(e, 1) - 134) with e the biased exponent; candidates are the multiples of the
  // ulp around x, the even multiple on a tie; at 2^128 and above the result is inf.
  for (std::uint64_t bits = 0; bits <= 0xFFFFFFFFu; bits += 251) {
    const float x = FromBits(static_cast<std::uint32_t>(bits));
    if (std::isnan(x) || std::isinf(x)) continue;
    const int exponent = static_cast<int>((bits >> 23) & 0xFF);
    const double ulp = std::ldexp(1.0, std::max(exponent, 1) - 134);
    const double a = std::fabs(static_cast<double>(x));
    const double k = std::floor(a / ulp);
    const double rest = a - k * ulp;
    double multiple = k;
    if (rest > ulp / 2 || (rest == ulp / 2 && std::fmod(k, 2.0) != 0)) multiple = k + 1;
    const double rounded = multiple * ulp;
    const float want = rounded >= std::ldexp(1.0, 128) ? std::numeric_limits<float>::infinity()
                                                       : static_cast<float>(rounded);
    const std::uint16_t got = F32ToBF16(x);
    ASSERT_EQ(static_cast<double>(BF16ToF32(got)), std::signbit(x) ? -static_cast<double>(want) : want)
        << std::hex << bits;
    ASSERT_EQ((got & 0x8000) != 0, std::signbit(x)) << std::hex << bits;
  }
}

}  // namespace
}  // namespace plumb
