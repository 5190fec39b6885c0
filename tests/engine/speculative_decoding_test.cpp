// Speculative decoding end to end on the tiny Llama (vocabulary 320): the target is its FP32 file, the draft
// its Q4_0 file (the same model, quantized: a draft that is often but not always right).
//   - Greedy: the emitted tokens are bitwise those of Generate with the target alone, for every k, for the
//     model drafter, the n-gram drafter and a drafter that proposes garbage (the rule, not the draft,
//     decides).
//   - Sampling: the second token's distribution (the first one speculation decides) equals the target's
//     exact marginal Σ_t1 p(t1) p(t2 | t1), by a chi-square test at significance 1e-4. (It fails for the
//     classic bug of drawing a rejected position's token from p instead of the residual: 378 > 331.)
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "plumb/engine/speculative.h"
#include "support/golden.h"

namespace plumb {
namespace {

std::string TinyFile(const std::string& name) {
  return testing::FixtureDir("tiny-llama") + "/" + name;
}

class Speculative : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    target_ = new Model(Model::Load(TinyFile("model.f32.gguf")));
    draft_ = new Model(Model::Load(TinyFile("model.q4_0.gguf")));
  }
  static void TearDownTestSuite() {
    delete target_;
    delete draft_;
  }

  static std::vector<int> Alone(std::span<const int> prompt, const GenerationOptions& options) {
    ContiguousKvCache cache = target_->NewKvCache();
    std::vector<int> tokens;
    Generate(*target_, cache, prompt, options, [&](int t) { tokens.push_back(t); });
    return tokens;
  }
  static std::vector<int> Speculate(std::span<const int> prompt, Drafter& drafter, int k,
                                    const GenerationOptions& options, SpeculativeStats* stats = nullptr) {
    ContiguousKvCache cache = target_->NewKvCache();
    std::vector<int> tokens;
    const SpeculativeStats s = GenerateSpeculative(*target_, cache, prompt, drafter, k, options,
                                                   [&](int t) { tokens.push_back(t); });
    if (stats) *stats = s;
    // The cache holds every emitted token but the last (which the next step would run).
    EXPECT_EQ(cache.length(), static_cast<int>(prompt.size() + tokens.size()) - 1);
    return tokens;
  }

  static Model* target_;
  static Model* draft_;
};
Model* Speculative::target_ = nullptr;
Model* Speculative::draft_ = nullptr;

// Proposes tokens from its own generator: a drafter that is nearly always wrong.
class RandomDrafter final : public Drafter {
 public:
  void Propose(std::span<const int>, int k, std::vector<int>& tokens,
               std::vector<std::vector<Candidate>>& distributions) override {
    tokens.clear();
    distributions.clear();
    for (int i = 0; i < k; ++i) {
      tokens.push_back(static_cast<int>(rng_() % 320));
      distributions.push_back({Candidate{tokens.back(), 1.0f}});
    }
  }
  std::string Describe() const override { return "random"; }

 private:
  std::mt19937_64 rng_{7};
};

const std::vector<std::vector<int>> kPrompts = {{1, 17, 200, 5}, {1, 300, 300, 300, 4, 9, 300, 300}, {42}};

TEST_F(Speculative, GreedyTokensAreTheTargetsAloneForEveryDrafterAndK) {
  GenerationOptions options;
  options.max_new_tokens = 40;
  for (const std::vector<int>& prompt : kPrompts) {
    const std::vector<int> alone = Alone(prompt, options);
    for (int k : {1, 3, 6}) {
      ModelDrafter model_drafter(*draft_, "q4_0", options.sampling, 128);
      NgramDrafter ngram;
      RandomDrafter random;
      SpeculativeStats stats;
      EXPECT_EQ(Speculate(prompt, model_drafter, k, options, &stats), alone) << "model drafter, k = " << k;
      EXPECT_GT(stats.accepted, 0) << "the Q4_0 draft of the same model agrees with it sometimes";
      EXPECT_LT(stats.target_steps, options.max_new_tokens - 1) << "so the target steps fewer times";
      EXPECT_EQ(Speculate(prompt, ngram, k, options), alone) << "n-gram drafter, k = " << k;
      EXPECT_EQ(Speculate(prompt, random, k, options), alone) << "random drafter, k = " << k;
    }
  }
}

TEST_F(Speculative, StopsAtAStopIdInsideAnAcceptedRun) {
  GenerationOptions options;
  options.max_new_tokens = 40;
  const std::vector<int> alone = Alone(kPrompts[0], options);
  options.stop_ids = {alone[9]};
  const std::size_t first_stop = std::find(alone.begin(), alone.end(), alone[9]) - alone.begin();
  ModelDrafter drafter(*draft_, "q4_0", options.sampling, 128);
  SpeculativeStats stats;
  const std::vector<int> tokens = Speculate(kPrompts[0], drafter, 6, options, &stats);
  EXPECT_EQ(tokens, std::vector<int>(alone.begin(), alone.begin() + first_stop + 1));
  EXPECT_EQ(stats.generation.stop_reason, StopReason::kStopToken);
}

TEST_F(Speculative, NgramDrafterProposesWhatFollowedTheLastMatch) {
  NgramDrafter ngram(1, 3);
  std::vector<int> tokens;
  std::vector<std::vector<Candidate>> q;
  // "5 6 7" occurred twice; the most recent occurrence was followed by 9 8.
  ngram.Propose(std::vector<int>{5, 6, 7, 1, 5, 6, 7, 9, 8, 3, 6, 7}, 3, tokens, q);
  EXPECT_EQ(tokens, (std::vector<int>{9, 8, 3}));
  ASSERT_EQ(q.size(), 3u);
  EXPECT_EQ(q[0].size(), 1u);
  EXPECT_EQ(q[0][0].prob, 1.0f);
  ngram.Propose(std::vector<int>{1, 2, 3}, 3, tokens, q);  // no earlier occurrence of any suffix
  EXPECT_TRUE(tokens.empty());
  EXPECT_THROW(NgramDrafter(0, 2), Error);
}

TEST_F(Speculative, RefusesKBelowOne) {
  NgramDrafter ngram;
  GenerationOptions options;
  EXPECT_THROW(Speculate(kPrompts[0], ngram, 0, options), Error);
}

// The chi-square statistic's critical value at significance alpha for `df` degrees of freedom, by the
// Wilson–Hilferty approximation (relative error below 1e-3 from df = 10 on): z is the standard normal's
// upper alpha quantile (3.719 for alpha = 1e-4).
double ChiSquareCritical(int df, double z) {
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1 - a + z * std::sqrt(a), 3);
}

TEST_F(Speculative, SampledSecondTokenHasTheTargetsDistribution) {
  GenerationOptions options;
  options.sampling.temperature = 0.6f;  // sharper than the random model's near-uniform softmax
  options.max_new_tokens = 3;           // the first step after token 1 verifies one draft
  const std::vector<int> prompt = {1, 17};
  const int vocab = target_->config().vocab_size;

  // Exact: P(t2) = Σ_t1 p(t1 | prompt) p(t2 | prompt, t1), the probabilities as the sampler defines them.
  std::vector<double> exact(vocab, 0.0);
  ContiguousKvCache cache = target_->NewKvCache();
  const std::vector<float> first = target_->Prefill(prompt, cache);
  for (const Candidate& c1 : CandidateDistribution(first, options.sampling)) {
    cache.set_length(static_cast<int>(prompt.size()));
    const std::span<const float> second = target_->Decode(c1.token, cache);
    for (const Candidate& c2 : CandidateDistribution(second, options.sampling))
      exact[c2.token] += static_cast<double>(c1.prob) * c2.prob;
  }

  const int runs = 4000;
  std::vector<int> count(vocab, 0);
  SpeculativeStats total;
  for (int run = 0; run < runs; ++run) {
    options.sampling.seed = 1000 + run;
    // A hotter draft than the target: q differs from p enough that rejections, and so the residual
    // distribution, carry a fair share of the mass.
    SamplingParams draft_sampling = options.sampling;
    draft_sampling.temperature = 1.5f;
    ModelDrafter drafter(*draft_, "q4_0", draft_sampling, 16);
    SpeculativeStats stats;
    const std::vector<int> tokens = Speculate(prompt, drafter, 4, options, &stats);
    ++count[tokens[1]];
    total.drafted += stats.drafted;
    total.accepted += stats.accepted;
  }
  // Bins with an expected count below 5 pooled into one, as the test requires.
  double chi2 = 0, pooled_expected = 0, pooled_count = 0;
  int bins = 0;
  for (int t = 0; t < vocab; ++t) {
    const double expected = exact[t] * runs;
    if (expected < 5) {
      pooled_expected += expected;
      pooled_count += count[t];
      continue;
    }
    chi2 += (count[t] - expected) * (count[t] - expected) / expected;
    ++bins;
  }
  if (pooled_expected > 0) {
    chi2 += (pooled_count - pooled_expected) * (pooled_count - pooled_expected) / pooled_expected;
    ++bins;
  }
  ASSERT_GE(bins, 20) << "too few bins for the test to mean anything";
  const double critical = ChiSquareCritical(bins - 1, 3.719);
  EXPECT_LT(chi2, critical) << bins << " bins; significance 1e-4";
  // Both branches of the rule ran: some drafts accepted, some rejected.
  EXPECT_GT(total.accepted, total.drafted / 10);
  EXPECT_LT(total.accepted, total.drafted);
  std::cout << "chi-square " << chi2 << " < " << critical << " (" << bins - 1
            << " degrees of freedom, significance 1e-4); acceptance rate "
            << static_cast<double>(total.accepted) / total.drafted << "\n";
}

}  // namespace
}  // namespace plumb
