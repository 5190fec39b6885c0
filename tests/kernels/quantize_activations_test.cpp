// The fast family's quantizer of x (kernels::QuantizeActivations, kernels/int8_activations.h) against its
// stated definition, and every ISA variant of it bitwise the scalar one. Built for aarch64 too (cmake/
// kernels-only.cmake), where the NEON variant runs under qemu.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "plumb/kernels/int8_activations.h"
#include "plumb/kernels/isa.h"
#include "support/isa_variants.h"
#include "support/naive.h"
#include "support/weight_samples.h"

namespace plumb {
namespace {

using kernels::Int8Activations;
using kernels::Isa;
using testing::RandomVector;
using testing::SameBits;

TEST(QuantizeActivations, FollowsTheStatedDefinition) {
  std::vector<float> x(70);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> value(-3.0f, 3.0f);
  for (float& v : x) v = value(rng);
  x[40] = 0.0f;
  Int8Activations q;
  kernels::QuantizeActivations(x.data(), 70, q);
  ASSERT_EQ(q.n, 70);
  for (int b = 0; b < 3; ++b) {
    float amax = 0.0f;
    for (int i = 32 * b; i < std::min(70, 32 * b + 32); ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    EXPECT_EQ(q.d[b], d) << b;
    int sum = 0;
    for (int i = 32 * b; i < 32 * b + 32; ++i) {
      const int expected = i < 70 ? static_cast<int>(std::round(x[i] * (1.0f / d))) : 0;  // padded with 0
      ASSERT_EQ(q.q[i], expected) << i;
      ASSERT_LE(std::abs(expected), 127);
      sum += expected;
    }
    EXPECT_EQ(q.s[b], d * static_cast<float>(sum)) << b;
    EXPECT_EQ(q.sum[b], sum) << b;
  }
  // The element of largest magnitude is ±127, and each q·d is within d/2 of x.
  for (int i = 0; i < 70; ++i)
    EXPECT_LE(std::fabs(q.q[i] * q.d[i / 32] - x[i]), 0.5f * q.d[i / 32] * 1.0001f);
}

TEST(QuantizeActivations, ZeroBlocksAreZeroAndNonFiniteBlocksNan) {
  std::vector<float> x(64, 0.0f);
  x[40] = std::numeric_limits<float>::infinity();
  Int8Activations q;
  kernels::QuantizeActivations(x.data(), 64, q);
  EXPECT_EQ(q.d[0], 0.0f);
  EXPECT_EQ(q.s[0], 0.0f);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(q.q[i], 0);
  EXPECT_TRUE(std::isnan(q.d[1]));
  EXPECT_TRUE(std::isnan(q.s[1]));
  EXPECT_EQ(q.sum[0], 0);
  EXPECT_EQ(q.sum[1], 0);
  for (int i = 32; i < 64; ++i) EXPECT_EQ(q.q[i], 0);
}

using QuantizeActivationsIsa = testing::IsaTest<>;

// Every variant's quantizer gives the scalar one's codes, d and s bit for bit: lengths with and without a
// partial last block, ties at .5 (amax 127 makes 1 / d exactly 1), values just below a tie, −0, subnormals,
// huge magnitudes, all-zero blocks and blocks holding an inf or a NaN.
TEST_P(QuantizeActivationsIsa, IsBitwiseTheScalarQuantizer) {
  const kernels::Isa isa = GetParam();
  for (int n : {1, 31, 32, 33, 95, 128, 1000}) {
    std::vector<float> x = RandomVector(n, 3u * n, 5.0f);
    const float specials[] = {127.0f, 2.5f,   -3.5f, 0.5f, -0.5f, 126.5f, std::nextafter(0.5f, 0.0f),
                              -0.0f,  1e-40f, -1.5f, 64.5f};
    for (int i = 0; i < std::min(n, 11); ++i) x[i] = specials[i];
    if (n >= 128) {
      std::fill(x.begin() + 32, x.begin() + 64, 0.0f);
      x[70] = std::numeric_limits<float>::infinity();
      x[100] = std::numeric_limits<float>::quiet_NaN();
    }
    if (n >= 1000) {
      for (int i = 200; i < 232; ++i) x[i] = (i % 2 ? 3e38f : -1e38f) * (static_cast<float>(i - 200) / 32);
    }
    kernels::SetIsa(Isa::kScalar);
    Int8Activations want;
    kernels::QuantizeActivations(x.data(), n, want);
    kernels::SetIsa(isa);
    Int8Activations got;
    kernels::QuantizeActivations(x.data(), n, got);
    ASSERT_EQ(got.n, n);
    for (int b = 0; b < Int8Activations::Blocks(n); ++b) {
      ASSERT_TRUE(SameBits(got.d[b], want.d[b])) << "n " << n << " block " << b;
      ASSERT_TRUE(SameBits(got.s[b], want.s[b])) << "n " << n << " block " << b;
      ASSERT_EQ(got.sum[b], want.sum[b]) << "n " << n << " block " << b;
      for (int i = 32 * b; i < 32 * b + 32; ++i)
        ASSERT_EQ(got.q[i], want.q[i]) << "n " << n << " element " << i;
    }
  }
  // The ties really are ties, rounded away from zero, and the element below one rounds down.
  Int8Activations q;
  const float tie[] = {127.0f, 2.5f, -3.5f, 0.5f, -0.5f, 126.5f, std::nextafter(0.5f, 0.0f)};
  kernels::QuantizeActivations(tie, 7, q);
  EXPECT_EQ(q.d[0], 1.0f);
  const int expected[] = {127, 3, -4, 1, -1, 127, 0};
  for (int i = 0; i < 7; ++i) EXPECT_EQ(q.q[i], expected[i]) << i;
}

INSTANTIATE_TEST_SUITE_P(Variants, QuantizeActivationsIsa,
                         ::testing::ValuesIn(plumb::testing::kIsasOfThisBuild),
                         [](const auto& p) { return std::string(kernels::IsaName(p.param)); });

}  // namespace
}  // namespace plumb
