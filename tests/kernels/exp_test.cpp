// plumb's e^x (scalar::Exp, include/plumb/kernels/scalar.h) and the ops built on it: the definition's
// accuracy against double-precision exp and its special cases, then every variant (exp_kernels.h's ExpMinus
// and SwiGlu, the softmax of attention's rows) against the scalar loops bit for bit, on inputs that take
// each path (the polynomial, every special case, NaN payloads) at lengths that leave vector tails.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "../../src/kernels/attention/attention_by_head.h"
#include "../../src/kernels/exp/exp_kernels.h"
#include "plumb/kernels/isa.h"
#include "plumb/kernels/kernels.h"
#include "plumb/kernels/scalar.h"
#include "support/isa_variants.h"

namespace plumb {
namespace {

using kernels::scalar::Exp;

std::uint32_t Bits(float x) {
  return std::bit_cast<std::uint32_t>(x);
}

// The error of Exp(x) in units of the last place of the float nearest e^x (exp in double, whose own error
// is ~2^-53 relative, far below the float ulp it is measured in).
double UlpError(float x) {
  const double exact = std::exp(static_cast<double>(x));
  const double got = Exp(x);
  int exponent = 0;
  std::frexp(exact, &exponent);
  const double ulp = std::ldexp(1.0, std::max(exponent - 24, -149));  // subnormals: 2^-149
  return std::fabs(got - exact) / ulp;
}

TEST(ExpDefinition, WithinHalfAnUlpAndAHairOnASampleOfEveryFiniteRange) {
  // Every 509th float (8.4 million: every exponent, both signs) where the result is a finite non-zero
  // float: the algorithm's documented bound is 0.502 ulp (round to nearest would be 0.5).
  double worst = 0;
  float worst_x = 0;
  for (std::uint64_t b = 0; b < (std::uint64_t{1} << 32); b += 509) {
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(b));
    if (!std::isfinite(x) || x > 88.72f || x < -103.0f) continue;
    const double e = UlpError(x);
    if (e > worst) worst = e, worst_x = x;
  }
  EXPECT_LE(worst, 0.502) << "at x = " << worst_x;
  EXPECT_GT(worst, 0.4) << "a sample this large reaches near the half ulp of round-to-nearest";
}

TEST(ExpDefinition, SpecialCases) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(Bits(Exp(0.0f)), Bits(1.0f));
  EXPECT_EQ(Bits(Exp(-0.0f)), Bits(1.0f));
  EXPECT_EQ(Bits(Exp(-inf)), Bits(0.0f));
  EXPECT_EQ(Bits(Exp(inf)), Bits(inf));
  EXPECT_EQ(Bits(Exp(89.0f)), Bits(inf));
  EXPECT_EQ(Bits(Exp(0x1.62e42ep6f)), Bits(static_cast<float>(std::exp(static_cast<double>(0x1.62e42ep6f)))))
      << "the largest input below overflow";
  EXPECT_EQ(Bits(Exp(-104.0f)), Bits(0.0f));
  EXPECT_EQ(Bits(Exp(-103.5f)), Bits(0x1p-149f));
  EXPECT_EQ(Bits(Exp(-100.0f)), Bits(static_cast<float>(std::exp(-100.0))));
  EXPECT_EQ(Bits(Exp(1.0f)), Bits(static_cast<float>(std::exp(1.0))));
  // A NaN comes back quiet with its sign and payload (x + x).
  const float signalling = std::bit_cast<float>(0xFF812345u);
  EXPECT_EQ(Bits(Exp(signalling)), 0xFFC12345u);
}

// The exhaustive comparison docs/formats.md ("e^x") reports: Exp against this host's std::exp for all 2^32
// inputs. It holds where libm is glibc ≥ 2.27 running its FMA build of expf; elsewhere libm may round
// differently, which is why plumb has its own. Off unless asked for (about a minute).
TEST(ExpDefinition, EveryInputAgainstTheHostLibmWhenAsked) {
  if (std::getenv("PLUMB_EXP_EXHAUSTIVE") == nullptr) {
    GTEST_SKIP() << "set PLUMB_EXP_EXHAUSTIVE=1 to compare all 2^32 inputs with this host's std::exp";
  }
  std::uint64_t differ = 0;
  for (std::uint64_t b = 0; b < (std::uint64_t{1} << 32); ++b) {
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(b));
    differ += Bits(Exp(x)) != Bits(std::exp(x));
  }
  EXPECT_EQ(differ, 0u);
}

// Inputs for the variants: the polynomial's whole range, both special-case boundaries, infinities, NaNs
// with payloads, zeros and subnormals, placed so each lane of a vector meets them.
std::vector<float> Inputs(int n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const float specials[] = {0.0f,
                            -0.0f,
                            88.0f,
                            -88.0f,
                            0x1.62e42ep6f,
                            0x1.62e430p6f,
                            -0x1.9fe368p6f,
                            -0x1.9fe36ap6f,
                            -0x1.9d1d9ep6f,
                            -0x1.9d1da0p6f,
                            1e-40f,
                            -1e-40f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::bit_cast<float>(0x7FA00001u),
                            std::bit_cast<float>(0xFFC00010u)};
  std::vector<float> x(static_cast<std::size_t>(n));
  for (float& v : x) {
    const std::uint64_t r = rng();
    if (r % 16 == 0) {
      v = specials[(r >> 8) % std::size(specials)];
    } else if (r % 16 < 8) {
      v = static_cast<float>(static_cast<std::int64_t>(r >> 40) - (std::int64_t{1} << 23)) * 0x1p-17f;  // ±64
    } else {
      v = std::bit_cast<float>(static_cast<std::uint32_t>(r >> 32));  // any bits
    }
  }
  return x;
}

std::string FirstDifference(const std::vector<float>& expected, const std::vector<float>& actual,
                            const std::vector<float>& input) {
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (Bits(expected[i]) != Bits(actual[i])) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "element %zu of %zu (input %a): expected %a (0x%08x), got %a (0x%08x)",
                    i, expected.size(), input[i], expected[i], Bits(expected[i]), actual[i], Bits(actual[i]));
      return buf;
    }
  }
  return "";
}

constexpr int kLengths[] = {1, 7, 8, 9, 15, 16, 17, 31, 33, 100, 513, 1000};

class ExpVariants : public testing::IsaTest<> {};

TEST_P(ExpVariants, ExpMinusIsTheScalarLoop) {
  const kernels::ExpMinusFn exp_minus = kernels::ActiveExpMinus();
  for (int n : kLengths) {
    for (const float shift : {0.0f, 3.5f, -20.25f}) {
      const std::vector<float> input = Inputs(n, static_cast<std::uint64_t>(n) * 31 + 7);
      std::vector<float> expected = input, actual = input;
      for (float& v : expected) v = Exp(v - shift);
      exp_minus(actual.data(), n, shift);
      ASSERT_EQ(FirstDifference(expected, actual, input), "") << "n " << n << ", shift " << shift;
    }
  }
}

TEST_P(ExpVariants, SwiGluIsTheScalarLoopInPlaceToo) {
  for (int n : kLengths) {
    const std::vector<float> gate = Inputs(n, static_cast<std::uint64_t>(n) * 17 + 1);
    const std::vector<float> up = Inputs(n, static_cast<std::uint64_t>(n) * 13 + 2);
    std::vector<float> expected(gate.size()), actual = gate;
    kernels::scalar::SwiGlu(gate.data(), up.data(), expected.data(), n);
    kernels::SwiGlu(actual.data(), up.data(), actual.data(), n);  // out aliasing gate, as the model calls it
    ASSERT_EQ(FirstDifference(expected, actual, gate), "") << "n " << n;
  }
}

TEST_P(ExpVariants, GeluTanhGluIsTheScalarLoopInPlaceToo) {
  for (int n : kLengths) {
    const std::vector<float> gate = Inputs(n, static_cast<std::uint64_t>(n) * 19 + 3);
    const std::vector<float> up = Inputs(n, static_cast<std::uint64_t>(n) * 23 + 4);
    std::vector<float> expected(gate.size()), actual = gate;
    kernels::scalar::GeluTanhGlu(gate.data(), up.data(), expected.data(), n);
    kernels::GeluTanhGlu(actual.data(), up.data(), actual.data(), n);
    ASSERT_EQ(FirstDifference(expected, actual, gate), "") << "n " << n;
  }
}

// The definition against the tanh form in double (as x / (1 + e^−2u), the same function). The identity it
// computes by is exact, so the difference is float rounding: a few ulp of the result, except that the
// rounding of the exponent w = −2√(2/π)·s (three roundings, relative) moves e^w by |w| times as much; for
// negative g, where the result is g·e^−|w|-small, that is what shows. Hence the bound (4 + 4|w|) ulp of the
// result.
TEST(GeluTanhGluDefinition, IsGelusTanhFormWithinFloatRounding) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> wide(-12.0f, 12.0f);
  double worst = 0;
  float worst_g = 0;
  for (int i = 0; i < 200000; ++i) {
    const float g = i < 1000 ? static_cast<float>(i - 500) * 0.001f : wide(rng), up = 1.0f;
    float out = 0;
    kernels::scalar::GeluTanhGlu(&g, &up, &out, 1);
    const double x = g;
    const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
    // (0.5·x·(1 + tanh(u)) itself in double would lose everything to cancellation for u ≪ 0.)
    const double exact = x / (1.0 + std::exp(-2 * u));
    if (std::fabs(u) < 5) {
      EXPECT_NEAR(exact, 0.5 * x * (1.0 + std::tanh(u)), 1e-15 * (1 + std::fabs(x)));
    }
    const double allowed = (4 + 4 * std::fabs(2 * u)) * 0x1p-24 * std::fabs(exact) + 1e-30;
    const double ratio = std::fabs(out - exact) / allowed;
    if (ratio > worst) worst = ratio, worst_g = g;
  }
  EXPECT_LE(worst, 1.0) << "at g = " << worst_g;
  const float big = 1e20f, minus_big = -1e20f, one = 1.0f;
  float out = 0;
  kernels::scalar::GeluTanhGlu(&big, &one, &out, 1);
  EXPECT_EQ(out, big);  // gelu(g) → g for large g
  kernels::scalar::GeluTanhGlu(&minus_big, &one, &out, 1);
  EXPECT_EQ(out, 0.0f);  // and → 0 below
}

// Soft-capping through Exp: within a few float roundings of cap·tanh(x/cap) in absolute terms (the
// subtraction t = 2/(1 + e^−2y) − 1 keeps absolute, not relative, accuracy near 0), never beyond ±cap, odd up
// to those roundings, and the identity at the scale where tanh(y) ≈ y.
TEST(SoftCapDefinition, IsCapTimesTanhWithinFloatRounding) {
  for (const float cap : {30.0f, 50.0f, 1.0f}) {
    std::vector<float> x;
    for (int i = -4000; i <= 4000; ++i) x.push_back(static_cast<float>(i) * cap / 400.0f);  // ±10 cap
    x.insert(x.end(), {1e30f, -1e30f, std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity()});
    std::vector<float> capped = x;
    kernels::SoftCap(capped.data(), capped.size(), cap);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double exact = cap * std::tanh(static_cast<double>(x[i]) / cap);
      ASSERT_NEAR(capped[i], exact, 4 * cap * 0x1p-24) << "x " << x[i] << ", cap " << cap;
      ASSERT_LE(std::fabs(capped[i]), cap);
    }
  }
}

TEST_P(ExpVariants, SoftmaxRowsIsTheDefinitionRowByRow) {
  // Scores as attention makes them (±40, some 100 below the max so Exp's special cases meet the vector
  // path), and rows holding −inf or a NaN; 1..9 rows so every interleaving of the sums is taken.
  std::mt19937_64 rng(5);
  for (int n : kLengths) {
    for (int count = 1; count <= 9; ++count) {
      std::vector<float> x(static_cast<std::size_t>(count) * n);
      for (float& v : x)
        v = static_cast<float>(static_cast<std::int64_t>(rng() >> 44) - (1 << 19)) * 0x1p-14f;
      for (int r = 0; r < count; ++r) {
        float* row = x.data() + static_cast<std::size_t>(r) * n;
        if (r % 3 == 1) row[rng() % n] -= 100.0f;
        if (r == 4) row[rng() % n] = -std::numeric_limits<float>::infinity();
        if (r == 7) row[rng() % n] = std::numeric_limits<float>::quiet_NaN();
      }
      std::vector<float> expected = x, actual = x;
      for (int r = 0; r < count; ++r)
        kernels::scalar::Softmax(expected.data() + static_cast<std::size_t>(r) * n, n);
      kernels::SoftmaxRows(actual.data(), count, n, n);
      ASSERT_EQ(FirstDifference(expected, actual, x), "") << "n " << n << ", rows " << count;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, ExpVariants, ::testing::ValuesIn(testing::kIsasOfThisBuild),
                         [](const auto& param_info) {
                           return std::string(kernels::IsaName(param_info.param));
                         });

}  // namespace
}  // namespace plumb
