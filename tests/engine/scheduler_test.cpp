// Continuous batching: many requests through one paged cache give the tokens each gives alone (also when
// their prefills are chunked, when the pool forces preemption, and under either pool policy), requests
// join and leave between steps, and bad requests are refused before anything changes.
#include "plumb/engine/scheduler.h"

#include <gtest/gtest.h>

#include <map>

#include "plumb/kernels/kernels.h"
#include "support/errors.h"
#include "support/golden.h"

namespace plumb {
namespace {

class Scheduling : public ::testing::Test {
 protected:
  void SetUp() override {
    golden_ = std::make_unique<testing::GoldenFixture>(testing::FixtureDir("tiny-llama"));
    model_ = std::make_unique<Model>(Model::Load(golden_->dir()));
  }

  PagedKvConfig CacheConfig(int num_blocks, int block_size = 4) const {
    const ModelConfig& m = model_->config();
    PagedKvConfig c;
    c.n_layers = m.num_layers;
    c.n_kv_heads = m.num_kv_heads;
    c.head_dim = m.head_dim;
    c.block_size = block_size;
    c.num_blocks = num_blocks;
    c.max_positions = m.max_position_embeddings;
    return c;
  }

  // Prompts of different lengths, two of them sharing a 9-token prefix (more than two blocks of 4).
  std::vector<std::vector<int>> Prompts() const {
    const std::vector<int> base = golden_->prompt_ids();
    std::vector<std::vector<int>> prompts = {
        base, {5, 17, 42}, {7}, base, {9, 8, 7, 6, 5, 4, 3, 2, 1, 11, 12}};
    prompts[3].push_back(33);  // same prefix as prompts[0], one token longer
    prompts.push_back({9, 8, 7, 6, 5, 4, 3, 2, 1, 40});
    return prompts;
  }

  static GenerationOptions Options(int max_new_tokens, float temperature = 0.0f, std::uint64_t seed = 0) {
    GenerationOptions o;
    o.max_new_tokens = max_new_tokens;
    o.sampling.temperature = temperature;
    o.sampling.seed = seed;
    return o;
  }

  // Each prompt alone: Generate over a contiguous cache (Prefill + Decode).
  std::vector<int> Alone(const std::vector<int>& prompt, const GenerationOptions& options) {
    ContiguousKvCache cache = model_->NewKvCache();
    std::vector<int> tokens;
    Generate(*model_, cache, prompt, options, [&](int t) { tokens.push_back(t); });
    return tokens;
  }

  // All prompts through one scheduler; the generated tokens of each, in order, and every step's report.
  std::vector<std::vector<int>> Batched(PagedKvCache& cache, const SchedulerOptions& so,
                                        const std::vector<GenerationOptions>& options,
                                        std::vector<StepReport>* reports = nullptr) {
    Scheduler scheduler(*model_, cache, so);
    const std::vector<std::vector<int>> prompts = Prompts();
    std::vector<RequestId> ids;
    for (std::size_t i = 0; i < prompts.size(); ++i) ids.push_back(scheduler.Add(prompts[i], options[i]));
    for (int steps = 0; !scheduler.Idle(); ++steps) {
      EXPECT_LT(steps, 1000) << "the scheduler does not make progress";
      if (steps >= 1000) break;
      StepReport r = scheduler.Step();
      if (reports) reports->push_back(std::move(r));
    }
    std::vector<std::vector<int>> out;
    for (RequestId id : ids) {
      EXPECT_EQ(scheduler.Status(id).state, RequestState::kFinished);
      out.push_back(scheduler.Status(id).generated);
    }
    return out;
  }

  std::vector<GenerationOptions> SameOptions(const GenerationOptions& o) const {
    return std::vector<GenerationOptions>(Prompts().size(), o);
  }

  std::unique_ptr<testing::GoldenFixture> golden_;
  std::unique_ptr<Model> model_;
};

TEST_F(Scheduling, BatchedGreedyGivesEachPromptsOwnTokens) {
  const GenerationOptions o = Options(12);
  std::vector<std::vector<int>> alone;
  for (const auto& p : Prompts()) alone.push_back(Alone(p, o));
  for (const bool invariant : {false, true}) {
    PagedKvCache cache(CacheConfig(256));
    SchedulerOptions so;
    so.batch_invariant = invariant;
    EXPECT_EQ(Batched(cache, so, SameOptions(o)), alone) << "batch_invariant " << invariant;
    EXPECT_EQ(cache.Usage().used_blocks, 0) << "finished requests still hold blocks";
  }
}

// Seeded sampling at a high temperature turns any difference in the logits into different tokens sooner
// or later; with batch-invariant kernels the batch changes no bit, so each request samples what it does
// alone, whatever else shares its steps and however its prompt is chunked.
TEST_F(Scheduling, BatchInvariantSamplingIsIndependentOfTheBatchAndTheChunking) {
  std::vector<GenerationOptions> options;
  for (std::size_t i = 0; i < Prompts().size(); ++i) options.push_back(Options(20, 1.5f, 100 + i));
  SchedulerOptions so;
  so.batch_invariant = true;
  std::vector<std::vector<int>> alone;
  for (std::size_t i = 0; i < Prompts().size(); ++i) {
    PagedKvCache cache(CacheConfig(256));
    Scheduler s(*model_, cache, so);
    const RequestId id = s.Add(Prompts()[i], options[i]);
    while (!s.Idle()) s.Step();
    alone.push_back(s.Status(id).generated);
  }
  for (const int step_tokens : {512, 5, 1}) {
    for (const int threads : {1, 2}) {
      kernels::SetNumThreads(threads);
      PagedKvCache cache(CacheConfig(256));
      so.max_step_tokens = step_tokens;
      EXPECT_EQ(Batched(cache, so, options), alone)
          << "step tokens " << step_tokens << ", threads " << threads;
    }
  }
  kernels::SetNumThreads(0);
}

TEST_F(Scheduling, ChunkedPrefillSharesStepsWithDecodes) {
  const GenerationOptions o = Options(8);
  PagedKvCache cache(CacheConfig(256));
  SchedulerOptions so;
  so.max_step_tokens = 4;
  std::vector<StepReport> reports;
  std::vector<std::vector<int>> alone;
  for (const auto& p : Prompts()) alone.push_back(Alone(p, o));
  EXPECT_EQ(Batched(cache, so, SameOptions(o), &reports), alone);
  bool mixed = false;
  for (const StepReport& r : reports) {
    EXPECT_LE(r.decode_tokens + r.prefill_tokens, 4);
    mixed = mixed || (r.decode_tokens > 0 && r.prefill_tokens > 0);
  }
  EXPECT_TRUE(mixed) << "no step ran a prefill chunk beside decodes";
}

TEST_F(Scheduling, AnExhaustedPoolPreemptsTheNewestAndRecomputesIt) {
  const GenerationOptions o = Options(24);
  std::vector<std::vector<int>> alone;
  for (const auto& p : Prompts()) alone.push_back(Alone(p, o));
  // 12 blocks of 4 positions: any request fits alone (at most 13 + 24 positions = 10 blocks), not all.
  PagedKvCache cache(CacheConfig(12));
  SchedulerOptions so;
  so.batch_invariant = true;
  std::vector<StepReport> reports;
  EXPECT_EQ(Batched(cache, so, SameOptions(o), &reports), alone);
  int preemptions = 0;
  for (const StepReport& r : reports) preemptions += static_cast<int>(r.preempted.size());
  EXPECT_GT(preemptions, 0) << "the pool was meant to run out";
}

TEST_F(Scheduling, TheRefusePolicyNeverPreempts) {
  const GenerationOptions o = Options(24);
  std::vector<std::vector<int>> alone;
  for (const auto& p : Prompts()) alone.push_back(Alone(p, o));
  PagedKvCache cache(CacheConfig(12));
  SchedulerOptions so;
  so.policy = PoolPolicy::kRefuseAdmission;
  std::vector<StepReport> reports;
  EXPECT_EQ(Batched(cache, so, SameOptions(o), &reports), alone);
  for (const StepReport& r : reports) EXPECT_TRUE(r.preempted.empty());
}

TEST_F(Scheduling, RequestsJoinBetweenStepsAndAbortFreesBlocks) {
  PagedKvCache cache(CacheConfig(64));
  Scheduler s(*model_, cache, SchedulerOptions{});
  const RequestId a = s.Add(Prompts()[0], Options(30));
  s.Step();
  s.Step();
  const RequestId b = s.Add(Prompts()[1], Options(5));
  const StepReport r = s.Step();
  EXPECT_EQ(r.admitted, std::vector<RequestId>{b});
  EXPECT_EQ(s.running(), 2);
  s.Abort(a);
  EXPECT_EQ(s.Status(a).state, RequestState::kFinished);
  EXPECT_EQ(s.Status(a).finish_reason, StopReason::kAborted);
  while (!s.Idle()) s.Step();
  EXPECT_EQ(s.Status(b).generated, Alone(Prompts()[1], Options(5)));
  EXPECT_EQ(cache.Usage().used_blocks, 0);
  EXPECT_THROW(s.Abort(a), Error);
  EXPECT_THROW(s.Status(99), Error);
}

TEST_F(Scheduling, ForgetDropsOnlyFinishedRequests) {
  PagedKvCache cache(CacheConfig(64));
  Scheduler s(*model_, cache, SchedulerOptions{});
  const RequestId a = s.Add(Prompts()[0], Options(3));
  EXPECT_THROW(s.Forget(a), Error);  // still running
  while (!s.Idle()) s.Step();
  s.Forget(a);
  EXPECT_THROW(s.Status(a), Error);
  EXPECT_THROW(s.Forget(a), Error);
}

TEST_F(Scheduling, APromptSeenBeforeIsFoundInThePrefixCache) {
  PagedKvCache cache(CacheConfig(64));
  Scheduler s(*model_, cache, SchedulerOptions{});
  const std::vector<int> prompt = Prompts()[4];  // 11 tokens: two full blocks of 4
  const RequestId first = s.Add(prompt, Options(2));
  while (!s.Idle()) s.Step();
  const RequestId again = s.Add(prompt, Options(2));
  while (!s.Idle()) s.Step();
  EXPECT_EQ(s.Status(first).cached_prompt_tokens, 0);
  EXPECT_EQ(s.Status(again).cached_prompt_tokens, 8);
  EXPECT_EQ(s.Status(again).generated, s.Status(first).generated);
}

TEST_F(Scheduling, BadRequestsAreRefusedBeforeAnythingChanges) {
  PagedKvCache cache(CacheConfig(8));
  Scheduler s(*model_, cache, SchedulerOptions{});
  testing::ExpectMessageHas(testing::ErrorOf([&] { s.Add({}, Options(4)); }), {"prompt is empty"});
  testing::ExpectMessageHas(testing::ErrorOf([&] { s.Add({1, 320}, Options(4)); }), {"token id 320"});
  testing::ExpectMessageHas(testing::ErrorOf([&] { s.Add({1}, Options(0)); }), {"at least 1"});
  testing::ExpectMessageHas(testing::ErrorOf([&] {
                              s.Add({1, 2}, Options(127));
                            }),
                            {"exceeds the context of 128"});
  testing::ExpectMessageHas(testing::ErrorOf([&] { s.Add({1, 2}, Options(40)); }), {"KV pool has only 8"});
  EXPECT_TRUE(s.Idle());
  testing::ExpectMessageHas(testing::ErrorOf([&] { ParsePoolPolicy("lru"); }), {"preempt or refuse"});
}

// Log-probabilities: a prompt's (computed whole, in chunks, even where the prefix cache holds its blocks) are
// those of one Prefill's rows; the sampled tokens' are of the rows they were sampled from, led by the greedy
// token; max_new_tokens 0 scores the prompt and generates nothing.
TEST_F(Scheduling, LogprobsAreTheLogSoftmaxOfTheRowsThatPredictedEachToken) {
  PagedKvCache cache(CacheConfig(64));
  SchedulerOptions options;
  options.max_step_tokens = 4;
  Scheduler s(*model_, cache, options);
  const std::vector<int> prompt = Prompts()[3];
  s.Add(Prompts()[0], Options(2));  // leaves the shared prefix in the prefix cache
  while (!s.Idle()) s.Step();
  const RequestId scored = s.Add(prompt, Options(3), LogprobOptions{true, true, 2});
  const RequestId only = s.Add(prompt, Options(0), LogprobOptions{false, true, 0});
  while (!s.Idle()) s.Step();

  ContiguousKvCache alone = model_->NewKvCache();
  const std::vector<float> rows = model_->Prefill(prompt, alone, PrefillLogits::kAllRows);
  const std::size_t vocab = static_cast<std::size_t>(model_->config().vocab_size);
  const RequestStatus& status = s.Status(scored);
  EXPECT_EQ(status.cached_prompt_tokens, 0);
  ASSERT_EQ(status.prompt_logprobs.size(), prompt.size() - 1);
  for (std::size_t p = 0; p + 1 < prompt.size(); ++p) {
    const PositionLogprobs want =
        ScorePosition(std::span<const float>(rows).subspan(p * vocab, vocab), prompt[p + 1], 2);
    EXPECT_EQ(status.prompt_logprobs[p].token, prompt[p + 1]);
    EXPECT_NEAR(status.prompt_logprobs[p].logprob, want.logprob, 1e-5) << p;
    ASSERT_EQ(status.prompt_logprobs[p].top.size(), 2u);
    EXPECT_EQ(status.prompt_logprobs[p].top[0].token, want.top[0].token) << p;
  }
  ASSERT_EQ(status.generated_logprobs.size(), status.generated.size());
  for (std::size_t i = 0; i < status.generated.size(); ++i) {
    EXPECT_EQ(status.generated_logprobs[i].token, status.generated[i]);
    EXPECT_EQ(status.generated_logprobs[i].top[0].token, status.generated[i]);  // greedy
    EXPECT_EQ(status.generated_logprobs[i].top[0].logprob, status.generated_logprobs[i].logprob);
    EXPECT_GE(status.generated_logprobs[i].top[0].logprob, status.generated_logprobs[i].top[1].logprob);
  }
  EXPECT_TRUE(s.Status(only).generated.empty());
  EXPECT_EQ(s.Status(only).finish_reason, StopReason::kMaxTokens);
  EXPECT_EQ(s.Status(only).prompt_logprobs.size(), prompt.size() - 1);
}

}  // namespace
}  // namespace plumb
