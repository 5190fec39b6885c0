// The generation loop: greedy output equals the reference's, stop ids end it, the token limit holds,
// seeded sampling is reproducible, and a prompt that does not fit is refused before any work.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>
#include <vector>

#include "plumb/engine/generator.h"
#include "support/golden.h"

namespace plumb {
namespace {

class Generation : public ::testing::Test {
 protected:
  void SetUp() override {
    golden_ = std::make_unique<testing::GoldenFixture>(testing::FixtureDir("tiny-llama"));
    model_ = std::make_unique<Model>(Model::Load(golden_->dir()));
  }
  std::vector<int> Run(const GenerationOptions& options, GenerationStats* stats = nullptr) {
    ContiguousKvCache cache = model_->NewKvCache();
    std::vector<int> tokens;
    const GenerationStats s =
        Generate(*model_, cache, golden_->prompt_ids(), options, [&](int t) { tokens.push_back(t); });
    if (stats) *stats = s;
    return tokens;
  }
  std::unique_ptr<testing::GoldenFixture> golden_;
  std::unique_ptr<Model> model_;
};

TEST_F(Generation, GreedyEqualsTheReferenceContinuation) {
  GenerationOptions options;
  options.max_new_tokens = golden_->greedy_steps();
  GenerationStats stats;
  EXPECT_EQ(Run(options, &stats), golden_->Ids("greedy.ids"));
  EXPECT_EQ(stats.generated_tokens, golden_->greedy_steps());
  EXPECT_EQ(stats.decode_steps, golden_->greedy_steps() - 1);
  EXPECT_EQ(stats.prompt_tokens, static_cast<int>(golden_->prompt_ids().size()));
  EXPECT_EQ(stats.stop_reason, StopReason::kMaxTokens);
}

TEST(StopReason, PrintsTheNamesTheCliShows) {
  // `plumb generate` prints these after the counts; a script may read them, so they are fixed here.
  EXPECT_EQ(StopReasonName(StopReason::kStopToken), "stop id");
  EXPECT_EQ(StopReasonName(StopReason::kMaxTokens), "max tokens");
  EXPECT_EQ(StopReasonName(StopReason::kContextFull), "context full");
  EXPECT_EQ(StopReasonName(StopReason::kAborted), "aborted");
  EXPECT_EQ(StopReasonName(StopReason::kNone), "none");
}

TEST_F(Generation, StopsRightAfterEmittingAStopId) {
  const std::vector<int> expected = golden_->Ids("greedy.ids");
  GenerationOptions options;
  options.max_new_tokens = 16;
  options.stop_ids = {expected[4]};
  GenerationStats stats;
  const std::vector<int> tokens = Run(options, &stats);
  const std::vector<int> until_stop(expected.begin(),
                                    std::find(expected.begin(), expected.end(), expected[4]) + 1);
  EXPECT_EQ(tokens, until_stop);
  EXPECT_EQ(stats.stop_reason, StopReason::kStopToken);
}

TEST_F(Generation, SeededSamplingIsReproducibleAndSeedsDiffer) {
  GenerationOptions options;
  options.max_new_tokens = 12;
  options.sampling = {.temperature = 1.5f, .top_k = 50, .top_p = 0.95f, .min_p = 0.0f, .seed = 7};
  const std::vector<int> first = Run(options), again = Run(options);
  EXPECT_EQ(first, again);
  options.sampling.seed = 8;
  EXPECT_NE(Run(options), first);
}

// A prompt longer than prefill_chunk runs as several Prefills, each continuing the cache: the same cache
// length, the same greedy continuation, and the last position's logits those of one whole Prefill within
// FP32 rounding (the chunks' GEMMs have fewer rows, which may change a dot's summation blocking, not its
// math).
TEST_F(Generation, AChunkedPrefillIsTheWholePromptsPrefill) {
  const std::vector<int>& prompt = golden_->prompt_ids();  // 11 tokens
  for (int chunk : {1, 3, 4, 10, 11}) {
    SCOPED_TRACE("prefill_chunk " + std::to_string(chunk));
    GenerationOptions whole, chunked;
    whole.prefill_chunk = 0;
    chunked.prefill_chunk = chunk;
    ContiguousKvCache a = model_->NewKvCache(), b = model_->NewKvCache();
    const std::vector<float> expected = RunPrompt(*model_, a, prompt, whole);
    const std::vector<float> actual = RunPrompt(*model_, b, prompt, chunked);
    EXPECT_EQ(a.length(), static_cast<int>(prompt.size()));
    EXPECT_EQ(b.length(), static_cast<int>(prompt.size()));
    ASSERT_EQ(actual.size(), expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      ASSERT_NEAR(actual[i], expected[i], 1e-5f * (1.0f + std::abs(expected[i]))) << "logit " << i;
    }
    chunked.max_new_tokens = golden_->greedy_steps();
    EXPECT_EQ(Run(chunked), golden_->Ids("greedy.ids"));
  }
}

// plumb chat's Ctrl-C: a flag set while a token is handed out stops the generation right after that token,
// before another Decode, so the reply holds exactly the tokens seen so far and the cache all but the last.
TEST_F(Generation, AnInterruptStopsRightAfterTheTokenThatSetIt) {
  const std::vector<int> expected = golden_->Ids("greedy.ids");
  const int prompt = static_cast<int>(golden_->prompt_ids().size());
  for (const std::size_t k : {1u, 2u, 5u, 15u}) {
    SCOPED_TRACE("interrupted at token " + std::to_string(k));
    std::atomic<bool> interrupt{false};
    GenerationOptions options;
    options.max_new_tokens = golden_->greedy_steps();  // 16: every k above is before the limit
    options.interrupt = &interrupt;
    ContiguousKvCache cache = model_->NewKvCache();
    std::vector<int> tokens;
    const GenerationStats stats = Generate(*model_, cache, golden_->prompt_ids(), options, [&](int t) {
      tokens.push_back(t);
      if (tokens.size() == k) interrupt = true;
    });
    EXPECT_EQ(tokens, std::vector<int>(expected.begin(), expected.begin() + k));
    EXPECT_EQ(stats.generated_tokens, static_cast<int>(k));
    EXPECT_EQ(stats.decode_steps, static_cast<int>(k) - 1);
    EXPECT_EQ(stats.stop_reason, StopReason::kAborted);
    EXPECT_EQ(cache.length(), prompt + static_cast<int>(k) - 1);
  }
}

TEST_F(Generation, AnInterruptAlreadySetStopsAfterTheFirstToken) {
  // Read once per token, after it is emitted: a reply always has its first token.
  const std::atomic<bool> interrupt{true};
  GenerationOptions options;
  options.max_new_tokens = 8;
  options.interrupt = &interrupt;
  GenerationStats stats;
  EXPECT_EQ(Run(options, &stats), std::vector<int>{golden_->Ids("greedy.ids")[0]});
  EXPECT_EQ(stats.stop_reason, StopReason::kAborted);
}

TEST_F(Generation, AnInterruptAtTheLastTokenOrAStopIdCutsNothing) {
  // The generation ended there anyway: the reason is the limit or the stop id, not an abort.
  const std::vector<int> expected = golden_->Ids("greedy.ids");
  std::atomic<bool> interrupt{false};
  std::size_t interrupt_at = 4;
  std::vector<int> tokens;
  const auto on_token = [&](int t) {
    tokens.push_back(t);
    if (tokens.size() == interrupt_at) interrupt = true;
  };
  GenerationOptions options;
  options.max_new_tokens = 4;
  options.interrupt = &interrupt;
  ContiguousKvCache cache = model_->NewKvCache();
  GenerationStats stats = Generate(*model_, cache, golden_->prompt_ids(), options, on_token);
  EXPECT_EQ(tokens, std::vector<int>(expected.begin(), expected.begin() + 4));
  EXPECT_EQ(stats.stop_reason, StopReason::kMaxTokens);

  // The first time the reference emits its fifth token, that token being a stop id.
  const auto stop = std::find(expected.begin(), expected.end(), expected[4]);
  interrupt = false;
  interrupt_at = static_cast<std::size_t>(stop - expected.begin()) + 1;
  tokens.clear();
  options.max_new_tokens = 16;
  options.stop_ids = {expected[4]};
  ContiguousKvCache again = model_->NewKvCache();
  stats = Generate(*model_, again, golden_->prompt_ids(), options, on_token);
  EXPECT_EQ(tokens, std::vector<int>(expected.begin(), stop + 1));
  EXPECT_EQ(stats.stop_reason, StopReason::kStopToken);
}

TEST_F(Generation, AnInterruptFlagNeverSetChangesNothing) {
  std::atomic<bool> interrupt{false};
  GenerationOptions plain;
  plain.max_new_tokens = golden_->greedy_steps();
  GenerationOptions watched = plain;
  watched.interrupt = &interrupt;
  GenerationStats plain_stats, watched_stats;
  const std::vector<int> tokens = Run(plain, &plain_stats);
  EXPECT_EQ(Run(watched, &watched_stats), tokens);
  EXPECT_EQ(tokens, golden_->Ids("greedy.ids"));
  EXPECT_EQ(watched_stats.generated_tokens, plain_stats.generated_tokens);
  EXPECT_EQ(watched_stats.stop_reason, StopReason::kMaxTokens);
  // Sampled, too: the flag takes nothing from the sampler's random stream.
  plain.sampling =
      watched.sampling = {.temperature = 1.5f, .top_k = 50, .top_p = 0.95f, .min_p = 0.0f, .seed = 3};
  EXPECT_EQ(Run(watched), Run(plain));
  EXPECT_FALSE(interrupt.load());
}

TEST_F(Generation, RefusesWhatDoesNotFit) {
  ContiguousKvCache cache = model_->NewKvCache(20);
  const std::vector<int>& prompt = golden_->prompt_ids();  // 11 tokens
  try {
    CheckGenerationFits(*model_, cache, prompt, 10);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds the context of 20"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(CheckGenerationFits(*model_, cache, prompt, 9));
  EXPECT_THROW(CheckGenerationFits(*model_, cache, std::vector<int>{}, 1), Error);
  EXPECT_THROW(CheckGenerationFits(*model_, cache, std::vector<int>{1, 320}, 1), Error);
  EXPECT_THROW(CheckGenerationFits(*model_, cache, prompt, 0), Error);
}

}  // namespace
}  // namespace plumb
