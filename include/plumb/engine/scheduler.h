// Scheduler: continuous batching of many generation requests over one model and one paged KV cache.
//
// A request waits, is admitted (it gets a sequence in the PagedKvCache, sharing any cached prefix), has its
// prompt computed in chunks (chunked prefill), then decodes one token per step until a stop id, its token
// limit or the context ends. Every Step() runs one Model::Step over
//   - one token for each running request that is decoding, and
//   - prefill chunks of requests still computing their prompt, filling what is left of the step's token
//     budget (SchedulerOptions::max_step_tokens), oldest first,
// so requests join and leave between steps and a newcomer's prefill shares a step with the others' decodes.
//
// When the pool has no block for a step (PoolPolicy):
//   kPreemptNewest  the most recently admitted running request is preempted: its sequence is freed and it
//                   goes back to the front of the queue with prompt + generated tokens as its new prompt,
//                   to be recomputed when blocks are free again (vLLM's recompute preemption). Its sampler
//                   and its generated tokens are kept, so the output is the same as without preemption
//                   (bitwise with batch-invariant kernels).
//   kRefuseAdmission  a request is admitted only when the blocks it could ever need (prompt + max new
//                   tokens) are free beyond what the running requests could still take, so no running
//                   request ever lacks a block; the others wait.
// Either way no step ever writes into a block another sequence holds (the cache's copy-on-write), so one
// request's lack of memory never corrupts another's cache.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "plumb/engine/generator.h"
#include "plumb/engine/log_probs.h"
#include "plumb/engine/stop_reason.h"
#include "plumb/kv/paged_kv_cache.h"
#include "plumb/model/model.h"
#include "plumb/sample/sampler.h"

namespace plumb {

enum class PoolPolicy { kPreemptNewest, kRefuseAdmission };
// "preempt", "refuse"; Parse throws plumb::Error naming the value and the choices.
const char* PoolPolicyName(PoolPolicy policy);
PoolPolicy ParsePoolPolicy(const std::string& name);

struct SchedulerOptions {
  int max_running = 64;       // requests admitted at once (decoding or computing their prompt)
  int max_step_tokens = 512;  // tokens one step computes: one per decoding request, the rest prefill chunks
  PoolPolicy policy = PoolPolicy::kPreemptNewest;
  bool batch_invariant = false;  // Model::Step's StepOptions::batch_invariant (--deterministic)
};

using RequestId = std::int64_t;

// The log-probabilities a request wants recorded in its RequestStatus (engine/log_probs.h: the raw logits'
// log-softmax, before the sampling parameters or a constraint's mask change anything).
struct LogprobOptions {
  bool sampled = false;  // each sampled token's
  // Each prompt token's after the first (scored by the logits of the position before it). Every prompt
  // position is then computed, none taken from the prefix cache, and max_new_tokens may be 0 (score only).
  bool prompt = false;
  int top = 0;  // with each, the `top` most probable tokens of that position
};

enum class RequestState { kWaiting, kPrefilling, kDecoding, kFinished };

struct RequestStatus {
  RequestState state = RequestState::kWaiting;
  std::vector<int> prompt;
  std::vector<int> generated;                    // sampled tokens, in order
  StopReason finish_reason = StopReason::kNone;  // why, once finished
  int preemptions = 0;
  int cached_prompt_tokens = 0;  // prompt tokens found in the prefix cache at (the last) admission
  std::vector<PositionLogprobs> generated_logprobs;  // LogprobOptions::sampled: one per generated token
  std::vector<PositionLogprobs> prompt_logprobs;     // LogprobOptions::prompt: prompt[1..], as computed
};

struct StepReport {
  int decode_tokens = 0;                              // sequences that decoded one token
  int prefill_tokens = 0;                             // prompt tokens computed in chunks
  std::vector<std::pair<RequestId, int>> new_tokens;  // tokens sampled this step, request by request
  std::vector<RequestId> finished;
  std::vector<RequestId> preempted;
  std::vector<RequestId> admitted;
};

class Scheduler {
 public:
  // The cache's sequences must have the model's shape (layers, KV heads, head_dim); the cache must be empty
  // of sequences this scheduler does not own.
  Scheduler(Model& model, PagedKvCache& cache, SchedulerOptions options);

  // Queues a request. Throws plumb::Error, queuing nothing, for an empty prompt, an id outside the
  // vocabulary, a constraint that does not fit (CheckConstraintFits), max_new_tokens < 1 (< 0 with
  // logprobs.prompt), prompt + max_new_tokens beyond the cache's max_positions, or a request whose prompt +
  // max_new_tokens could not fit in the whole pool even alone.
  RequestId Add(std::vector<int> prompt, const GenerationOptions& options, LogprobOptions logprobs = {});
  // Ends a request now (waiting or running); its blocks are freed. Unknown or finished ids: plumb::Error.
  void Abort(RequestId id);
  // Drops a finished request's record (its Status), which the scheduler otherwise keeps for the caller to
  // read; a server that runs for days forgets each one once it has answered. Unknown or unfinished ids:
  // plumb::Error.
  void Forget(RequestId id);

  // One step (see the top of this file). Does nothing and returns an empty report when Idle().
  StepReport Step();
  bool Idle() const { return waiting_.empty() && running_.empty(); }

  const RequestStatus& Status(RequestId id) const;
  int running() const { return static_cast<int>(running_.size()); }
  int waiting() const { return static_cast<int>(waiting_.size()); }
  const PagedKvCache& cache() const { return cache_; }

 private:
  struct Entry {
    RequestStatus status;
    GenerationOptions options;
    Sampler sampler;
    std::optional<SeqId> seq;     // while admitted
    std::vector<int> to_compute;  // the tokens the sequence must hold before the next sample: prompt, or
                                  // prompt + generated after a preemption
    // Where the request is in options.constraint; kept through a preemption, like the sampler, since
    // the generated tokens are too.
    std::optional<TokenMatcher> matcher;
    LogprobOptions logprobs;
  };

  bool TryAdmit(RequestId id);
  bool ScoresPrompt(const Entry& e) const;
  void RecordPromptLogprobs(Entry& e, int first_position, std::span<const float> rows);
  void Preempt(RequestId id);
  void Finish(RequestId id, StopReason reason);
  int BlocksForPositions(int positions) const;
  int WorstCaseBlocksStillNeeded(RequestId id) const;

  Model& model_;
  PagedKvCache& cache_;
  SchedulerOptions options_;
  RequestId next_id_ = 0;
  std::map<RequestId, Entry> entries_;
  std::deque<RequestId> waiting_;   // admission order: front first
  std::vector<RequestId> running_;  // admission order: back is the newest
};

}  // namespace plumb
