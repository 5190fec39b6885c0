// Tests for speculative decoding's verification rule (include/plumb/sample/speculative.h): hand-worked cases
// of each branch, greedy verification's exact equality with the target's greedy output, a chi-square test
// that the emitted tokens are distributed as the target's, and the expected-speedup formulas.
#include "plumb/sample/speculative.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "plumb/core/error.h"

namespace plumb {
namespace {

using Dist = std::vector<Candidate>;

DraftVerdict Verify(const std::vector<Dist>& target, const std::vector<Dist>& draft,
                    const std::vector<int>& draft_tokens, const std::vector<double>& uniforms) {
  return VerifyDraft(target, draft, draft_tokens, uniforms);
}

void ExpectDistribution(const Dist& actual, const Dist& expected, double tolerance = 0.0) {
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    EXPECT_EQ(actual[i].token, expected[i].token) << "candidate " << i;
    EXPECT_NEAR(actual[i].prob, expected[i].prob, tolerance) << "candidate " << i;
  }
}

// The Sampler's uniform draw: the top 53 bits of one output, scaled by 2^-53.
double Uniform(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1p-53;
}

// ---- hand-worked cases ----------------------------------------------------------------------------------

TEST(VerifyDraftTest, AcceptsAllAndDrawsTheBonusFromTheLastTarget) {
  // x_0 = 0: p/q = 0.6/0.5 > 1, accepted by any u. x_1 = 2: p/q = 0.5, u_1 = 0.3 < 0.5 accepts. Then the
  // bonus from p_2, sorted [5: 0.75, 4: 0.25]: u_2 = 0.5 falls in token 5's 0.75.
  const DraftVerdict v = Verify({{{0, 0.6f}, {1, 0.4f}}, {{2, 0.5f}, {3, 0.5f}}, {{4, 0.25f}, {5, 0.75f}}},
                                {{{0, 0.5f}, {1, 0.5f}}, {{2, 1.0f}}}, {0, 2}, {0.999, 0.3, 0.5});
  EXPECT_EQ(v.accepted, 2);
  EXPECT_EQ(v.tokens, (std::vector<int>{0, 2, 5}));
  ExpectDistribution(v.last_distribution, {{5, 0.75f}, {4, 0.25f}});
}

TEST(VerifyDraftTest, RejectsAtTheFirstAndCorrectsFromTheResidual) {
  // p/q = 0.2/0.9; u_0 = 0.5 rejects. Residual max(0, p − q) = {1: 0.7} -> {1: 1}. u_1 = 0.99 draws it.
  const DraftVerdict v =
      Verify({{{0, 0.2f}, {1, 0.8f}}, {{7, 1.0f}}}, {{{0, 0.9f}, {1, 0.1f}}}, {0}, {0.5, 0.99});
  EXPECT_EQ(v.accepted, 0);
  EXPECT_EQ(v.tokens, (std::vector<int>{1}));
  ExpectDistribution(v.last_distribution, {{1, 1.0f}});
}

TEST(VerifyDraftTest, RejectsInTheMiddleAndDrawsTheResidualWithTheLastUniform) {
  // Position 0 accepted (p = q). Position 1: x = 1, p/q = 0.3/0.6 = 0.5, u_1 = 0.7 rejects. Residual over
  // p_1 − q_1 = {0: 0.3, 1: −0.3, 2: 0.1, 3: −0.1} -> {0: 0.75, 2: 0.25}. The draw is u_3 (the last uniform),
  // not u_1 or u_2: u_3 = 0.8 is past 0.75, so token 2; u_2 = 0.1 would have given token 0.
  const Dist p0 = {{5, 0.5f}, {6, 0.5f}};
  const Dist p1 = {{0, 0.4f}, {1, 0.3f}, {2, 0.2f}, {3, 0.1f}};
  const Dist q1 = {{0, 0.1f}, {1, 0.6f}, {2, 0.1f}, {3, 0.2f}};
  const DraftVerdict v =
      Verify({p0, p1, {{9, 1.0f}}, {{9, 1.0f}}}, {p0, q1, {{9, 1.0f}}}, {6, 1, 9}, {0.9, 0.7, 0.1, 0.8});
  EXPECT_EQ(v.accepted, 1);
  EXPECT_EQ(v.tokens, (std::vector<int>{6, 2}));
  ExpectDistribution(v.last_distribution, {{0, 0.75f}, {2, 0.25f}}, 1e-7);
}

TEST(VerifyDraftTest, DraftTokenTheTargetGivesZeroIsAlwaysRejected) {
  // Token 3 is absent from p_0 (probability 0): u = 0 still rejects, since 0 · q < 0 is false.
  const DraftVerdict v =
      Verify({{{0, 0.5f}, {1, 0.5f}}, {{2, 1.0f}}}, {{{3, 0.7f}, {0, 0.3f}}}, {3}, {0.0, 0.25});
  EXPECT_EQ(v.accepted, 0);
  // Residual: p − q = {0: 0.2, 1: 0.5} -> {1: 5/7, 0: 2/7}; u_1 = 0.25 < 5/7 gives token 1.
  EXPECT_EQ(v.tokens, (std::vector<int>{1}));
  ExpectDistribution(v.last_distribution, {{1, 5.0f / 7}, {0, 2.0f / 7}}, 1e-7);
}

TEST(VerifyDraftTest, DraftEqualToTargetAcceptsWhateverTheUniforms) {
  std::mt19937_64 rng(11);
  const double largest = std::nextafter(1.0, 0.0);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<Dist> p(4);
    for (Dist& d : p) {
      double total = 0;
      std::vector<double> w(6);
      for (double& x : w) total += (x = Uniform(rng) + 1e-3);
      for (int t = 0; t < 6; ++t)
        d.push_back({t, static_cast<float>(w[static_cast<std::size_t>(t)] / total)});
    }
    const std::vector<Dist> q(p.begin(), p.end() - 1);
    const std::vector<int> x = {static_cast<int>(rng() % 6), static_cast<int>(rng() % 6),
                                static_cast<int>(rng() % 6)};
    const DraftVerdict v = Verify(p, q, x, {largest, largest, trial % 2 ? largest : 0.0, Uniform(rng)});
    EXPECT_EQ(v.accepted, 3) << "trial " << trial;
  }
}

TEST(VerifyDraftTest, PointMassDraftAcceptsWithTheTargetsProbability) {
  // An n-gram drafter: q = {x: 1}, so x is accepted iff u < p(x) (equality rejects: the test is strict).
  const Dist p0 = {{0, 0.25f}, {1, 0.5f}, {2, 0.25f}};
  const std::vector<Dist> q = {{{1, 1.0f}}};
  EXPECT_EQ(Verify({p0, {{4, 1.0f}}}, q, {1}, {std::nextafter(0.5, 0.0), 0.0}).tokens,
            (std::vector<int>{1, 4}));
  const DraftVerdict rejected = Verify({p0, {{4, 1.0f}}}, q, {1}, {0.5, 0.6});
  EXPECT_EQ(rejected.accepted, 0);
  // The residual is p without x, renormalised: {0: 0.5, 2: 0.5}; u_1 = 0.6 is past token 0's half.
  ExpectDistribution(rejected.last_distribution, {{0, 0.5f}, {2, 0.5f}});
  EXPECT_EQ(rejected.tokens, (std::vector<int>{2}));
}

TEST(VerifyDraftTest, GreedyAcceptsExactlyTheTargetsArgmaxAndCorrectsToIt) {
  const SamplingParams greedy;  // temperature 0
  const std::vector<std::vector<float>> logits = {{0, 3, 1, 2}, {5, 1, 1, 0}, {0, 0, 1, 4}, {2, 2, 0, 0}};
  std::vector<Dist> p;
  for (const auto& l : logits) p.push_back(CandidateDistribution(l, greedy));
  const Dist spread = {{0, 0.25f}, {1, 0.25f}, {2, 0.25f}, {3, 0.25f}};
  // Drafts 1 and 0 are the argmaxes, 2 is not (3 is): accepted 2, corrected to 3, whatever the uniforms.
  for (double u : {0.0, 0.5, std::nextafter(1.0, 0.0)}) {
    const DraftVerdict v = Verify(p, {spread, {{0, 1.0f}}, spread}, {1, 0, 2}, {u, u, u, u});
    EXPECT_EQ(v.accepted, 2);
    EXPECT_EQ(v.tokens, (std::vector<int>{1, 0, 3}));
    ExpectDistribution(v.last_distribution, {{3, 1.0f}});
  }
}

TEST(VerifyDraftTest, GreedyOutputEqualsTheTargetsGreedyOutputExactly) {
  // Random logits, drafts that match the argmax about half the time, random draft distributions and
  // uniforms: the emitted tokens are always the target's greedy tokens, as far as they go.
  std::mt19937_64 rng(5);
  const int vocab = 10, k = 5;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<Dist> p, q;
    std::vector<int> argmax, x;
    std::vector<double> u;
    for (int i = 0; i <= k; ++i) {
      std::vector<float> l(vocab);
      for (float& v : l) v = static_cast<float>(4 * Uniform(rng));
      p.push_back(CandidateDistribution(l, SamplingParams{}));
      argmax.push_back(p.back().front().token);
      u.push_back(Uniform(rng));
      if (i == k) break;
      q.push_back(CandidateDistribution(l, SamplingParams{.temperature = 1.0f}));  // any draft distribution
      x.push_back(rng() % 2 ? argmax.back() : static_cast<int>(rng() % vocab));
    }
    const DraftVerdict v = Verify(p, q, x, u);
    int expected_n = 0;
    while (expected_n < k &&
           x[static_cast<std::size_t>(expected_n)] == argmax[static_cast<std::size_t>(expected_n)])
      ++expected_n;
    ASSERT_EQ(v.accepted, expected_n) << "trial " << trial;
    EXPECT_EQ(v.tokens, std::vector<int>(argmax.begin(), argmax.begin() + expected_n + 1))
        << "trial " << trial;
  }
}

TEST(VerifyDraftTest, NoDraftTokensIsPlainSampling) {
  const Dist p = {{3, 0.1f}, {1, 0.6f}, {2, 0.3f}};  // unsorted on purpose
  for (double u : {0.0, 0.55, 0.65, 0.95}) {
    const DraftVerdict v = Verify({p}, {}, {}, {u});
    EXPECT_EQ(v.accepted, 0);
    ExpectDistribution(v.last_distribution, {{1, 0.6f}, {2, 0.3f}, {3, 0.1f}});
    EXPECT_EQ(v.tokens, (std::vector<int>{Sampler::SampleWithUniform(v.last_distribution, u)}));
  }
}

TEST(VerifyDraftTest, ResidualOfZeroMassFallsBackToTheTarget) {
  // q >= p everywhere (rounding could do that to nearly equal lists): a rejection leaves max(0, p − q) = 0.
  const DraftVerdict v =
      Verify({{{0, 0.5f}, {1, 0.5f}}, {{2, 1.0f}}}, {{{0, 0.6f}, {1, 0.6f}}}, {0}, {0.9, 0.7});
  EXPECT_EQ(v.accepted, 0);
  ExpectDistribution(v.last_distribution, {{0, 0.5f}, {1, 0.5f}});
  EXPECT_EQ(v.tokens, (std::vector<int>{1}));
}

TEST(VerifyDraftTest, BadInputGivesAClearError) {
  const Dist d = {{0, 1.0f}};
  const auto expect_error = [](const std::vector<Dist>& target, const std::vector<Dist>& draft,
                               const std::vector<int>& x, const std::vector<double>& u,
                               const std::string& needle) {
    try {
      Verify(target, draft, x, u);
      ADD_FAILURE() << "no error; expected one naming " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  expect_error({d, d}, {d, d}, {0}, {0.1, 0.1}, "2 draft distributions for 1 draft tokens");
  expect_error({d}, {d}, {0}, {0.1, 0.1}, "1 target distributions for 1 draft tokens");
  expect_error({d, d}, {d}, {0}, {0.1}, "1 uniforms for 1 draft tokens");
  expect_error({d, d}, {d}, {0}, {0.1, 1.0}, "uniform 1 must be in [0, 1), got 1");
  expect_error({d, d}, {d}, {0}, {-0.5, 0.1}, "uniform 0 must be in [0, 1)");
  expect_error({d, d}, {d}, {0}, {nan, 0.1}, "uniform 0 must be in [0, 1)");
  expect_error({d, {}}, {d}, {0}, {0.1, 0.1}, "target distribution 1 is empty");
  expect_error({d, d}, {{}}, {0}, {0.1, 0.1}, "draft distribution 0 is empty");
  expect_error({d, d}, {d}, {-2}, {0.1, 0.1}, "draft token 0 is -2");
  expect_error({d, {{-1, 1.0f}}}, {d}, {0}, {0.1, 0.1}, "target distribution 1 has a negative token id -1");
  expect_error({d, d}, {{{0, 0.5f}, {0, 0.5f}}}, {0}, {0.1, 0.1}, "draft distribution 0 lists token 0 twice");
  expect_error({{{0, -0.5f}, {1, 1.5f}}, d}, {d}, {0}, {0.1, 0.1},
               "target distribution 0 gives token 0 probability -0.5");
  expect_error({d, d}, {{{0, std::numeric_limits<float>::quiet_NaN()}}}, {0}, {0.1, 0.1}, "probability nan");
  expect_error({d, {{3, 0.0f}}}, {d}, {0}, {0.1, 0.1},
               "target distribution 1 has no token of positive probability");
}

// ---- the output distribution: a chi-square goodness-of-fit test
// --------------------------------------------

// The chi-square critical value for `df` degrees of freedom at upper-tail probability P, by Wilson and
// Hilferty's cube-root normal approximation: df·(1 − 2/(9df) + z·sqrt(2/(9df)))³, z the standard normal
// quantile of 1 − P. Within 2% of the exact value for df >= 5 at these tails (df 7, P 1e-4: 30.37 against
// the exact 29.88, so the test is slightly more lenient than stated, never stricter).
double ChiSquareCritical(int df, double z) {
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3);
}

// Σ (observed − expected)² / expected over the tokens p gives positive probability; tokens of probability
// 0 must never be observed (they add +inf).
double ChiSquare(const std::vector<std::int64_t>& observed, const Dist& p, std::int64_t total) {
  double chi2 = 0;
  for (const Candidate& c : p) {
    const double o = static_cast<double>(observed[static_cast<std::size_t>(c.token)]);
    if (c.prob == 0.0f) {
      if (o > 0) return std::numeric_limits<double>::infinity();
      continue;
    }
    const double e = static_cast<double>(total) * c.prob;
    chi2 += (o - e) * (o - e) / e;
  }
  return chi2;
}

// A dense distribution over `vocab` tokens with weights 0.2 + U[0, 1) and token `zero` at probability 0.
Dist RandomDist(std::mt19937_64& rng, int vocab, int zero) {
  std::vector<double> w(static_cast<std::size_t>(vocab));
  double total = 0;
  for (int t = 0; t < vocab; ++t)
    total += (w[static_cast<std::size_t>(t)] = t == zero ? 0.0 : 0.2 + Uniform(rng));
  Dist d;
  for (int t = 0; t < vocab; ++t)
    d.push_back({t, static_cast<float>(w[static_cast<std::size_t>(t)] / total)});
  return d;
}

// The theorem: whatever the draft, the token emitted at each position is distributed as the target's p_j
// there. Draft tokens drawn from q_i, uniforms as the Sampler draws them; for each position j, the runs
// that reached it (n >= j) must show tokens distributed as p_j. Significance 1e-4 per position (5 tests):
// critical chi-square 30.37 for df = 7 (8 tokens of positive probability; one of the 9 has p = 0, so the
// p(x) = 0 rejections happen too, and must never emit it). Also the acceptance rate at each position against
// Σ_x min(p(x), q(x)), and the mean tokens per step against 1 + α_0 + α_0·α_1 + ... (ExpectedTokensPerStep's
// sum with the positions' own rates).
TEST(VerifyDraftTest, EmittedTokensAreDistributedAsTheTargetAlone) {
  const int vocab = 9, k = 4, runs = 200000;
  const double z = 3.7190;  // the standard normal's quantile at 1 − 1e-4
  const double critical = ChiSquareCritical(vocab - 2, z);
  ASSERT_NEAR(critical, 30.37, 0.01);
  std::mt19937_64 rng(20230518);
  std::vector<Dist> p, q;
  for (int i = 0; i <= k; ++i) p.push_back(RandomDist(rng, vocab, (2 * i) % vocab));
  for (int i = 0; i < k; ++i) q.push_back(RandomDist(rng, vocab, (2 * i + 1) % vocab));

  std::vector<std::vector<std::int64_t>> counts(k + 1, std::vector<std::int64_t>(vocab, 0));
  std::vector<std::int64_t> reached(k + 1, 0), accepted_at(k, 0);
  std::int64_t emitted = 0;
  std::vector<int> x(k);
  std::vector<double> u(k + 1);
  for (int r = 0; r < runs; ++r) {
    for (int i = 0; i < k; ++i)
      x[static_cast<std::size_t>(i)] =
          Sampler::SampleWithUniform(q[static_cast<std::size_t>(i)], Uniform(rng));
    for (double& v : u) v = Uniform(rng);
    const DraftVerdict v = VerifyDraft(p, q, x, u);
    for (int j = 0; j <= v.accepted; ++j) {
      ++reached[static_cast<std::size_t>(j)];
      ++counts[static_cast<std::size_t>(j)][static_cast<std::size_t>(v.tokens[static_cast<std::size_t>(j)])];
      if (j < v.accepted) ++accepted_at[static_cast<std::size_t>(j)];
    }
    emitted += static_cast<std::int64_t>(v.tokens.size());
  }

  double expected_tokens = 0, reach = 1;
  for (int j = 0; j <= k; ++j) {
    const auto J = static_cast<std::size_t>(j);
    const double chi2 = ChiSquare(counts[J], p[J], reached[J]);
    EXPECT_LT(chi2, critical) << "position " << j << ", " << reached[J] << " runs reached it";
    if (j == 0) {
      // The test can tell: the same counts are far from the draft's own distribution.
      EXPECT_GT(ChiSquare(counts[0], q[0], reached[0]), 10 * critical);
    }
    expected_tokens += reach;
    if (j == k) break;
    double alpha = 0;  // Σ_x min(p(x), q(x))
    for (int t = 0; t < vocab; ++t)
      alpha +=
          std::min<double>(p[J][static_cast<std::size_t>(t)].prob, q[J][static_cast<std::size_t>(t)].prob);
    const double rate = static_cast<double>(accepted_at[J]) / static_cast<double>(reached[J]);
    const double sigma = std::sqrt(alpha * (1 - alpha) / static_cast<double>(reached[J]));
    EXPECT_NEAR(rate, alpha, z * sigma) << "position " << j;
    reach *= alpha;
  }
  // n + 1 is at most k + 1, so its standard deviation is below (k + 1) / 2.
  EXPECT_NEAR(static_cast<double>(emitted) / runs, expected_tokens, z * (k + 1) / 2 / std::sqrt(runs));
}

// ---- expected tokens per step and speedup -----------------------------------------------------------------

TEST(SpeculativeEstimateTest, TokensPerStepIsTheGeometricSum) {
  for (int k : {0, 1, 4, 7}) {
    EXPECT_DOUBLE_EQ(ExpectedTokensPerStep(0.0, k), 1.0);
    EXPECT_DOUBLE_EQ(ExpectedTokensPerStep(1.0, k), k + 1.0);
    for (double alpha : {0.3, 0.6, 0.8, 0.999999}) {
      EXPECT_NEAR(ExpectedTokensPerStep(alpha, k), (1 - std::pow(alpha, k + 1)) / (1 - alpha), 1e-9)
          << alpha << ", " << k;
    }
  }
}

TEST(SpeculativeEstimateTest, SpeedupDividesByTheStepsCost) {
  // Leviathan et al.'s improvement factor (1 − α^(k+1)) / ((1 − α)(k·c + 1)).
  const double alpha = 0.8, c = 0.05;
  const int k = 4;
  EXPECT_NEAR(ExpectedSpeedup(alpha, k, c), (1 - std::pow(alpha, k + 1)) / ((1 - alpha) * (k * c + 1)),
              1e-12);
  EXPECT_NEAR(ExpectedSpeedup(alpha, k, c, 1.5), ExpectedTokensPerStep(alpha, k) / (k * c + 1.5), 1e-12);
  EXPECT_DOUBLE_EQ(ExpectedSpeedup(alpha, 0, c), 1.0);  // no drafts: the target alone
  EXPECT_LT(ExpectedSpeedup(0.1, 4, 0.5), 1.0);         // a poor, costly draft slows decoding down
}

TEST(SpeculativeEstimateTest, BadArgumentsGiveAClearError) {
  EXPECT_THROW(ExpectedTokensPerStep(-0.1, 4), Error);
  EXPECT_THROW(ExpectedTokensPerStep(1.5, 4), Error);
  EXPECT_THROW(ExpectedTokensPerStep(std::nan(""), 4), Error);
  EXPECT_THROW(ExpectedTokensPerStep(0.5, -1), Error);
  EXPECT_THROW(ExpectedSpeedup(0.5, 4, -0.1), Error);
  EXPECT_THROW(ExpectedSpeedup(0.5, 4, 0.1, 0.0), Error);
  EXPECT_THROW(ExpectedSpeedup(0.5, 4, std::numeric_limits<double>::infinity()), Error);
}

}  // namespace
}  // namespace plumb
