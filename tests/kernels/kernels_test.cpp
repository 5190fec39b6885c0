// Every kernel against a naive double-precision loop (tests/support/naive.h), on awkward shapes, and the
// threaded / BLAS variants against their scalar definitions. GEMV and GEMM also against Eigen in double.
//
// Tolerances come from floating-point error analysis, not from trial: an FP32 dot product of n terms, in
// any summation order (BLAS's, FMA or not), is within γ_n·Σ|a_i·b_i| of the exact value (Higham, Accuracy
// and Stability of Numerical Algorithms, §3.1), with γ_n = n·u/(1−n·u) and u = 2^-24.
#include <gtest/gtest.h>
#include <omp.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "plumb/kernels/blas_core.h"
#include "plumb/kernels/kernels.h"
#include "plumb/kernels/row_dot.h"
#include "plumb/kernels/scalar.h"
#include "support/isa_variants.h"
#include "support/kv_views.h"
#include "support/naive.h"

namespace plumb {
namespace {

using testing::Gamma;
using testing::kUnitRoundoff;
using testing::RandomVector;

MatrixF32 RandomMatrix(int rows, int cols, std::uint32_t seed) {
  return MatrixF32{rows, cols, RandomVector(static_cast<std::size_t>(rows) * cols, seed)};
}

class ThreadCount : public ::testing::Test {
 protected:
  void TearDown() override { kernels::SetNumThreads(0); }
};

// ---- GEMV ------------------------------------------------------------------------------------------
class GemvShapes : public ThreadCount, public ::testing::WithParamInterface<std::tuple<int, int>> {};

TEST_P(GemvShapes, MatchesNaiveDoubleAndEigenWithinDotProductBound) {
  const auto [n, k] = GetParam();
  const MatrixF32 W = RandomMatrix(n, k, 11u * n + k);
  const std::vector<float> x = RandomVector(k, 7u * k + 1);
  std::vector<float> y(n);
  kernels::Gemv(W, x.data(), y.data());

  std::vector<double> exact, abs_sum;
  testing::NaiveGemv(W.values, x.data(), n, k, exact, abs_sum);
  using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const RowMajor We = Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
                          W.values.data(), n, k)
                          .cast<double>();
  const Eigen::VectorXd eigen = We * Eigen::Map<const Eigen::VectorXf>(x.data(), k).cast<double>();
  for (int r = 0; r < n; ++r) {
    const double bound = Gamma(k) * abs_sum[r];
    EXPECT_NEAR(y[r], exact[r], bound) << "row " << r;
    EXPECT_NEAR(y[r], eigen[r], bound + 1e-12 * abs_sum[r]) << "row " << r << " vs Eigen";
  }
}

TEST_P(GemvShapes, ThreadedIsBitwiseTheScalarDefinitionForAnyThreadCount) {
  const auto [n, k] = GetParam();
  const MatrixF32 W = RandomMatrix(n, k, 3u * n + k);
  const std::vector<float> x = RandomVector(k, 5u * k);
  std::vector<float> reference(n);
  kernels::scalar::GemvRows(W.values.data(), x.data(), reference.data(), k, 0, n);
  for (int threads : {1, 2, 3, 7}) {
    kernels::SetNumThreads(threads);
    std::vector<float> y(n, std::numeric_limits<float>::quiet_NaN());
    kernels::Gemv(W, x.data(), y.data());
    for (int r = 0; r < n; ++r) ASSERT_EQ(y[r], reference[r]) << "threads " << threads << " row " << r;
  }
}

TEST_P(GemvShapes, EveryVariantIsBitwiseTheScalarDefinition) {
  // FP32 GEMV runs the vector RowDots where one is active; every variant must give GemvRows' bits, for a
  // MatrixF32 and for the same values as a WeightMatrix.
  const auto [n, k] = GetParam();
  const MatrixF32 W = RandomMatrix(n, k, 13u * n + k);
  const std::vector<float> x = RandomVector(k, 9u * k + 2);
  std::vector<float> reference(n);
  kernels::scalar::GemvRows(W.values.data(), x.data(), reference.data(), k, 0, n);
  const WeightMatrix stored = WeightMatrix::FromF32(W);
  const kernels::Isa previous = kernels::ActiveIsa();
  for (kernels::Isa isa : testing::kIsasOfThisBuild) {
    // Each CPU checks the variants it has; row_dot_test's PLUMB_REQUIRE_ISA lists the others as skipped.
    if (!kernels::IsaSupported(isa)) continue;
    kernels::SetIsa(isa);
    for (int threads : {1, 2}) {
      kernels::SetNumThreads(threads);
      std::vector<float> y(n, -1.0f), y_stored(n, -1.0f);
      kernels::Gemv(W, x.data(), y.data());
      kernels::Gemv(stored, x.data(), y_stored.data());
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(y[r], reference[r]) << kernels::IsaName(isa) << " threads " << threads << " row " << r;
        ASSERT_EQ(y_stored[r], reference[r]) << kernels::IsaName(isa) << " WeightMatrix, row " << r;
      }
    }
  }
  kernels::SetIsa(previous);
}

// Rows and columns off every vector width and block size, a single row, a single column.
INSTANTIATE_TEST_SUITE_P(Awkward, GemvShapes,
                         ::testing::Values(std::tuple{1, 1}, std::tuple{1, 67}, std::tuple{67, 1},
                                           std::tuple{3, 5}, std::tuple{17, 33}, std::tuple{64, 64},
                                           std::tuple{129, 257}, std::tuple{320, 64}));

// ---- GEMM (OpenBLAS) -------------------------------------------------------------------------------
class GemmShapes : public ThreadCount, public ::testing::WithParamInterface<std::tuple<int, int, int>> {};

TEST_P(GemmShapes, BlasMatchesScalarNaiveAndEigenWithinDotProductBound) {
  const auto [m, n, k] = GetParam();
  const MatrixF32 W = RandomMatrix(n, k, 13u * n + k);
  const std::vector<float> X = RandomVector(static_cast<std::size_t>(m) * k, 17u * m + k);
  std::vector<float> Y(static_cast<std::size_t>(m) * n), Y_scalar(Y.size());
  kernels::Gemm(X.data(), m, W, Y.data());
  kernels::scalar::Gemm(X.data(), W.values.data(), Y_scalar.data(), m, n, k);

  using RowMajorD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using RowMajorF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const RowMajorD eigen = Eigen::Map<const RowMajorF>(X.data(), m, k).cast<double>() *
                          Eigen::Map<const RowMajorF>(W.values.data(), n, k).cast<double>().transpose();
  for (int i = 0; i < m; ++i) {
    std::vector<double> exact, abs_sum;
    testing::NaiveGemv(W.values, X.data() + static_cast<std::size_t>(i) * k, n, k, exact, abs_sum);
    for (int j = 0; j < n; ++j) {
      const std::size_t at = static_cast<std::size_t>(i) * n + j;
      const double bound = Gamma(k) * abs_sum[j];
      EXPECT_NEAR(Y[at], exact[j], bound) << "(" << i << "," << j << ")";
      EXPECT_NEAR(Y_scalar[at], exact[j], bound) << "scalar (" << i << "," << j << ")";
      EXPECT_NEAR(Y[at], eigen(i, j), bound + 1e-12 * abs_sum[j]) << "vs Eigen (" << i << "," << j << ")";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Awkward, GemmShapes,
                         ::testing::Values(std::tuple{1, 1, 1}, std::tuple{1, 37, 29}, std::tuple{5, 1, 31},
                                           std::tuple{7, 33, 1}, std::tuple{11, 65, 96},
                                           std::tuple{64, 160, 64}, std::tuple{33, 129, 257}));

// ---- RMSNorm ---------------------------------------------------------------------------------------
TEST(RmsNorm, MatchesNaiveDoubleOnRowsOfAwkwardLength) {
  for (int n : {1, 3, 31, 64, 577}) {
    const int rows = 3;
    const std::vector<float> x = RandomVector(static_cast<std::size_t>(rows) * n, n, 2.0f);
    const std::vector<float> w = RandomVector(n, n + 1);
    std::vector<float> out(x.size());
    kernels::RmsNorm(x.data(), w.data(), out.data(), rows, n, 1e-5f);
    for (int r = 0; r < rows; ++r) {
      const std::vector<double> ref = testing::NaiveRmsNorm(x.data() + r * n, w.data(), n, 1e-5);
      // Sum of n squares (γ_n) plus division, sqrt and two multiplies (≈ 5u), relative to each element.
      for (int i = 0; i < n; ++i) {
        EXPECT_NEAR(out[r * n + i], ref[i], (Gamma(n) + 6 * kUnitRoundoff) * std::fabs(ref[i]) + 1e-30)
            << "n " << n << " row " << r << " i " << i;
      }
    }
  }
}

TEST(RmsNorm, ConstantVectorNormalisesToTheWeight) {
  const std::vector<float> x(8, -3.0f), w = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> out(8);
  kernels::RmsNorm(x.data(), w.data(), out.data(), 1, 8, 0.0f);
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(out[i], -w[i]);
}

// ---- RoPE ------------------------------------------------------------------------------------------
TEST(Rope, MatchesNaiveDoubleAtSmallAndLargePositions) {
  for (int head_dim : {2, 6, 16, 64}) {
    for (int pos : {0, 1, 7, 1000, 32767}) {
      const int n_heads = 3;
      std::vector<float> x = RandomVector(static_cast<std::size_t>(n_heads) * head_dim, head_dim + pos);
      const std::vector<float> original = x;
      kernels::RopeRotateHalf(x.data(), 1, n_heads, head_dim, pos, 10000.0f);
      for (int h = 0; h < n_heads; ++h) {
        const std::vector<double> ref =
            testing::NaiveRope(original.data() + h * head_dim, head_dim, pos, 10000.0);
        const int half = head_dim / 2;
        for (int i = 0; i < head_dim; ++i) {
          const int pair = i < half ? i + half : i - half;
          // cos and sin rounded to float (u each), two products and a sum (3u): 4u of |a| + |b|.
          const double bound =
              4 * kUnitRoundoff *
              (std::fabs(original[h * head_dim + i]) + std::fabs(original[h * head_dim + pair]));
          EXPECT_NEAR(x[h * head_dim + i], ref[i], bound)
              << "hd " << head_dim << " pos " << pos << " i " << i;
        }
      }
    }
  }
}

// RoPE scaling divides pair i's frequency by f_i: the angle is pos · theta^(−2i/hd) / f_i, checked against
// that formula in double for divisors of every kind (1, fractional, large), at long positions too; and
// divisors of 1 give the unscaled bits exactly.
TEST(Rope, FrequencyFactorsDivideEachPairsFrequency) {
  const int n_heads = 2, head_dim = 16, half = 8;
  const std::vector<float> factors = {1.0f, 1.0f, 1.5f, 2.75f, 4.0f, 8.0f, 8.0f, 32.0f};
  for (int pos : {0, 3, 100, 8191, 131071}) {
    std::vector<float> x = RandomVector(static_cast<std::size_t>(n_heads) * head_dim, pos + 5);
    const std::vector<float> original = x;
    kernels::scalar::RopeRotateHalf(x.data(), n_heads, head_dim, pos, 500000.0f, factors.data());
    for (int h = 0; h < n_heads; ++h) {
      const float* v = original.data() + h * head_dim;
      for (int i = 0; i < half; ++i) {
        const double angle = pos * std::pow(500000.0, -2.0 * i / head_dim) / factors[i];
        const double a = v[i], b = v[i + half];
        const double bound = 4 * kUnitRoundoff * (std::fabs(a) + std::fabs(b));
        EXPECT_NEAR(x[h * head_dim + i], a * std::cos(angle) - b * std::sin(angle), bound) << pos << " " << i;
        EXPECT_NEAR(x[h * head_dim + i + half], b * std::cos(angle) + a * std::sin(angle), bound) << pos;
      }
    }
    std::vector<float> ones(half, 1.0f), with_ones = original, without = original;
    kernels::scalar::RopeRotateHalf(with_ones.data(), n_heads, head_dim, pos, 500000.0f, ones.data());
    kernels::scalar::RopeRotateHalf(without.data(), n_heads, head_dim, pos, 500000.0f);
    EXPECT_EQ(with_ones, without);
  }
}

TEST(Rope, PositionZeroIsIdentityAndRowsUseConsecutivePositions) {
  const int n_heads = 2, head_dim = 8, rows = 4;
  std::vector<float> x = RandomVector(static_cast<std::size_t>(rows) * n_heads * head_dim, 99);
  std::vector<float> one_by_one = x;
  const std::vector<float> original = x;
  kernels::RopeRotateHalf(x.data(), rows, n_heads, head_dim, 5, 500.0f);
  for (int r = 0; r < rows; ++r) {
    kernels::scalar::RopeRotateHalf(one_by_one.data() + r * n_heads * head_dim, n_heads, head_dim, 5 + r,
                                    500.0f);
  }
  EXPECT_EQ(x, one_by_one);
  std::vector<float> at_zero = original;
  kernels::RopeRotateHalf(at_zero.data(), 1, n_heads, head_dim, 0, 500.0f);
  EXPECT_EQ(std::vector<float>(original.begin(), original.begin() + n_heads * head_dim),
            std::vector<float>(at_zero.begin(), at_zero.begin() + n_heads * head_dim));
}

// kernels::RopeRotateHalf keeps each position's cos and sin for later calls (a table of 1024 slots per
// calling thread): rows must still be the definition's bits when the table is reused, when a position
// replaces another in its slot, when a call has more rows than slots, when theta or head_dim change, and when
// calls alternate between tables (a few are kept per thread, the least recently used replaced).
TEST(Rope, RemembersAnglesWithoutChangingABit) {
  struct Call {
    int rows, first_pos, head_dim;
    float theta;
    int factors = 0;  // 0: none; 1, 2: two sets of divisors; 3: set 1 again at another address
  };
  const Call calls[] = {{3, 7, 64, 10000.0f},
                        {3, 7, 64, 10000.0f},
                        {2, 7 + 1024, 64, 10000.0f},
                        {3, 7, 64, 10000.0f},
                        {1100, 0, 64, 10000.0f},
                        {5, 1020, 64, 10000.0f},
                        {4, 9, 18, 500000.0f},
                        {4, 9, 64, 500000.0f},
                        {4, 9, 64, 10000.0f},
                        // Gemma 3's two bases in turn, then more (head_dim, theta) pairs than tables kept
                        {2, 40, 256, 1e4f},
                        {2, 40, 256, 1e6f},
                        {2, 41, 256, 1e4f},
                        {2, 41, 256, 1e6f},
                        {3, 5, 32, 7.0f},
                        {3, 5, 32, 8.0f},
                        {3, 5, 32, 9.0f},
                        {2, 41, 256, 1e4f},
                        {2, 42, 256, 1e6f},
                        // the same (head_dim, theta) with and without RoPE scaling, and two scalings
                        {3, 7, 64, 10000.0f, 1},
                        {3, 7, 64, 10000.0f, 0},
                        {3, 7, 64, 10000.0f, 2},
                        {3, 7, 64, 10000.0f, 3},
                        {3, 8, 64, 10000.0f, 1}};
  // Divisor sets for head_dim 64: set 1 as Llama 3.1's shape (1, then smooth, then 8), set 2 all 4.
  std::vector<float> set1(32), set2(32, 4.0f);
  for (int i = 0; i < 32; ++i)
    set1[i] = i < 10 ? 1.0f : i < 20 ? 1.0f + 0.7f * static_cast<float>(i - 9) : 8.0f;
  for (const Call& c : calls) {
    const int n_heads = 3;
    std::vector<float> set1_copy = set1;  // a new address each call, the same values
    const float* factors = c.factors == 1   ? set1.data()
                           : c.factors == 2 ? set2.data()
                           : c.factors == 3 ? set1_copy.data()
                                            : nullptr;
    std::vector<float> x =
        RandomVector(static_cast<std::size_t>(c.rows) * n_heads * c.head_dim, c.rows + c.first_pos);
    std::vector<float> expected = x;
    for (int r = 0; r < c.rows; ++r) {
      kernels::scalar::RopeRotateHalf(expected.data() + static_cast<std::size_t>(r) * n_heads * c.head_dim,
                                      n_heads, c.head_dim, c.first_pos + r, c.theta, factors);
    }
    for (int threads : {1, 2}) {
      kernels::SetNumThreads(threads);
      std::vector<float> got = x;
      kernels::RopeRotateHalf(got.data(), c.rows, n_heads, c.head_dim, c.first_pos, c.theta, factors);
      EXPECT_EQ(got, expected) << c.rows << " rows from " << c.first_pos << ", head_dim " << c.head_dim
                               << ", factor set " << c.factors;
    }
  }
  kernels::SetNumThreads(0);
}

// ---- softmax and SwiGLU ----------------------------------------------------------------------------
TEST(Softmax, MatchesNaiveDoubleAndSumsToOne) {
  for (int n : {1, 2, 9, 100, 1031}) {
    std::vector<float> x = RandomVector(n, n, 4.0f);
    const std::vector<float> logits = x;
    const double max_logit = *std::max_element(logits.begin(), logits.end());
    const std::vector<double> ref = testing::NaiveSoftmax(x.data(), n);
    kernels::scalar::Softmax(x.data(), n);
    double sum = 0;
    for (int i = 0; i < n; ++i) {
      // Rounding a = x − max by u perturbs exp(a) by a relative |a|·u; exp itself, the n-term sum (γ_n),
      // the reciprocal and the final multiply add a few u.
      const double shift = std::fabs(logits[i] - max_logit);
      EXPECT_NEAR(x[i], ref[i], (Gamma(n) + (4 + shift) * kUnitRoundoff) * ref[i]) << "n " << n << " i " << i;
      sum += x[i];
    }
    EXPECT_NEAR(sum, 1.0, Gamma(n) + n * kUnitRoundoff);
  }
}

TEST(Softmax, LargeLogitsDoNotOverflow) {
  std::vector<float> x = {1000.0f, 999.0f, -1000.0f};
  kernels::scalar::Softmax(x.data(), 3);
  EXPECT_NEAR(x[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
  EXPECT_EQ(x[2], 0.0f);
}

TEST(SwiGlu, MatchesNaiveDouble) {
  for (int n : {1, 5, 4097, 9000}) {  // crosses the 4096-element threading chunk
    const std::vector<float> gate = RandomVector(n, n, 3.0f), up = RandomVector(n, n + 1);
    std::vector<float> out(n);
    kernels::SwiGlu(gate.data(), up.data(), out.data(), n);
    for (int i = 0; i < n; ++i) {
      const double ref = testing::NaiveSilu(gate[i]) * up[i];
      // exp is within a few ulps in glibc; then an add, a divide, a multiply: 8u relative is generous.
      EXPECT_NEAR(out[i], ref, 8 * kUnitRoundoff * std::fabs(ref) + 1e-37) << "n " << n << " i " << i;
    }
  }
}

// ---- attention -------------------------------------------------------------------------------------
struct AttentionCase {
  int n_heads, n_kv_heads, head_dim, rows, first_pos;
};

class AttentionShapes : public ThreadCount, public ::testing::WithParamInterface<AttentionCase> {};

TEST_P(AttentionShapes, CausalGqaMatchesNaiveDoubleAndIgnoresPositionsPastTheQuery) {
  const AttentionCase c = GetParam();
  const int max_positions = c.first_pos + c.rows + 5;  // spare positions, poisoned below
  const std::size_t cache_floats = static_cast<std::size_t>(c.n_kv_heads) * max_positions * c.head_dim;
  std::vector<float> keys = RandomVector(cache_floats, 1), values = RandomVector(cache_floats, 2);
  // Positions past the last query must never be read: NaN there would poison the result.
  const int used = c.first_pos + c.rows;
  for (int h = 0; h < c.n_kv_heads; ++h) {
    for (int p = used; p < max_positions; ++p) {
      for (int j = 0; j < c.head_dim; ++j) {
        const std::size_t at = (static_cast<std::size_t>(h) * max_positions + p) * c.head_dim + j;
        keys[at] = values[at] = std::numeric_limits<float>::quiet_NaN();
      }
    }
  }
  const std::size_t q_floats = static_cast<std::size_t>(c.rows) * c.n_heads * c.head_dim;
  const std::vector<float> q = RandomVector(q_floats, 3);

  std::vector<float> single_thread;
  for (int threads : {1, 2}) {
    kernels::SetNumThreads(threads);
    std::vector<float> out(q_floats);
    const KvLayerView view =
        testing::ContiguousF32View(keys.data(), values.data(), c.n_kv_heads, max_positions, c.head_dim, used);
    kernels::CausalAttention(q.data(), c.rows, c.first_pos, view, c.n_heads, out.data());
    const int group = c.n_heads / c.n_kv_heads;
    for (int r = 0; r < c.rows; ++r) {
      for (int h = 0; h < c.n_heads; ++h) {
        const std::size_t kv = static_cast<std::size_t>(h / group) * max_positions * c.head_dim;
        const std::size_t at = (static_cast<std::size_t>(r) * c.n_heads + h) * c.head_dim;
        const int n_ctx = c.first_pos + r + 1;
        const std::vector<double> ref =
            testing::NaiveAttention(q.data() + at, keys.data() + kv, values.data() + kv, c.head_dim, n_ctx);
        // Scores: γ_hd relative to |q|·|k| (inputs O(1)); softmax and the weighted sum of n_ctx values add
        // γ_n_ctx relative to max|v|. 4·(γ_hd·hd + γ_n_ctx + 8u) covers both with room for exp's few ulps.
        const double bound = 4 * (Gamma(c.head_dim) * c.head_dim + Gamma(n_ctx) + 8 * kUnitRoundoff) * 4.0;
        for (int j = 0; j < c.head_dim; ++j) {
          ASSERT_NEAR(out[at + j], ref[j], bound) << "row " << r << " head " << h << " j " << j;
        }
      }
    }
    if (threads == 1)
      single_thread = out;
    else
      EXPECT_EQ(out, single_thread) << "attention must not depend on the thread count";
  }
}

// GQA ratios 1, 3, 4 and 8; head dims off the vector width; prefill-like (many rows) and decode-like (one
// row).
INSTANTIATE_TEST_SUITE_P(Awkward, AttentionShapes,
                         ::testing::Values(AttentionCase{1, 1, 2, 1, 0}, AttentionCase{3, 3, 6, 5, 0},
                                           AttentionCase{6, 2, 10, 4, 3}, AttentionCase{8, 1, 16, 1, 40},
                                           AttentionCase{4, 1, 18, 7, 9}, AttentionCase{9, 3, 64, 3, 17}));

// The kernels prefill runs on are named as the library reports them (kernels/blas_core.h).
TEST(BlasCoreTest, DescribesTheLoadedLibrary) {
  const std::string text = kernels::BlasDescription();
  EXPECT_EQ(text.rfind("OpenBLAS ", 0), 0u) << text;
  EXPECT_NE(text.find(" kernels"), std::string::npos) << text;
}

}  // namespace
}  // namespace plumb
