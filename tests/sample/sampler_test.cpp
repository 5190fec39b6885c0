// Tests for plumb::Sampler and plumb::CandidateDistribution (include/plumb/sample/sampler.h).
//
// Most filter tests use logits = log(p) for p = [0.5, 0.2, 0.15, 0.1, 0.05], so that at T = 1 the
// softmax gives back p and the expected kept sets can be worked out by hand.
#include "plumb/sample/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "plumb/core/error.h"

namespace plumb {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

const std::vector<double> kProbs = {0.5, 0.2, 0.15, 0.1, 0.05};

std::vector<float> LogitsOf(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) {
    logits.push_back(static_cast<float>(std::log(p)));
  }
  return logits;
}

SamplingParams Params(float temperature, int top_k = 0, float top_p = 1.0f, float min_p = 0.0f,
                      std::uint64_t seed = 0) {
  SamplingParams params;
  params.temperature = temperature;
  params.top_k = top_k;
  params.top_p = top_p;
  params.min_p = min_p;
  params.seed = seed;
  return params;
}

std::vector<int> TokensOf(const std::vector<Candidate>& candidates) {
  std::vector<int> tokens;
  for (const Candidate& c : candidates) {
    tokens.push_back(c.token);
  }
  return tokens;
}

// Tokens kept from kProbs under the given filters (T = 1).
std::vector<int> KeptTokens(int top_k, float top_p, float min_p) {
  return TokensOf(CandidateDistribution(LogitsOf(kProbs), Params(1.0f, top_k, top_p, min_p)));
}

// Checks that `candidates` holds exactly `tokens` (in that order) with probabilities proportional to
// kProbs[token], renormalised over the kept set.
void ExpectRenormalisedSubset(const std::vector<Candidate>& candidates, const std::vector<int>& tokens) {
  ASSERT_EQ(TokensOf(candidates), tokens);
  double kept = 0.0;
  for (int t : tokens) {
    kept += kProbs[t];
  }
  for (const Candidate& c : candidates) {
    EXPECT_NEAR(c.prob, kProbs[c.token] / kept, 1e-6) << "token " << c.token;
  }
}

// Runs fn, expects plumb::Error, and expects every one of `parts` in its message.
void ExpectErrorMentioning(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected plumb::Error";
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const std::string& part : parts) {
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
    }
  }
}

// --- greedy -----------------------------------------------------------------------------------------

TEST(SamplerGreedy, PicksArgmax) {
  const std::vector<float> logits = {0.1f, 3.0f, -2.0f, 2.9f, 2.99f};
  Sampler sampler(Params(0.0f));
  EXPECT_EQ(sampler.Sample(logits), 1);
}

TEST(SamplerGreedy, TiesGoToLowestTokenId) {
  const std::vector<float> logits = {1.0f, 5.0f, 2.0f, 5.0f, 5.0f};
  for (std::uint64_t seed : {0u, 1u, 99u}) {
    Sampler sampler(Params(0.0f, 0, 1.0f, 0.0f, seed));
    for (int i = 0; i < 10; ++i) {
      EXPECT_EQ(sampler.Sample(logits), 1);
    }
  }
}

TEST(SamplerGreedy, DistributionIsTheArgmaxAloneWhateverTheFilters) {
  const std::vector<float> logits = {1.0f, 5.0f, 2.0f, 5.0f, 5.0f};
  const std::vector<Candidate> candidates = CandidateDistribution(logits, Params(0.0f, 3, 0.5f, 0.1f));
  ASSERT_EQ(candidates.size(), 1u);
  EXPECT_EQ(candidates[0].token, 1);
  EXPECT_EQ(candidates[0].prob, 1.0f);
}

TEST(SamplerGreedy, SkipsMinusInfAndPrefersPlusInf) {
  Sampler sampler(Params(0.0f));
  EXPECT_EQ(sampler.Sample(std::vector<float>{-kInf, -kInf, -3.0f, -kInf}), 2);
  EXPECT_EQ(sampler.Sample(std::vector<float>{1e30f, kInf, 3e38f, kInf}), 1);
}

// --- seeds and the random stream --------------------------------------------------------------------

std::vector<int> Draws(std::uint64_t seed, int count) {
  const std::vector<float> flat(64, 0.0f);  // uniform over 64 tokens
  Sampler sampler(Params(1.0f, 0, 1.0f, 0.0f, seed));
  std::vector<int> draws;
  for (int i = 0; i < count; ++i) {
    draws.push_back(sampler.Sample(flat));
  }
  return draws;
}

TEST(SamplerSeed, SameSeedGivesSameSequence) {
  const std::vector<int> a = Draws(42, 200);
  const std::vector<int> b = Draws(42, 200);
  EXPECT_EQ(a, b);
  // And the sequence is not degenerate: 200 uniform draws over 64 tokens hit far more than 30 tokens.
  EXPECT_GT(std::set<int>(a.begin(), a.end()).size(), 30u);
}

TEST(SamplerSeed, DifferentSeedGivesDifferentSequence) {
  const std::vector<int> a = Draws(42, 200);
  const std::vector<int> b = Draws(43, 200);
  int differing = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    differing += a[i] != b[i] ? 1 : 0;
  }
  // Independent streams agree at a position with probability 1/64: expect ~197 differences.
  EXPECT_GT(differing, 150);
}

// Pins the documented stream: u = (mt19937_64() >> 11) * 2^-53, one per Sample(), then SampleWithUniform
// over CandidateDistribution. A GPU engine reproducing these draws relies on exactly this.
TEST(SamplerSeed, SampleIsSampleWithUniformOfTheDocumentedDraws) {
  const SamplingParams params = Params(0.8f, 4, 0.9f, 0.05f, 1234);
  const std::vector<float> logits = LogitsOf(kProbs);
  const std::vector<Candidate> candidates = CandidateDistribution(logits, params);
  Sampler sampler(params);
  std::mt19937_64 rng(1234);
  for (int i = 0; i < 200; ++i) {
    const double u = static_cast<double>(rng() >> 11) * 0x1p-53;
    EXPECT_EQ(sampler.Sample(logits), Sampler::SampleWithUniform(candidates, u)) << "draw " << i;
  }
}

// --- the filters, on p = [0.5, 0.2, 0.15, 0.1, 0.05] -----------------------------------------------

TEST(CandidateDistribution, NoFiltersKeepsEverythingWithSoftmaxProbs) {
  ExpectRenormalisedSubset(CandidateDistribution(LogitsOf(kProbs), Params(1.0f)), {0, 1, 2, 3, 4});
}

TEST(CandidateDistribution, TopKKeepsTheKMostProbable) {
  EXPECT_EQ(KeptTokens(1, 1.0f, 0.0f), (std::vector<int>{0}));
  EXPECT_EQ(KeptTokens(2, 1.0f, 0.0f), (std::vector<int>{0, 1}));
  EXPECT_EQ(KeptTokens(4, 1.0f, 0.0f), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(KeptTokens(5, 1.0f, 0.0f), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(KeptTokens(1000, 1.0f, 0.0f), (std::vector<int>{0, 1, 2, 3, 4}));  // k > V: all
  ExpectRenormalisedSubset(CandidateDistribution(LogitsOf(kProbs), Params(1.0f, 2)), {0, 1});
}

TEST(CandidateDistribution, TopPKeepsTheShortestPrefixReachingP) {
  // Cumulative mass: 0.5, 0.7, 0.85, 0.95, 1.0. A prefix that reaches top_p exactly counts.
  EXPECT_EQ(KeptTokens(0, 0.3f, 0.0f), (std::vector<int>{0}));
  EXPECT_EQ(KeptTokens(0, 0.5f, 0.0f), (std::vector<int>{0}));
  EXPECT_EQ(KeptTokens(0, 0.51f, 0.0f), (std::vector<int>{0, 1}));
  EXPECT_EQ(KeptTokens(0, 0.7f, 0.0f), (std::vector<int>{0, 1}));
  EXPECT_EQ(KeptTokens(0, 0.71f, 0.0f), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(KeptTokens(0, 0.95f, 0.0f), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(KeptTokens(0, 0.96f, 0.0f), (std::vector<int>{0, 1, 2, 3, 4}));
  ExpectRenormalisedSubset(CandidateDistribution(LogitsOf(kProbs), Params(1.0f, 0, 0.7f)), {0, 1});
}

TEST(CandidateDistribution, MinPKeepsTokensAtLeastMinPTimesTheMax) {
  // p / p_max = 1, 0.4, 0.3, 0.2, 0.1.
  EXPECT_EQ(KeptTokens(0, 1.0f, 0.25f), (std::vector<int>{0, 1, 2}));    // p >= 0.125
  EXPECT_EQ(KeptTokens(0, 1.0f, 0.2f), (std::vector<int>{0, 1, 2, 3}));  // p >= 0.1, inclusive
  EXPECT_EQ(KeptTokens(0, 1.0f, 0.31f), (std::vector<int>{0, 1}));
  EXPECT_EQ(KeptTokens(0, 1.0f, 0.05f), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(KeptTokens(0, 1.0f, 1.0f), (std::vector<int>{0}));  // only the max (and its ties)
  ExpectRenormalisedSubset(CandidateDistribution(LogitsOf(kProbs), Params(1.0f, 0, 1.0f, 0.25f)), {0, 1, 2});
}

TEST(CandidateDistribution, MinPOfOneKeepsAllTiesAtTheMax) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.0f, 2.0f};
  EXPECT_EQ(TokensOf(CandidateDistribution(logits, Params(1.0f, 0, 1.0f, 1.0f))), (std::vector<int>{1, 3}));
}

TEST(CandidateDistribution, TopKThenTopP) {
  // top_k 2 keeps {0, 1}; top_p 0.9 of that (0.714, 1.0) still needs both.
  ExpectRenormalisedSubset(CandidateDistribution(LogitsOf(kProbs), Params(1.0f, 2, 0.9f)), {0, 1});
}

TEST(CandidateDistribution, TopPMeasuresMassWithinTheTopKSurvivors) {
  // top_k 3 keeps {0.5, 0.2, 0.15}; renormalised cumulative 0.588, 0.824, 1: top_p 0.8 keeps 2 tokens.
  // (Against the unfiltered mass, 0.5, 0.7, 0.85, it would have kept 3.)
  ExpectRenormalisedSubset(CandidateDistribution(LogitsOf(kProbs), Params(1.0f, 3, 0.8f)), {0, 1});
  EXPECT_EQ(KeptTokens(0, 0.8f, 0.0f), (std::vector<int>{0, 1, 2}));
}

TEST(CandidateDistribution, TopPComesBeforeMinP) {
  // top_p 0.8 keeps {0, 1, 2} (cumulative 0.85); min_p 0.25 (p >= 0.125) keeps all three.
  // Had min-p run first, top-p over the renormalised {0.588, 0.235, 0.176} would keep only 2.
  ExpectRenormalisedSubset(CandidateDistribution(LogitsOf(kProbs), Params(1.0f, 0, 0.8f, 0.25f)), {0, 1, 2});
  // The final set is the shorter of the two: min_p 0.35 (p >= 0.175) cuts top_p 0.8's set to 2.
  ExpectRenormalisedSubset(CandidateDistribution(LogitsOf(kProbs), Params(1.0f, 0, 0.8f, 0.35f)), {0, 1});
}

TEST(CandidateDistribution, AllThreeFilters) {
  // top_k 4: {0.5, 0.2, 0.15, 0.1}, cumulative of the renormalised 0.526, 0.737, 0.895, 1.
  // top_p 0.9 -> all 4 survive; top_p 0.89 -> 3; then min_p 0.35 -> p >= 0.175 -> {0, 1}.
  EXPECT_EQ(KeptTokens(4, 0.9f, 0.0f), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(KeptTokens(4, 0.89f, 0.0f), (std::vector<int>{0, 1, 2}));
  ExpectRenormalisedSubset(CandidateDistribution(LogitsOf(kProbs), Params(1.0f, 4, 0.9f, 0.35f)), {0, 1});
}

TEST(CandidateDistribution, SortedByDescendingProbThenAscendingTokenId) {
  const std::vector<float> logits = {1.0f, 3.0f, 1.0f, 3.0f, 2.0f, -1.0f};
  EXPECT_EQ(TokensOf(CandidateDistribution(logits, Params(1.0f))), (std::vector<int>{1, 3, 4, 0, 2, 5}));
  // top_k cuts a tie by token id.
  EXPECT_EQ(TokensOf(CandidateDistribution(logits, Params(1.0f, 1))), (std::vector<int>{1}));
  EXPECT_EQ(TokensOf(CandidateDistribution(logits, Params(1.0f, 4))), (std::vector<int>{1, 3, 4, 0}));
}

// --- temperature ------------------------------------------------------------------------------------

// softmax(log(p) / T) is p^(1/T), renormalised.
std::vector<double> Tempered(double temperature) {
  std::vector<double> out;
  for (double p : kProbs) {
    out.push_back(std::pow(p, 1.0 / temperature));
  }
  const double sum = std::accumulate(out.begin(), out.end(), 0.0);
  for (double& q : out) {
    q /= sum;
  }
  return out;
}

TEST(CandidateDistribution, TemperatureReshapesAsPToTheOneOverT) {
  for (float temperature : {0.25f, 0.5f, 1.0f, 2.0f, 4.0f}) {
    const std::vector<Candidate> candidates = CandidateDistribution(LogitsOf(kProbs), Params(temperature));
    const std::vector<double> expected = Tempered(temperature);
    ASSERT_EQ(TokensOf(candidates), (std::vector<int>{0, 1, 2, 3, 4})) << "T=" << temperature;
    for (const Candidate& c : candidates) {
      EXPECT_NEAR(c.prob, expected[c.token], 1e-6) << "T=" << temperature << " token " << c.token;
    }
  }
}

TEST(CandidateDistribution, LowTemperatureSharpensHighTemperatureFlattens) {
  const std::vector<float> logits = LogitsOf(kProbs);
  // The top probability falls strictly as T grows.
  float previous_top = 1.1f;
  for (float temperature : {0.01f, 0.25f, 0.5f, 1.0f, 2.0f, 4.0f, 1e4f}) {
    const float top = CandidateDistribution(logits, Params(temperature))[0].prob;
    EXPECT_LT(top, previous_top) << "T=" << temperature;
    previous_top = top;
  }
  // T -> 0: all the mass on the argmax; T -> infinity: uniform.
  EXPECT_GT(CandidateDistribution(logits, Params(0.01f))[0].prob, 1.0f - 1e-6f);
  for (const Candidate& c : CandidateDistribution(logits, Params(1e4f))) {
    EXPECT_NEAR(c.prob, 0.2, 1e-3);
  }
  // The large-T limit is exactly uniform on a float32 level for astronomically large T.
  for (const Candidate& c : CandidateDistribution(logits, Params(1e30f))) {
    EXPECT_EQ(c.prob, 0.2f);
  }
}

TEST(CandidateDistribution, TemperatureAppliesBeforeTheFilters) {
  // At T = 0.5 the probabilities are 0.25, 0.04, 0.0225, 0.01, 0.0025 over 0.325: 0.769, 0.123, ...
  // top_p 0.8 keeps 2 (0.769 < 0.8 <= 0.892); at T = 1 it keeps 3.
  EXPECT_EQ(TokensOf(CandidateDistribution(LogitsOf(kProbs), Params(0.5f, 0, 0.8f))),
            (std::vector<int>{0, 1}));
  // min-p at T = 2 compares sqrt ratios: sqrt(0.1 / 0.5) = 0.447, so min_p 0.4 keeps token 3 too.
  EXPECT_EQ(TokensOf(CandidateDistribution(LogitsOf(kProbs), Params(2.0f, 0, 1.0f, 0.4f))),
            (std::vector<int>{0, 1, 2, 3}));
}

// --- numerics and special values --------------------------------------------------------------------

TEST(CandidateDistribution, LargeLogitsDoNotOverflow) {
  const std::vector<Candidate> candidates =
      CandidateDistribution(std::vector<float>{1000.0f, 999.0f}, Params(1.0f));
  ASSERT_EQ(candidates.size(), 2u);
  EXPECT_NEAR(candidates[0].prob, 1.0 / (1.0 + std::exp(-1.0)), 1e-7);
  EXPECT_NEAR(candidates[1].prob, 1.0 / (1.0 + std::exp(1.0)), 1e-7);
  // A spread beyond double's exp range: the small ones underflow to exactly 0 and are dropped.
  EXPECT_EQ(TokensOf(CandidateDistribution(std::vector<float>{-3e38f, 3e38f, 0.0f}, Params(1.0f))),
            (std::vector<int>{1}));
}

TEST(CandidateDistribution, MinusInfGetsProbabilityZeroAndIsDropped) {
  const std::vector<float> logits = {-kInf, std::log(0.75f), -kInf, std::log(0.25f)};
  const std::vector<Candidate> candidates = CandidateDistribution(logits, Params(1.0f));
  ASSERT_EQ(TokensOf(candidates), (std::vector<int>{1, 3}));
  EXPECT_NEAR(candidates[0].prob, 0.75, 1e-7);
  EXPECT_NEAR(candidates[1].prob, 0.25, 1e-7);
  // A -inf token is never drawn.
  Sampler sampler(Params(1.0f, 0, 1.0f, 0.0f, 5));
  for (int i = 0; i < 1000; ++i) {
    const int token = sampler.Sample(logits);
    ASSERT_TRUE(token == 1 || token == 3) << token;
  }
}

TEST(CandidateDistribution, PlusInfTokensShareAllTheMass) {
  const std::vector<Candidate> candidates =
      CandidateDistribution(std::vector<float>{3e38f, kInf, 0.0f, kInf, -kInf}, Params(0.7f));
  ASSERT_EQ(TokensOf(candidates), (std::vector<int>{1, 3}));
  EXPECT_EQ(candidates[0].prob, 0.5f);
  EXPECT_EQ(candidates[1].prob, 0.5f);
}

TEST(CandidateDistribution, AllMinusInfThrows) {
  ExpectErrorMentioning(
      [] {
        CandidateDistribution(std::vector<float>{-kInf, -kInf}, Params(1.0f));
      },
      {"-inf"});
  Sampler greedy(Params(0.0f));
  ExpectErrorMentioning([&] { greedy.Sample(std::vector<float>{-kInf, -kInf}); }, {"-inf"});
}

TEST(CandidateDistribution, EmptyLogitsThrow) {
  ExpectErrorMentioning([] { CandidateDistribution(std::vector<float>{}, Params(1.0f)); }, {"empty"});
  Sampler greedy(Params(0.0f));
  ExpectErrorMentioning([&] { greedy.Sample(std::vector<float>{}); }, {"empty"});
}

TEST(CandidateDistribution, NaNLogitsThrowNamingTheToken) {
  const std::vector<float> logits = {0.0f, 1.0f, kNaN, 2.0f};
  ExpectErrorMentioning([&] { CandidateDistribution(logits, Params(1.0f)); },
                        {"logits contain NaN at token 2"});
  ExpectErrorMentioning([&] { CandidateDistribution(logits, Params(0.0f)); },
                        {"logits contain NaN at token 2"});
  Sampler greedy(Params(0.0f));
  ExpectErrorMentioning([&] { greedy.Sample(logits); }, {"logits contain NaN at token 2"});
  Sampler sampled(Params(1.0f, 2));
  ExpectErrorMentioning([&] { sampled.Sample(logits); }, {"logits contain NaN at token 2"});
}

TEST(CandidateDistribution, RenormalisedProbabilitiesSumToOne) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(5000);
  for (float& l : logits) {
    l = normal(rng);
  }
  const std::vector<SamplingParams> cases = {Params(1.0f),
                                             Params(0.3f),
                                             Params(2.5f, 40),
                                             Params(1.0f, 0, 0.9f),
                                             Params(1.0f, 0, 1.0f, 0.1f),
                                             Params(0.7f, 100, 0.95f, 0.02f),
                                             Params(1.3f, 3000, 0.5f),
                                             Params(1.0f, 1)};
  for (const SamplingParams& params : cases) {
    const std::vector<Candidate> candidates = CandidateDistribution(logits, params);
    ASSERT_FALSE(candidates.empty());
    double sum = 0.0;
    for (const Candidate& c : candidates) {
      EXPECT_GT(c.prob, 0.0f);
      sum += c.prob;
    }
    EXPECT_NEAR(sum, 1.0, 1e-6) << "T=" << params.temperature << " k=" << params.top_k
                                << " p=" << params.top_p << " min_p=" << params.min_p;
  }
}

// A direct transcription of the documented definition (full sort, filters in order, renormalising
// after each) to compare the optimised implementation against.
std::vector<std::pair<int, double>> ReferenceDistribution(const std::vector<float>& logits,
                                                          const SamplingParams& params) {
  const double max = *std::max_element(logits.begin(), logits.end());
  std::vector<std::pair<int, double>> dist;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const double w = std::exp((logits[i] - max) / params.temperature);
    if (w > 0.0) {
      dist.emplace_back(static_cast<int>(i), w);
    }
  }
  std::sort(dist.begin(), dist.end(), [](const auto& a, const auto& b) {
    return a.second > b.second || (a.second == b.second && a.first < b.first);
  });
  const auto renormalise = [&dist] {
    double sum = 0.0;
    for (const auto& d : dist) {
      sum += d.second;
    }
    for (auto& d : dist) {
      d.second /= sum;
    }
  };
  renormalise();
  if (params.top_k > 0 && static_cast<std::size_t>(params.top_k) < dist.size()) {
    dist.resize(params.top_k);
    renormalise();
  }
  if (params.top_p < 1.0f) {
    double cumulative = 0.0;
    for (std::size_t i = 0; i < dist.size(); ++i) {
      cumulative += dist[i].second;
      if (cumulative >= params.top_p - kSamplingBoundaryTolerance) {
        dist.resize(i + 1);
        break;
      }
    }
    renormalise();
  }
  if (params.min_p > 0.0f) {
    const double threshold = (params.min_p - kSamplingBoundaryTolerance) * dist[0].second;
    std::erase_if(dist, [threshold](const auto& d) { return d.second < threshold; });
    renormalise();
  }
  return dist;
}

TEST(CandidateDistribution, AgreesWithTheReferenceDefinitionOnRandomCases) {
  std::mt19937 rng(2024);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::uniform_int_distribution<int> pick_k(0, 60);
  std::uniform_real_distribution<float> pick_unit(0.0f, 1.0f);
  for (int trial = 0; trial < 200; ++trial) {
    // Logits quantised to quarters so that ties are common; a few -inf.
    std::vector<float> logits(2000);
    for (float& l : logits) {
      l = std::round(normal(rng) * 4.0f) / 4.0f;
      if (pick_unit(rng) < 0.01f) {
        l = -kInf;
      }
    }
    const SamplingParams params = Params(0.2f + 2.0f * pick_unit(rng), trial % 3 == 0 ? 0 : pick_k(rng),
                                         trial % 4 == 0 ? 1.0f : 0.05f + 0.95f * pick_unit(rng),
                                         trial % 5 == 0 ? 0.0f : 0.3f * pick_unit(rng));
    const std::vector<Candidate> got = CandidateDistribution(logits, params);
    const std::vector<std::pair<int, double>> want = ReferenceDistribution(logits, params);
    ASSERT_EQ(got.size(), want.size()) << "trial " << trial;
    for (std::size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].token, want[i].first) << "trial " << trial << " rank " << i;
      ASSERT_NEAR(got[i].prob, want[i].second, 1e-6) << "trial " << trial << " rank " << i;
    }
  }
}

// --- SampleWithUniform ------------------------------------------------------------------------------

TEST(SampleWithUniform, PicksTheFirstCandidateWhoseCumulativeProbabilityExceedsU) {
  const std::vector<Candidate> candidates = {{7, 0.5f}, {3, 0.25f}, {9, 0.25f}};  // cumulative 0.5, 0.75, 1
  EXPECT_EQ(Sampler::SampleWithUniform(candidates, 0.0), 7);
  EXPECT_EQ(Sampler::SampleWithUniform(candidates, std::nextafter(0.5, 0.0)), 7);
  EXPECT_EQ(Sampler::SampleWithUniform(candidates, 0.5), 3);  // 0.5 does not exceed 0.5
  EXPECT_EQ(Sampler::SampleWithUniform(candidates, std::nextafter(0.75, 0.0)), 3);
  EXPECT_EQ(Sampler::SampleWithUniform(candidates, 0.75), 9);
  EXPECT_EQ(Sampler::SampleWithUniform(candidates, std::nextafter(1.0, 0.0)), 9);
}

TEST(SampleWithUniform, UJustBelowOneGivesTheLastKeptEvenIfTheTotalRoundsLow) {
  // The float probabilities sum to slightly less than 1.
  const std::vector<Candidate> candidates = {{4, 0.6f}, {2, 0.3f}, {8, 0.0999f}};
  EXPECT_EQ(Sampler::SampleWithUniform(candidates, std::nextafter(1.0, 0.0)), 8);
  EXPECT_EQ(Sampler::SampleWithUniform(candidates, 0.99995), 8);
  // A trailing zero-probability entry is never returned.
  const std::vector<Candidate> with_zero = {{4, 0.6f}, {2, 0.3f}, {8, 0.0999f}, {5, 0.0f}};
  EXPECT_EQ(Sampler::SampleWithUniform(with_zero, std::nextafter(1.0, 0.0)), 8);
}

TEST(SampleWithUniform, UJustBelowOneOnARealDistributionGivesTheLastKept) {
  const std::vector<Candidate> candidates = CandidateDistribution(LogitsOf(kProbs), Params(1.0f, 0, 0.9f));
  ASSERT_EQ(TokensOf(candidates), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(Sampler::SampleWithUniform(candidates, 0.0), 0);
  EXPECT_EQ(Sampler::SampleWithUniform(candidates, std::nextafter(1.0, 0.0)), 3);
}

TEST(SampleWithUniform, RejectsEmptyCandidatesAndUOutsideTheUnitInterval) {
  const std::vector<Candidate> candidates = {{0, 1.0f}};
  ExpectErrorMentioning([] { Sampler::SampleWithUniform({}, 0.5); }, {"empty"});
  ExpectErrorMentioning([&] { Sampler::SampleWithUniform(candidates, 1.0); }, {"[0, 1)", "1"});
  ExpectErrorMentioning([&] { Sampler::SampleWithUniform(candidates, -0.25); }, {"-0.25"});
  ExpectErrorMentioning([&] { Sampler::SampleWithUniform(candidates, std::nan("")); }, {"nan"});
}

// --- empirical frequencies --------------------------------------------------------------------------

// With a fixed seed these are deterministic; the bound says how far an honest sampler may stray: each
// count is Binomial(N, p), and we allow 4.5 standard deviations (a two-sided tail of ~7e-6 per token,
// so a fair sampler passes for practically any seed). At N = 200,000 that is a probability error of at
// most ~0.0045, tight enough to catch an off-by-one in the cumulative sum or a mis-scaled uniform.
void ExpectFrequenciesMatch(const std::vector<float>& logits, const SamplingParams& params,
                            const std::vector<double>& expected) {
  constexpr int kDraws = 200000;
  Sampler sampler(params);
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < kDraws; ++i) {
    ++counts[sampler.Sample(logits)];
  }
  for (std::size_t t = 0; t < logits.size(); ++t) {
    const double mean = kDraws * expected[t];
    const double sigma = std::sqrt(kDraws * expected[t] * (1.0 - expected[t]));
    EXPECT_LE(std::abs(counts[t] - mean), 4.5 * sigma)
        << "token " << t << ": " << counts[t] << " draws, expected " << mean << " +- " << sigma;
  }
}

TEST(SamplerEmpirical, FrequenciesMatchTheSoftmax) {
  ExpectFrequenciesMatch(LogitsOf(kProbs), Params(1.0f, 0, 1.0f, 0.0f, 12345), kProbs);
}

TEST(SamplerEmpirical, FrequenciesMatchTheFilteredTemperedDistribution) {
  // T = 0.5 then top_k 3: 0.25, 0.04, 0.0225 over 0.3125 -> 0.8, 0.128, 0.072; tokens 3 and 4 never.
  ExpectFrequenciesMatch(LogitsOf(kProbs), Params(0.5f, 3, 1.0f, 0.0f, 99), {0.8, 0.128, 0.072, 0.0, 0.0});
}

// --- parameter validation ---------------------------------------------------------------------------

TEST(SamplingParams, DefaultsAreValidAndGreedy) {
  const SamplingParams params;
  EXPECT_NO_THROW(ValidateSamplingParams(params));
  EXPECT_EQ(params.temperature, 0.0f);
  EXPECT_NO_THROW(ValidateSamplingParams(Params(1.0f, 5, 1.0f, 1.0f)));
  EXPECT_NO_THROW(ValidateSamplingParams(Params(1.0f, 0, 1e-6f, 0.0f)));
}

TEST(SamplingParams, InvalidValuesThrowNamingTheValue) {
  const auto expect_invalid = [](const SamplingParams& params, const std::vector<std::string>& parts) {
    ExpectErrorMentioning([&] { ValidateSamplingParams(params); }, parts);
    ExpectErrorMentioning([&] { Sampler sampler(params); }, parts);
    ExpectErrorMentioning([&] { CandidateDistribution(LogitsOf(kProbs), params); }, parts);
  };
  expect_invalid(Params(-0.5f), {"temperature", "-0.5"});
  expect_invalid(Params(kNaN), {"temperature", "nan"});
  expect_invalid(Params(kInf), {"temperature", "inf"});
  expect_invalid(Params(1.0f, -3), {"top_k", "-3"});
  expect_invalid(Params(1.0f, 0, 0.0f), {"top_p", "got 0"});
  expect_invalid(Params(1.0f, 0, 1.5f), {"top_p", "1.5"});
  expect_invalid(Params(1.0f, 0, -0.25f), {"top_p", "-0.25"});
  expect_invalid(Params(1.0f, 0, kNaN), {"top_p", "nan"});
  expect_invalid(Params(1.0f, 0, 1.0f, -0.125f), {"min_p", "-0.125"});
  expect_invalid(Params(1.0f, 0, 1.0f, 2.0f), {"min_p", "2"});
  expect_invalid(Params(1.0f, 0, 1.0f, kNaN), {"min_p", "nan"});
}

}  // namespace
}  // namespace plumb
