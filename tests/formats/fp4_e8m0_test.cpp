// Tests of the microscaling element and scale formats, FP4 E2M1 and E8M0 (docs/formats.md "FP4 E2M1",
// "E8M0"). Each encoder is checked against a derivation that shares none of its arithmetic: FP4 by a
// nearest-value search in double over the 16 decoded codes, E8M0 by frexp. The exact agreement with CUDA's
// own __nv_cvt_float_to_fp4 and __nv_cvt_float_to_e8m0 over every float is tests/cuda_headers/.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "plumb/formats/e8m0.h"
#include "plumb/formats/fp4.h"

namespace plumb {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// FP4 by search: toward zero, the largest magnitude not above |x|; to nearest, the closest one, a tie to
// the even code. Anything above 6 is 6 (CUDA saturates); NaN is +6.
std::uint8_t Fp4BySearch(float x, Fp4Rounding rounding) {
  if (std::isnan(x)) return 0x7;
  const std::uint8_t sign = std::signbit(x) ? 0x8 : 0x0;
  const double a = std::fabs(static_cast<double>(x));
  if (a > kFp4MaxFinite) return static_cast<std::uint8_t>(sign | 0x7);
  int best = 0;
  for (int code = 1; code < 8; ++code) {
    const double v = Fp4ToF32(static_cast<std::uint8_t>(code));
    if (rounding == Fp4Rounding::kTowardZero) {
      if (v <= a) best = code;
      continue;
    }
    const double d = std::fabs(v - a);
    const double best_d = std::fabs(Fp4ToF32(static_cast<std::uint8_t>(best)) - a);
    if (d < best_d || (d == best_d && code % 2 == 0)) best = code;
  }
  return static_cast<std::uint8_t>(sign | best);
}

// Floats that probe every decision of an FP4 encoder: each magnitude and midpoint, one ulp either side of
// each, the subnormal region, the saturation edge and the specials, with both signs.
std::vector<float> Fp4Probes() {
  std::vector<float> probes = {0.0f,
                               1e-30f,
                               0.1f,
                               0.24f,
                               5.5f,
                               6.5f,
                               7.0f,
                               8.0f,
                               1e10f,
                               kInf,
                               std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::denorm_min()};
  for (int code = 0; code < 8; ++code) {
    const float v = Fp4ToF32(static_cast<std::uint8_t>(code));
    const float next = code < 7 ? Fp4ToF32(static_cast<std::uint8_t>(code + 1)) : 8.0f;
    for (const float p : {v, (v + next) / 2}) {
      probes.push_back(p);
      probes.push_back(std::nextafter(p, 0.0f));
      probes.push_back(std::nextafter(p, kInf));
    }
  }
  const std::size_t positive = probes.size();
  for (std::size_t i = 0; i < positive; ++i) probes.push_back(-probes[i]);
  return probes;
}

TEST(Fp4, DecodesTheSixteenCodes) {
  // S EE M, bias 1: 0x1 = subnormal 0.5; 0x2 = 2^0; 0x3 = 1.5; 0x5 = 2^1 · 1.5; 0x7 = 2^2 · 1.5.
  const float expected[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float* table = Fp4DecodeTable();
  for (int code = 0; code < 16; ++code) {
    const float got = Fp4ToF32(static_cast<std::uint8_t>(code));
    EXPECT_EQ(got, code < 8 ? expected[code] : -expected[code - 8]) << code;
    EXPECT_EQ(std::signbit(got), code >= 8) << code;  // 0x8 is −0
    EXPECT_EQ(std::bit_cast<std::uint32_t>(table[code]), std::bit_cast<std::uint32_t>(got)) << code;
  }
  EXPECT_EQ(Fp4ToF32(0xF7), 6.0f);  // the high nibble is not the code's
  EXPECT_EQ(Fp4ToF32(0x7F), -6.0f);
}

TEST(Fp4, EncodesAsTheNearestValueSearch) {
  for (const Fp4Rounding rounding : {Fp4Rounding::kNearestEven, Fp4Rounding::kTowardZero}) {
    for (const float x : Fp4Probes()) {
      ASSERT_EQ(F32ToFp4(x, rounding), Fp4BySearch(x, rounding))
          << "x = " << x << (rounding == Fp4Rounding::kTowardZero ? " toward zero" : " to nearest");
    }
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-8.0f, 8.0f);
    for (int i = 0; i < 100000; ++i) {
      const float x = u(rng);
      ASSERT_EQ(F32ToFp4(x, rounding), Fp4BySearch(x, rounding)) << "x = " << x;
    }
  }
}

TEST(Fp4, HandCheckedRoundings) {
  const struct {
    float x;
    std::uint8_t nearest, toward_zero;
  } cases[] = {
      {0.25f, 0x0, 0x0},                      // the tie between 0 and 0.5 goes to 0, the even code
      {0.26f, 0x1, 0x0}, {0.75f, 0x2, 0x1},   // 0.75 is between 0.5 (code 1) and 1 (code 2): to 1
      {1.25f, 0x2, 0x2}, {1.75f, 0x4, 0x3},   // ties to 1 (code 2) and to 2 (code 4)
      {2.5f, 0x4, 0x4},  {3.5f, 0x6, 0x5},    // ties to 2 (code 4) and to 4 (code 6)
      {5.0f, 0x6, 0x6},  {5.01f, 0x7, 0x6},   // the tie between 4 and 6 goes to 4 (code 6, even)
      {6.0f, 0x7, 0x7},  {100.0f, 0x7, 0x7},  // saturation, as CUDA's satfinite conversion
      {-0.0f, 0x8, 0x8}, {-0.1f, 0x8, 0x8},   // the sign stays on a zero
      {-3.0f, 0xD, 0xD}, {-kInf, 0xF, 0xF},  {kNan, 0x7, 0x7}, {-kNan, 0x7, 0x7},  // NaN is +6
  };
  for (const auto& c : cases) {
    EXPECT_EQ(F32ToFp4(c.x, Fp4Rounding::kNearestEven), c.nearest) << c.x;
    EXPECT_EQ(F32ToFp4(c.x, Fp4Rounding::kTowardZero), c.toward_zero) << c.x;
  }
}

// E8M0 by frexp: |x| = f · 2^e with f in [0.5, 1), so floor(log2 |x|) = e − 1, and |x| is a power of two
// exactly when f = 0.5. Codes are clamped to [0, 254] (2^−127 .. 2^127); beyond 2^127 is an overflow.
std::uint8_t E8M0ByFrexp(float x, E8M0Rounding rounding, Fp8Overflow overflow) {
  if (std::isnan(x)) return 0xFF;
  const std::uint8_t overflowed = overflow == Fp8Overflow::kSaturate ? 0xFE : 0xFF;
  if (std::isinf(x)) return overflowed;
  if (x == 0.0f) return 0;
  int e = 0;
  const double f = std::frexp(std::fabs(static_cast<double>(x)), &e);
  int log2 = e - 1;
  if (rounding == E8M0Rounding::kTowardPosInf && f != 0.5) ++log2;
  if (log2 > 127) return overflowed;
  return static_cast<std::uint8_t>(std::max(log2, -127) + 127);
}

TEST(E8M0, DecodesEveryCode) {
  for (int code = 0; code < 255; ++code) {
    const float got = E8M0ToF32(static_cast<std::uint8_t>(code));
    double expected = 1.0;
    for (int k = code - 127; k != 0; k += (k > 0 ? -1 : 1)) expected = k > 0 ? expected * 2 : expected / 2;
    ASSERT_EQ(static_cast<double>(got), expected) << code;
  }
  EXPECT_EQ(E8M0ToF32(127), 1.0f);
  EXPECT_EQ(E8M0ToF32(0), std::ldexp(1.0f, -127));  // an FP32 subnormal, exact
  EXPECT_EQ(E8M0ToF32(254), std::ldexp(1.0f, 127));
  EXPECT_TRUE(std::isnan(E8M0ToF32(0xFF)));
  const float* table = E8M0DecodeTable();
  for (int code = 0; code < 256; ++code) {
    EXPECT_EQ(std::bit_cast<std::uint32_t>(table[code]),
              std::bit_cast<std::uint32_t>(E8M0ToF32(static_cast<std::uint8_t>(code))))
        << code;
  }
}

TEST(E8M0, EncodesAsFrexp) {
  std::vector<float> probes = {0.0f,
                               -0.0f,
                               kInf,
                               -kInf,
                               kNan,
                               std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::min(),
                               std::numeric_limits<float>::denorm_min()};
  for (int e = -149; e <= 127; ++e) {
    const float p = std::ldexp(1.0f, e);
    for (const float q : {p, std::nextafter(p, 0.0f), std::nextafter(p, kInf), p * 1.5f}) {
      probes.push_back(q);
      probes.push_back(-q);
    }
  }
  std::mt19937 rng(11);
  for (int i = 0; i < 100000; ++i) probes.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
  for (const E8M0Rounding rounding : {E8M0Rounding::kTowardZero, E8M0Rounding::kTowardPosInf}) {
    for (const Fp8Overflow overflow : {Fp8Overflow::kSaturate, Fp8Overflow::kNoSaturate}) {
      for (const float x : probes) {
        ASSERT_EQ(F32ToE8M0(x, rounding, overflow), E8M0ByFrexp(x, rounding, overflow))
            << "x = " << x << " (" << std::hex << std::bit_cast<std::uint32_t>(x) << ")";
      }
    }
  }
}

TEST(E8M0, HandCheckedScales) {
  constexpr auto kZ = E8M0Rounding::kTowardZero;
  constexpr auto kP = E8M0Rounding::kTowardPosInf;
  constexpr auto kSat = Fp8Overflow::kSaturate;
  constexpr auto kNoSat = Fp8Overflow::kNoSaturate;
  EXPECT_EQ(F32ToE8M0(1.0f, kZ, kSat), 127);
  EXPECT_EQ(F32ToE8M0(1.0f, kP, kSat), 127);  // a power of two is itself either way
  EXPECT_EQ(F32ToE8M0(6.0f, kZ, kSat), 129);  // 6 = 1.5 · 2^2: 2^2 toward zero, 2^3 upward
  EXPECT_EQ(F32ToE8M0(6.0f, kP, kSat), 130);
  EXPECT_EQ(F32ToE8M0(-6.0f, kP, kSat), 130);  // no sign: a scale is a magnitude
  EXPECT_EQ(F32ToE8M0(0.0f, kP, kSat), 0);     // no zero either: the smallest scale, 2^−127
  EXPECT_EQ(F32ToE8M0(std::ldexp(1.0f, -130), kP, kSat), 0);
  EXPECT_EQ(F32ToE8M0(std::ldexp(1.5f, -127), kP, kSat), 1);  // above 2^−127: 2^−126
  EXPECT_EQ(F32ToE8M0(std::ldexp(1.5f, 127), kZ, kNoSat), 254);
  EXPECT_EQ(F32ToE8M0(std::ldexp(1.5f, 127), kP, kSat), 254);  // 2^128 does not exist: saturated
  EXPECT_EQ(F32ToE8M0(std::ldexp(1.5f, 127), kP, kNoSat), 0xFF);
  EXPECT_EQ(F32ToE8M0(kInf, kZ, kSat), 254);
  EXPECT_EQ(F32ToE8M0(kInf, kZ, kNoSat), 0xFF);
  EXPECT_EQ(F32ToE8M0(-kNan, kZ, kSat), 0xFF);  // NaN stays NaN, saturation or not
}

}  // namespace
}  // namespace plumb
