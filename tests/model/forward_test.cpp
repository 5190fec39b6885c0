// The two phases against each other: prefill of N tokens then decode of one ≡ prefill of N+1; a prompt
// prefilled in chunks ≡ prefilled at once; decode is bitwise the same for 1 and 2 threads; bad input throws
// and leaves the cache as it was.
//
// Prefill (OpenBLAS GEMM) and decode (plumb's GEMV) accumulate in different orders, so they agree only to
// FP32 rounding. The tolerance is the fixtures' own, 1e-5 in max_abs_err/max_abs_ref: each path alone is
// within it of the float64 reference (fixture_test), and here we check the paths against each other.
#include <gtest/gtest.h>

#include "plumb/kernels/kernels.h"
#include "plumb/model/model.h"
#include "support/golden.h"

namespace plumb {
namespace {

constexpr double kPhaseTolerance = 1e-5;

double RelativeError(std::span<const float> actual, std::span<const float> expected) {
  return testing::MaxAbsErrOverMaxAbsRef(actual, std::vector<double>(expected.begin(), expected.end()));
}

std::vector<float> CacheContents(const ContiguousKvCache& cache, int length) {
  std::vector<float> all;
  for (int l = 0; l < cache.n_layers(); ++l) {
    for (int h = 0; h < cache.n_kv_heads(); ++h) {
      for (int p = 0; p < length; ++p) {
        all.insert(all.end(), cache.Key(l, h, p), cache.Key(l, h, p) + cache.head_dim());
        all.insert(all.end(), cache.Value(l, h, p), cache.Value(l, h, p) + cache.head_dim());
      }
    }
  }
  return all;
}

class Phases : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    golden_ = std::make_unique<testing::GoldenFixture>(testing::FixtureDir(GetParam()));
    model_ = std::make_unique<Model>(Model::Load(golden_->dir()));
  }
  void TearDown() override { kernels::SetNumThreads(0); }
  std::unique_ptr<testing::GoldenFixture> golden_;
  std::unique_ptr<Model> model_;
};

TEST_P(Phases, PrefillThenDecodeEqualsLongerPrefill) {
  const std::vector<int>& prompt = golden_->prompt_ids();
  const std::span<const int> first(prompt.data(), prompt.size() - 1);

  ContiguousKvCache split = model_->NewKvCache();
  model_->Prefill(first, split);
  const std::span<const float> decoded = model_->Decode(prompt.back(), split);
  const std::vector<float> decoded_logits(decoded.begin(), decoded.end());

  ContiguousKvCache whole = model_->NewKvCache();
  const std::vector<float> prefilled = model_->Prefill(prompt, whole);

  ASSERT_EQ(split.length(), whole.length());
  EXPECT_LE(RelativeError(decoded_logits, prefilled), kPhaseTolerance);
  EXPECT_LE(RelativeError(CacheContents(split, split.length()), CacheContents(whole, whole.length())),
            kPhaseTolerance);
}

TEST_P(Phases, ChunkedPrefillEqualsOnePrefill) {
  const std::vector<int>& prompt = golden_->prompt_ids();
  ContiguousKvCache whole = model_->NewKvCache();
  const std::vector<float> all_rows = model_->Prefill(prompt, whole, PrefillLogits::kAllRows);

  // Chunks of 4, 1 and the rest: later chunks attend to the cached prefix and causally to themselves.
  ContiguousKvCache chunked = model_->NewKvCache();
  std::vector<float> chunk_rows;
  std::size_t done = 0;
  for (std::size_t size : {std::size_t{4}, std::size_t{1}, prompt.size() - 5}) {
    const std::vector<float> rows =
        model_->Prefill(std::span(prompt).subspan(done, size), chunked, PrefillLogits::kAllRows);
    chunk_rows.insert(chunk_rows.end(), rows.begin(), rows.end());
    done += size;
  }
  EXPECT_LE(RelativeError(chunk_rows, all_rows), kPhaseTolerance);
}

TEST_P(Phases, DecodeIsBitwiseIdenticalForOneAndTwoThreads) {
  const std::vector<int>& prompt = golden_->prompt_ids();
  kernels::SetNumThreads(1);
  ContiguousKvCache prefilled = model_->NewKvCache();
  model_->Prefill(prompt, prefilled);

  std::vector<std::vector<float>> logits_by_threads;
  for (int threads : {1, 2}) {
    kernels::SetNumThreads(threads);
    ContiguousKvCache cache = prefilled;  // the same starting cache for both
    std::vector<float> steps;
    int token = prompt.back();
    for (int i = 0; i < 6; ++i) {
      const std::span<const float> logits = model_->Decode(token, cache);
      steps.insert(steps.end(), logits.begin(), logits.end());
      token = static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    }
    logits_by_threads.push_back(steps);
  }
  ASSERT_EQ(logits_by_threads[0].size(), logits_by_threads[1].size());
  for (std::size_t i = 0; i < logits_by_threads[0].size(); ++i) {
    ASSERT_EQ(logits_by_threads[0][i], logits_by_threads[1][i]) << "logit " << i;
  }
}

TEST_P(Phases, OutOfVocabularyTokenThrowsAndLeavesTheCacheAlone) {
  const int vocab = model_->config().vocab_size;
  ContiguousKvCache cache = model_->NewKvCache();
  model_->Prefill(golden_->prompt_ids(), cache);
  const int length = cache.length();
  const std::vector<int> bad = {1, vocab};
  try {
    model_->Prefill(bad, cache);
    FAIL() << "expected plumb::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id " + std::to_string(vocab)), std::string::npos) << e.what();
  }
  EXPECT_THROW(model_->Decode(-1, cache), Error);
  EXPECT_THROW(model_->Decode(vocab + 5, cache), Error);
  EXPECT_EQ(cache.length(), length);
}

TEST_P(Phases, ContextOverflowThrowsAndLeavesTheCacheAlone) {
  const std::vector<int>& prompt = golden_->prompt_ids();
  ContiguousKvCache small = model_->NewKvCache(static_cast<int>(prompt.size()));
  model_->Prefill(prompt, small);  // exactly fills it
  try {
    model_->Decode(prompt[0], small);
    FAIL() << "expected plumb::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context overflow"), std::string::npos) << e.what();
  }
  EXPECT_EQ(small.length(), static_cast<int>(prompt.size()));
  ContiguousKvCache tiny = model_->NewKvCache(3);
  EXPECT_THROW(model_->Prefill(prompt, tiny), Error);
  EXPECT_EQ(tiny.length(), 0);
  EXPECT_THROW(model_->Prefill(std::span<const int>(), tiny), Error);
}

TEST_P(Phases, DecodeBytesCountEveryWeightOnceAndOneEmbeddingRow) {
  const ModelConfig& c = model_->config();
  const std::size_t d = c.hidden_size, q = c.QueryDim(), kv = c.KvDim(), ffn = c.intermediate_size;
  const std::size_t V = c.vocab_size, bias = c.attention_bias ? q + 2 * kv : 0;
  const std::size_t qk_norm = c.qk_norm ? 2 * c.head_dim : 0;
  // A MoE layer: the router, and E experts of 3·d·moe_ffn of which a token reads k.
  const std::size_t E = c.num_experts, k = c.experts_per_token, expert = 3 * d * c.moe_intermediate_size;
  const std::size_t mlp = c.IsMoe() ? E * d + E * expert : 3 * d * ffn;
  const std::size_t per_layer =
      2 * d + d * q + 2 * d * kv + q * d + mlp + bias + qk_norm;  // norms, Q, K+V, O, MLP
  const std::size_t all = c.num_layers * per_layer + d + V * d * (c.tie_word_embeddings ? 1 : 2);
  EXPECT_EQ(model_->weights().Bytes(), all * sizeof(float));
  // Untied: one embedding row instead of the table. Tied: the LM head reads the whole table anyway.
  std::size_t decode = c.tie_word_embeddings ? all : all - V * d + d;
  if (c.IsMoe()) decode -= c.num_layers * (E - k) * expert;
  EXPECT_EQ(model_->weights().BytesReadPerDecodeStep(c.experts_per_token), decode * sizeof(float));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Phases, ::testing::Values("tiny-llama", "tiny-qwen2", "tiny-qwen3moe"));

}  // namespace
}  // namespace plumb
