// The generation loop: greedy output equals the reference's, stop ids end it, the token limit holds,
// seeded sampling is reproducible, and a prompt that does not fit is refused before any work.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

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
