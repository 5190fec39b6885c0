// The fast family's packed-INT4 row dots (src/kernels/int4/int4_int8.cpp): the scalar definition against
// double-precision dots of the quantized activations (only float rounding apart), every ISA variant bitwise
// the definition for every scheme and group size on awkward shapes, and Gemv's choice of family.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "plumb/formats/dtype.h"
#include "plumb/formats/int4.h"
#include "plumb/kernels/int8_activations.h"
#include "plumb/kernels/kernels.h"
#include "plumb/kernels/weight_format.h"
#include "plumb/kernels/weight_matrix.h"
#include "support/int8_rows.h"
#include "support/isa_variants.h"
#include "support/naive.h"
#include "support/weight_samples.h"

namespace plumb {
namespace {

using kernels::Int8Activations;
using kernels::Isa;
using kernels::KernelFamily;
using testing::FamilyGuard;
using testing::RandomVector;
using testing::SameBits;

constexpr Int4Scheme kSchemes[] = {Int4Scheme::kSymmetric, Int4Scheme::kAsymmetric,
                                   Int4Scheme::kAsymmetricF16Zero};
constexpr int kGroupSizes[] = {32, 64, 128};

std::string Name(const WeightMatrix& W) {
  return W.format->describe(W) + " " + std::to_string(W.rows) + "x" + std::to_string(W.cols);
}

// x with exact extremes (codes ±127 in block 0) and, where there are three blocks or more, a zero block.
std::vector<float> AwkwardX(int cols, std::uint32_t seed) {
  std::vector<float> x = RandomVector(cols, seed, 4.0f);
  x[0] = 8.0f;
  x[1] = -8.0f;
  if (cols >= 96) std::fill(x.begin() + 32, x.begin() + 64, 0.0f);
  return x;
}

TEST(Int4Int8RowDotsScalar, IsTheDotWithTheQuantizedActivationsWithinFloatRounding) {
  for (Int4Scheme scheme : kSchemes) {
    for (int G : kGroupSizes) {
      for (int cols : {32, 96, 640}) {
        const WeightMatrix W = testing::RandomInt4({scheme, G}, 7, cols, 3u * cols + G);
        const std::vector<float> x = AwkwardX(cols, 11u * cols);
        Int8Activations q;
        kernels::QuantizeActivations(x.data(), cols, q);
        std::vector<float> y(W.rows);
        W.format->kernels[static_cast<int>(Isa::kScalar)].int8_row_dots(W, 0, W.rows, q, y.data());
        std::vector<float> w(cols);
        for (int r = 0; r < W.rows; ++r) {
          W.format->kernels[static_cast<int>(Isa::kScalar)].decode_rows(W, r, 1, w.data());
          double dot = 0, abs_sum = 0, zero_terms = 0;
          for (int c = 0; c < cols; ++c) {
            const double xq = static_cast<double>(q.q[c]) * q.d[c / 32];
            dot += static_cast<double>(w[c]) * xq;
            abs_sum += std::fabs(static_cast<double>(w[c]) * xq);
          }
          if (scheme == Int4Scheme::kAsymmetricF16Zero) {
            // The definition's s·z·s_x terms: each rounded (s·z, d·Σq, the FMA), on values that cancel
            // against s·Σ q·x, so their size enters the bound beside Σ|w·x|.
            for (int c = 0; c < cols; ++c) {
              const int g = c / G;
              std::uint16_t z;
              std::memcpy(
                  &z, W.int4_zeros + static_cast<std::size_t>(r) * Int4ZeroRowBytes(W.int4, cols) + 2 * g, 2);
              const double s = F16ToF32(W.int4_scales[static_cast<std::size_t>(r) * Int4Groups(cols, G) + g]);
              zero_terms += std::fabs(s * F16ToF32(z) * q.q[c] * q.d[c / 32]);
            }
          }
          // Float steps: f = s·d_x, one FMA per block and lane, the 8-lane tree, the f16-zero chain and its
          // subtraction; and the naive row's own rounding of each weight ((q − z)·s): γ_{blocks + 6} with a
          // factor 2 covers them.
          const int steps = cols / 32 + 6;
          EXPECT_NEAR(y[r], dot, testing::Gamma(steps) * (abs_sum + zero_terms + 1e-30) * 2)
              << Name(W) << " row " << r;
        }
      }
    }
  }
}

using Int4Int8RowDotsIsa = testing::IsaTest<>;

TEST_P(Int4Int8RowDotsIsa, IsBitwiseTheDefinitionOnAwkwardShapes) {
  const kernels::Int8RowDotsFn variant = kernels::KernelsFor(kernels::kInt4Format, GetParam()).int8_row_dots;
  const kernels::Int8RowDotsFn definition =
      kernels::kInt4Format.kernels[static_cast<int>(Isa::kScalar)].int8_row_dots;
  ASSERT_NE(variant, nullptr);
  for (Int4Scheme scheme : kSchemes) {
    for (int G : kGroupSizes) {
      for (int rows : {1, 5, 11}) {
        for (int cols : {32, 96, 224, 608}) {
          // Codes and zero points one byte off alignment, as a mapped file may hold them.
          const WeightMatrix W = testing::RandomInt4({scheme, G}, rows, cols, 7u * cols + rows + G, 1);
          const std::vector<float> x = AwkwardX(cols, 5u * cols + rows);
          Int8Activations q;
          kernels::QuantizeActivations(x.data(), cols, q);
          ASSERT_TRUE(testing::RowsAreTheDefinitions(variant, definition, W, q, Name(W)));
        }
      }
    }
  }
}

TEST_P(Int4Int8RowDotsIsa, GemvRunsThemInTheFastFamilyAtAnyThreadCount) {
  const WeightMatrix W = testing::RandomInt4({Int4Scheme::kSymmetric, 64}, 37, 192, 3);
  const WeightMatrix odd = testing::RandomInt4({Int4Scheme::kSymmetric, 32}, 5, 40, 4);  // not whole blocks
  EXPECT_TRUE(W.format->has_int8(W));
  EXPECT_FALSE(odd.format->has_int8(odd));
  const std::vector<float> x = RandomVector(192, 9);
  testing::ExpectGemvFollowsTheFamily(W, x);
  std::vector<float> exact(W.rows), y(W.rows);
  kernels::RowDotsOf(W, 0, W.rows, x.data(), exact.data());
  // A matrix marked exact_only (a model's LM head) runs the exact kernels in the fast family.
  WeightMatrix exact_only = W;
  exact_only.exact_only = true;
  {
    FamilyGuard guard(KernelFamily::kFast);
    kernels::Gemv(exact_only, x.data(), y.data());
    for (int r = 0; r < W.rows; ++r) ASSERT_TRUE(SameBits(y[r], exact[r])) << "exact_only, row " << r;
  }
  // Columns that are not whole blocks run the exact kernels in the fast family too.
  const std::vector<float> x40 = RandomVector(40, 4);
  std::vector<float> a(5), b(5);
  kernels::RowDotsOf(odd, 0, 5, x40.data(), a.data());
  FamilyGuard guard(KernelFamily::kFast);
  kernels::Gemv(odd, x40.data(), b.data());
  for (int r = 0; r < 5; ++r) EXPECT_TRUE(SameBits(a[r], b[r])) << r;
}

INSTANTIATE_TEST_SUITE_P(Variants, Int4Int8RowDotsIsa, ::testing::ValuesIn(plumb::testing::kIsasOfThisBuild),
                         [](const auto& p) { return std::string(kernels::IsaName(p.param)); });

}  // namespace
}  // namespace plumb
