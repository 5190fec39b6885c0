// Perplexity: the NLL arithmetic against closed forms, and the windowing (which positions are scored, from
// which context, with BOS substituted) against a direct computation from independent prefills.
#include "plumb/engine/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "plumb/core/error.h"
#include "support/golden.h"

namespace plumb {
namespace {

TEST(NllAccumulator, UniformLogitsGiveTheVocabularySize) {
  // Every token equally likely: NLL = log V exactly, so PPL = V and the spread (hence the error) is 0.
  NllAccumulator nll;
  const std::vector<float> logits(320, 1.5f);
  for (int target : {0, 17, 319}) nll.Add(logits, target);
  const PerplexityResult r = nll.Result();
  EXPECT_EQ(r.scored_tokens, 3);
  EXPECT_NEAR(r.mean_nll, std::log(320.0), 1e-12);
  EXPECT_NEAR(r.perplexity, 320.0, 1e-9);
  EXPECT_EQ(r.standard_error, 0.0);
}

TEST(NllAccumulator, MatchesTheDefinitionOnTwoTokens) {
  // Two rows of 3 logits; NLL_i = log Σ exp(l) − l[target], computed here in long double.
  const std::vector<std::vector<float>> rows = {{2.0f, -1.0f, 0.5f}, {0.0f, 3.0f, -2.0f}};
  const int targets[] = {2, 0};
  NllAccumulator nll;
  std::vector<long double> expected;
  for (int i = 0; i < 2; ++i) {
    nll.Add(rows[i], targets[i]);
    long double sum = 0;
    for (float l : rows[i]) sum += std::exp(static_cast<long double>(l));
    expected.push_back(std::log(sum) - rows[i][targets[i]]);
  }
  const long double mean = (expected[0] + expected[1]) / 2;
  const long double variance =
      ((expected[0] - mean) * (expected[0] - mean) + (expected[1] - mean) * (expected[1] - mean)) /
      2;  // population variance
  const PerplexityResult r = nll.Result();
  EXPECT_NEAR(r.mean_nll, static_cast<double>(mean), 1e-12);
  EXPECT_NEAR(r.perplexity, std::exp(static_cast<double>(mean)), 1e-12);
  // llama.cpp: PPL · sqrt(var / (N − 1)).
  EXPECT_NEAR(r.standard_error,
              std::exp(static_cast<double>(mean)) * std::sqrt(static_cast<double>(variance)), 1e-12);
}

TEST(NllAccumulator, ExtremeLogitsStayFinite) {
  NllAccumulator nll;
  std::vector<float> logits(8, -1e30f);
  logits[3] = 1e30f;
  nll.Add(logits, 3);  // certain and right: NLL 0
  EXPECT_EQ(nll.Result().mean_nll, 0.0);
  nll.Add(logits, 4);  // certain and wrong: NLL = 2e30, finite
  EXPECT_TRUE(std::isfinite(nll.Result().mean_nll));
}

// The windows of llama.cpp's definition, rebuilt here one by one from fresh prefills.
double DirectMeanNll(Model& model, const std::vector<int>& tokens, int n_ctx, int bos) {
  const int vocab = model.config().vocab_size;
  long double total = 0;
  long long count = 0;
  for (std::size_t start = 0; start + n_ctx <= tokens.size(); start += n_ctx) {
    std::vector<int> window(tokens.begin() + start, tokens.begin() + start + n_ctx);
    if (bos >= 0) window[0] = bos;
    ContiguousKvCache cache = model.NewKvCache(n_ctx);
    const std::vector<float> logits = model.Prefill(window, cache, PrefillLogits::kAllRows);
    for (int j = n_ctx / 2; j <= n_ctx - 2; ++j) {
      long double sum = 0;
      for (int v = 0; v < vocab; ++v) sum += std::exp(static_cast<long double>(logits[j * vocab + v]));
      total += std::log(sum) - logits[j * vocab + window[j + 1]];
      ++count;
    }
  }
  return static_cast<double>(total / count);
}

TEST(Perplexity, ScoresTheSecondHalfOfEachWindowFromAFreshCache) {
  Model model = Model::Load(testing::FixtureDir("tiny-llama"));
  std::vector<int> tokens(53);  // 6 windows of 8, 5 tokens left over and ignored
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int>((i * 37 + 11) % 320);
  for (int bos : {-1, 1}) {
    std::vector<int> seen;
    const PerplexityResult r =
        Perplexity(model, tokens, 8, bos, [&](int done, int total, const PerplexityResult&) {
          seen.push_back(done);
          EXPECT_EQ(total, 6);
        });
    EXPECT_EQ(seen, (std::vector<int>{1, 2, 3, 4, 5, 6}));
    EXPECT_EQ(r.windows, 6);
    EXPECT_EQ(r.scored_tokens, 6 * 3);  // positions 4, 5, 6 of each window predict 5, 6, 7
    EXPECT_NEAR(r.mean_nll, DirectMeanNll(model, tokens, 8, bos), 1e-9) << "bos " << bos;
    EXPECT_NEAR(r.perplexity, std::exp(r.mean_nll), 1e-9);
    EXPECT_GT(r.standard_error, 0.0);
  }
}

TEST(Perplexity, RefusesTooShortTextsAndBadContexts) {
  Model model = Model::Load(testing::FixtureDir("tiny-llama"));
  const std::vector<int> tokens(15, 5);
  auto message = [&](int n_ctx, std::vector<int> t) {
    try {
      Perplexity(model, t, n_ctx, -1, nullptr);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(8, tokens).find("has 15 tokens; perplexity with --ctx 8 needs at least 16"),
            std::string::npos);
  EXPECT_NE(message(2, tokens).find("at least 4"), std::string::npos);
  EXPECT_NE(message(256, std::vector<int>(600, 1)).find("exceeds the model's context length 128"),
            std::string::npos);
  std::vector<int> bad(16, 5);
  bad[9] = 320;
  EXPECT_NE(message(8, bad).find("token id 320 at index 9"), std::string::npos);
}

}  // namespace
}  // namespace plumb
