// Perplexity: the NLL arithmetic against closed forms, and the windowing (which positions are scored, from
// which context, with BOS substituted) against a direct computation from independent prefills. KL divergence:
// the arithmetic against a long-double computation from the softmax, a model against itself (exactly 0), and
// quantized GGUF exports of the tiny model against its FP32 export, over the same windows.
#include "plumb/engine/perplexity.h"

#include <gtest/gtest.h>

#include <algorithm>
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

TEST(Perplexity, MaxWindowsEvaluatesOnlyTheFirstWindows) {
  Model model = Model::Load(testing::FixtureDir("tiny-llama"));
  std::vector<int> tokens(53);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int>((i * 37 + 11) % 320);
  const PerplexityResult two = Perplexity(model, tokens, 8, 1, nullptr, {.max_windows = 2});
  EXPECT_EQ(two.windows, 2);
  EXPECT_EQ(two.scored_tokens, 2 * 3);
  EXPECT_NEAR(two.mean_nll, DirectMeanNll(model, std::vector<int>(tokens.begin(), tokens.begin() + 16), 8, 1),
              1e-9);
  EXPECT_EQ(Perplexity(model, tokens, 8, 1, nullptr, {.max_windows = 100}).windows, 6);
  // Ids past the evaluated windows are not read, so not checked either.
  tokens[40] = 320;
  EXPECT_EQ(Perplexity(model, tokens, 8, 1, nullptr, {.max_windows = 3}).windows, 3);
}

// KL(P ‖ Q) of the softmaxes of two logit rows, in long double from the definition.
long double DirectKl(const std::vector<float>& base, const std::vector<float>& other) {
  long double sum_p = 0, sum_q = 0;
  for (float l : base) sum_p += std::exp(static_cast<long double>(l));
  for (float l : other) sum_q += std::exp(static_cast<long double>(l));
  long double kl = 0;
  for (std::size_t v = 0; v < base.size(); ++v) {
    const long double p = std::exp(static_cast<long double>(base[v])) / sum_p;
    const long double q = std::exp(static_cast<long double>(other[v])) / sum_q;
    kl += p * std::log(p / q);
  }
  return kl;
}

TEST(KlAccumulator, IdenticalRowsGiveExactlyZeroAndFullAgreement) {
  KlAccumulator kl;
  const std::vector<std::vector<float>> rows = {{2.0f, -1.0f, 0.5f, 7.25f}, {-30.0f, 0.0f, 30.0f, 1e-3f}};
  for (const std::vector<float>& row : rows) kl.Add(row, row);
  const KlDivergenceResult r = kl.Result();
  EXPECT_EQ(r.scored_tokens, 2);
  EXPECT_EQ(r.mean_kl, 0.0);
  EXPECT_EQ(r.kl_standard_error, 0.0);
  EXPECT_EQ(r.top1_agreement, 1.0);
  EXPECT_EQ(r.top1_standard_error, 0.0);
}

TEST(KlAccumulator, MatchesTheDefinitionOnSmallLogits) {
  // Three rows of 4 logits; the second pair ranks different tokens first, the others agree.
  const std::vector<std::vector<float>> base = {
      {2.0f, -1.0f, 0.5f, 0.0f}, {0.0f, 3.0f, -2.0f, 2.5f}, {1.0f, 1.0f, 1.0f, 4.0f}};
  const std::vector<std::vector<float>> other = {
      {1.5f, -0.5f, 0.5f, 0.25f}, {0.0f, 2.0f, -2.0f, 2.5f}, {1.0f, 1.0f, 1.0f, 4.0f}};
  KlAccumulator kl;
  std::vector<long double> expected;
  for (std::size_t i = 0; i < base.size(); ++i) {
    kl.Add(base[i], other[i]);
    expected.push_back(DirectKl(base[i], other[i]));
  }
  EXPECT_GT(expected[0], 0);
  EXPECT_GT(expected[1], 0);
  EXPECT_EQ(expected[2], 0);
  const long double mean = (expected[0] + expected[1] + expected[2]) / 3;
  long double variance = 0;  // population variance, as llama.cpp
  for (long double e : expected) variance += (e - mean) * (e - mean) / 3;
  const KlDivergenceResult r = kl.Result();
  EXPECT_EQ(r.scored_tokens, 3);
  EXPECT_NEAR(r.mean_kl, static_cast<double>(mean), 1e-12);
  EXPECT_NEAR(r.kl_standard_error, std::sqrt(static_cast<double>(variance) / 2), 1e-12);
  EXPECT_NEAR(r.top1_agreement, 2.0 / 3.0, 1e-15);
  EXPECT_NEAR(r.top1_standard_error, std::sqrt((2.0 / 3.0) * (1.0 / 3.0) / 2), 1e-15);
}

TEST(KlAccumulator, RefusesRowsOfDifferentLengths) {
  KlAccumulator kl;
  const std::vector<float> three(3, 0.0f), four(4, 0.0f);
  EXPECT_THROW(kl.Add(three, four), Error);
  EXPECT_THROW(kl.Add({}, {}), Error);
}

std::vector<int> TestTokens(std::size_t n) {
  std::vector<int> tokens(n);
  for (std::size_t i = 0; i < n; ++i) tokens[i] = static_cast<int>((i * 37 + 11) % 320);
  return tokens;
}

TEST(KlDivergence, AModelAgainstItselfIsExactlyZero) {
  Model model = Model::Load(testing::FixtureDir("tiny-llama"));
  Model same = Model::Load(testing::FixtureDir("tiny-llama"));
  const std::vector<int> tokens = TestTokens(53);
  std::vector<int> seen;
  const KlDivergenceResult r =
      KlDivergence(model, same, tokens, 8, 1, [&](int done, int total, const KlDivergenceResult& running) {
        seen.push_back(done);
        EXPECT_EQ(total, 6);
        EXPECT_EQ(running.scored_tokens, done * 3);
      });
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(r.scored_tokens, 6 * 3);
  EXPECT_EQ(r.mean_kl, 0.0);
  EXPECT_EQ(r.top1_agreement, 1.0);
  const PerplexityResult alone = Perplexity(model, tokens, 8, 1, nullptr);
  for (const PerplexityResult& p : {r.base, r.model}) {
    EXPECT_EQ(p.windows, 6);
    EXPECT_EQ(p.scored_tokens, alone.scored_tokens);
    EXPECT_EQ(p.mean_nll, alone.mean_nll);
    EXPECT_EQ(p.standard_error, alone.standard_error);
  }
}

// Mean KL and top-1 agreement over llama.cpp's windows, from independent prefills of both models.
std::pair<double, double> DirectKlAndAgreement(Model& base, Model& other, const std::vector<int>& tokens,
                                               int n_ctx, int bos) {
  const int vocab = base.config().vocab_size;
  long double total = 0;
  long long count = 0, agree = 0;
  for (std::size_t start = 0; start + n_ctx <= tokens.size(); start += n_ctx) {
    std::vector<int> window(tokens.begin() + start, tokens.begin() + start + n_ctx);
    if (bos >= 0) window[0] = bos;
    ContiguousKvCache base_cache = base.NewKvCache(n_ctx), other_cache = other.NewKvCache(n_ctx);
    const std::vector<float> p = base.Prefill(window, base_cache, PrefillLogits::kAllRows);
    const std::vector<float> q = other.Prefill(window, other_cache, PrefillLogits::kAllRows);
    for (int j = n_ctx / 2; j <= n_ctx - 2; ++j) {
      const std::vector<float> p_row(p.begin() + j * vocab, p.begin() + (j + 1) * vocab);
      const std::vector<float> q_row(q.begin() + j * vocab, q.begin() + (j + 1) * vocab);
      total += DirectKl(p_row, q_row);
      agree += std::max_element(p_row.begin(), p_row.end()) - p_row.begin() ==
               std::max_element(q_row.begin(), q_row.end()) - q_row.begin();
      ++count;
    }
  }
  return {static_cast<double>(total / count), static_cast<double>(agree) / count};
}

TEST(KlDivergence, QuantizedExportsOfTheTinyModelAgainstItsFp32Export) {
  // The same random-weight model exported to GGUF as F32 and as Q8_0 / Q4_0 / F16 blocks: each is a
  // perturbation of the F32 weights, so its next-token distributions differ from the F32 model's: KL > 0.
  // Which quantization gives the smaller KL is not asserted: Q8_0's per-weight error is ~16x smaller than
  // Q4_0's, but KL is not a monotone function of the weight error, so no ordering is guaranteed.
  const std::string dir = testing::FixtureDir("tiny-llama");
  Model base = Model::Load(dir + "/model.f32.gguf");
  const std::vector<int> tokens = TestTokens(64);
  for (const char* name : {"model.q8_0.gguf", "model.q4_0.gguf", "model.f16.gguf"}) {
    SCOPED_TRACE(name);
    Model quantized = Model::Load(dir + "/" + name);
    const KlDivergenceResult r = KlDivergence(base, quantized, tokens, 16, 1, nullptr);
    EXPECT_EQ(r.scored_tokens, 4 * 7);
    EXPECT_TRUE(std::isfinite(r.mean_kl));
    EXPECT_GT(r.mean_kl, 0.0);
    EXPECT_GT(r.kl_standard_error, 0.0);
    const auto [kl, agreement] = DirectKlAndAgreement(base, quantized, tokens, 16, 1);
    EXPECT_NEAR(r.mean_kl, kl, 1e-9 * kl + 1e-15);
    EXPECT_DOUBLE_EQ(r.top1_agreement, agreement);
    EXPECT_NEAR(r.base.mean_nll, DirectMeanNll(base, tokens, 16, 1), 1e-9);
    EXPECT_NEAR(r.model.mean_nll, DirectMeanNll(quantized, tokens, 16, 1), 1e-9);
  }
}

// The decode path (Decode token by token, what chat runs) gives every row's logits after the same tokens as
// one prefill: the same figures, to FP32 reordering (GEMV against GEMM; NLL agreeing to ~1e-6 relative).
TEST(Perplexity, TheDecodePathAgreesWithThePrefillPath) {
  Model model = Model::Load(testing::FixtureDir("tiny-llama") + "/model.q8_0.gguf");
  const std::vector<int> tokens = TestTokens(64);
  const PerplexityResult prefill = Perplexity(model, tokens, 16, 1, nullptr);
  const PerplexityResult decode = Perplexity(model, tokens, 16, 1, nullptr, {.path = LogitsPath::kDecode});
  EXPECT_EQ(decode.scored_tokens, prefill.scored_tokens);
  EXPECT_NEAR(decode.mean_nll, prefill.mean_nll, 1e-5 * prefill.mean_nll);
}

// One model file, the exact kernels as the base and the fast ones (int8 activations) as the model, both
// through the decode path: what the fast family costs. Its KL is above 0 (the fast kernels ran) and small;
// the exact family against itself is exactly 0; the caller's family is restored.
TEST(KlDivergence, TheFastFamilyAgainstTheExactOneOnOneModel) {
  const std::string path = testing::FixtureDir("tiny-llama") + "/model.q4_1.gguf";
  Model base = Model::Load(path);
  Model model = Model::Load(path);
  const std::vector<int> tokens = TestTokens(64);
  const kernels::KernelFamily before = kernels::ActiveFamily();
  PerplexityOptions options{.path = LogitsPath::kDecode,
                            .base_kernels = kernels::KernelFamily::kExact,
                            .model_kernels = kernels::KernelFamily::kFast};
  const KlDivergenceResult fast = KlDivergence(base, model, tokens, 16, 1, nullptr, options);
  EXPECT_EQ(kernels::ActiveFamily(), before);
  EXPECT_GT(fast.mean_kl, 0.0);
  EXPECT_LT(fast.mean_kl, 1e-3);
  EXPECT_NE(fast.model.mean_nll, fast.base.mean_nll);
  options.model_kernels = kernels::KernelFamily::kExact;
  const KlDivergenceResult exact = KlDivergence(base, model, tokens, 16, 1, nullptr, options);
  EXPECT_EQ(exact.mean_kl, 0.0);
  EXPECT_EQ(exact.model.mean_nll, exact.base.mean_nll);
}

TEST(KlDivergence, RefusesModelsOfDifferentVocabularies) {
  Model llama = Model::Load(testing::FixtureDir("tiny-llama"));  // 320 tokens
  Model qwen = Model::Load(testing::FixtureDir("tiny-qwen2"));   // 256 tokens
  const std::vector<int> tokens(64, 5);
  try {
    KlDivergence(llama, qwen, tokens, 16, -1, nullptr);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the base model has 320 tokens, the model 256"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace plumb
