#include "plumb/engine/scheduler.h"

#include <algorithm>

#include "plumb/core/error.h"

namespace plumb {

const char* PoolPolicyName(PoolPolicy policy) {
  return policy == PoolPolicy::kPreemptNewest ? "preempt" : "refuse";
}

PoolPolicy ParsePoolPolicy(const std::string& name) {
  if (name == "preempt") return PoolPolicy::kPreemptNewest;
  if (name == "refuse") return PoolPolicy::kRefuseAdmission;
  throw MakeError("unknown KV pool policy '", name, "' (choose preempt or refuse)");
}

Scheduler::Scheduler(Model& model, PagedKvCache& cache, SchedulerOptions options)
    : model_(model), cache_(cache), options_(options) {
  const ModelConfig& m = model.config();
  const PagedKvConfig& c = cache.config();
  if (c.n_layers != m.num_layers || c.n_kv_heads != m.num_kv_heads || c.head_dim != m.head_dim) {
    throw MakeError("scheduler: the KV cache's shape (", c.n_layers, " layers, ", c.n_kv_heads,
                    " KV heads, head_dim ", c.head_dim, ") does not match the model's (", m.num_layers, ", ",
                    m.num_kv_heads, ", ", m.head_dim, ")");
  }
  if (options.max_running < 1) throw MakeError("scheduler: max running requests must be at least 1");
  if (options.max_step_tokens < 1) throw MakeError("scheduler: max tokens per step must be at least 1");
}

int Scheduler::BlocksForPositions(int positions) const {
  const int bs = cache_.config().block_size;
  return (positions + bs - 1) / bs;
}

RequestId Scheduler::Add(std::vector<int> prompt, const GenerationOptions& options, LogprobOptions logprobs) {
  if (prompt.empty()) throw MakeError("request: the prompt is empty");
  CheckTokenIds(prompt, model_.config().vocab_size);
  if (options.max_new_tokens < (logprobs.prompt ? 0 : 1))
    throw MakeError("request: max new tokens must be at least 1 (0 only when scoring the prompt)");
  const long long needed = static_cast<long long>(prompt.size()) + options.max_new_tokens;
  if (needed > cache_.config().max_positions) {
    throw MakeError("request: prompt (", prompt.size(), " tokens) + max new tokens (", options.max_new_tokens,
                    ") = ", needed, " exceeds the context of ", cache_.config().max_positions, " positions");
  }
  if (BlocksForPositions(static_cast<int>(needed)) > cache_.config().num_blocks) {
    throw MakeError("request: ", needed, " positions need ", BlocksForPositions(static_cast<int>(needed)),
                    " blocks of ", cache_.config().block_size, " but the KV pool has only ",
                    cache_.config().num_blocks, "; raise the KV memory budget");
  }
  CheckConstraintFits(model_, options);
  const RequestId id = next_id_++;
  Entry entry{RequestStatus{}, options, Sampler(options.sampling), std::nullopt, prompt, std::nullopt, {}};
  if (options.constraint) entry.matcher.emplace(options.constraint);
  entry.logprobs = logprobs;
  entry.status.prompt = std::move(prompt);
  entries_.emplace(id, std::move(entry));
  waiting_.push_back(id);
  return id;
}

const RequestStatus& Scheduler::Status(RequestId id) const {
  const auto it = entries_.find(id);
  if (it == entries_.end()) throw MakeError("scheduler: unknown request id ", id);
  return it->second.status;
}

void Scheduler::Forget(RequestId id) {
  const auto it = entries_.find(id);
  if (it == entries_.end()) throw MakeError("scheduler: unknown request id ", id);
  if (it->second.status.state != RequestState::kFinished) {
    throw MakeError("scheduler: request ", id, " has not finished; Abort it first");
  }
  entries_.erase(it);
}

void Scheduler::Abort(RequestId id) {
  const auto it = entries_.find(id);
  if (it == entries_.end()) throw MakeError("scheduler: unknown request id ", id);
  if (it->second.status.state == RequestState::kFinished) {
    throw MakeError("scheduler: request ", id, " has already finished");
  }
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), id), waiting_.end());
  Finish(id, StopReason::kAborted);
}

void Scheduler::Finish(RequestId id, StopReason reason) {
  Entry& e = entries_.at(id);
  if (e.seq) cache_.Free(*e.seq);
  e.seq.reset();
  running_.erase(std::remove(running_.begin(), running_.end(), id), running_.end());
  e.status.state = RequestState::kFinished;
  e.status.finish_reason = reason;
}

void Scheduler::Preempt(RequestId id) {
  Entry& e = entries_.at(id);
  cache_.Free(*e.seq);
  e.seq.reset();
  running_.erase(std::remove(running_.begin(), running_.end(), id), running_.end());
  e.status.state = RequestState::kWaiting;
  ++e.status.preemptions;
  waiting_.push_front(id);  // first in line again: it was admitted before everything still waiting
}

// The blocks a request may still take, at most: all it could ever hold (no prefix sharing assumed).
int Scheduler::WorstCaseBlocksStillNeeded(RequestId id) const {
  const Entry& e = entries_.at(id);
  return BlocksForPositions(static_cast<int>(e.status.prompt.size()) + e.options.max_new_tokens);
}

bool Scheduler::TryAdmit(RequestId id) {
  if (static_cast<int>(running_.size()) >= options_.max_running) return false;
  Entry& e = entries_.at(id);
  if (options_.policy == PoolPolicy::kRefuseAdmission) {
    int promised = WorstCaseBlocksStillNeeded(id);
    for (RequestId r : running_) promised += WorstCaseBlocksStillNeeded(r);
    if (promised > cache_.config().num_blocks) return false;
  } else {
    // Enough for its first chunk, so that it is not preempted at once (which would only churn).
    const int first_chunk = std::min(static_cast<int>(e.to_compute.size()), options_.max_step_tokens);
    if (BlocksForPositions(first_chunk) > cache_.AvailableBlocks()) return false;
  }
  // A prompt still to be scored is computed whole: the prefix cache would skip positions whose logits it
  // needs.
  e.seq = cache_.Add(ScoresPrompt(e) ? std::span<const int>() : std::span<const int>(e.to_compute));
  e.status.cached_prompt_tokens = cache_.Sequence(*e.seq).length();
  e.status.state = RequestState::kPrefilling;
  running_.push_back(id);
  return true;
}

bool Scheduler::ScoresPrompt(const Entry& e) const {
  return e.logprobs.prompt && e.status.prompt_logprobs.size() + 1 < e.status.prompt.size();
}

// `rows`: the logits of positions first_position.. of one chunk; position p's row scores prompt[p + 1].
// After a preemption the prompt is computed again: the positions recorded already are skipped.
void Scheduler::RecordPromptLogprobs(Entry& e, int first_position, std::span<const float> rows) {
  const std::size_t vocab = static_cast<std::size_t>(model_.config().vocab_size);
  const std::vector<int>& prompt = e.status.prompt;
  std::vector<PositionLogprobs>& out = e.status.prompt_logprobs;
  for (std::size_t r = 0; r < rows.size() / vocab; ++r) {
    const std::size_t p = static_cast<std::size_t>(first_position) + r;
    if (p + 1 >= prompt.size()) break;
    if (p < out.size()) continue;
    out.push_back(ScorePosition(rows.subspan(r * vocab, vocab), prompt[p + 1], e.logprobs.top));
  }
}

StepReport Scheduler::Step() {
  StepReport report;
  // Admission: first come, first served; a request that cannot be admitted holds back the ones after it.
  while (!waiting_.empty() && TryAdmit(waiting_.front())) {
    report.admitted.push_back(waiting_.front());
    waiting_.pop_front();
  }

  // The plan: a chunk of each admitted request's pending tokens (decoders first, one token each; then
  // prefills, oldest first, with what is left of the budget), shrunk by preemption until its blocks fit.
  struct Planned {
    RequestId id;
    int count;
  };
  std::vector<Planned> plan;
  for (;;) {
    plan.clear();
    int budget = options_.max_step_tokens;
    for (const bool decoding : {true, false}) {
      for (RequestId id : running_) {
        const Entry& e = entries_.at(id);
        if ((e.status.state == RequestState::kDecoding) != decoding || budget == 0) continue;
        const int pending = static_cast<int>(e.to_compute.size()) - cache_.Sequence(*e.seq).length();
        const int count = std::min(pending, budget);
        plan.push_back({id, count});
        budget -= count;
      }
    }
    int blocks = 0;
    for (const Planned& p : plan) blocks += cache_.BlocksToGrow(*entries_.at(p.id).seq, p.count);
    if (blocks <= cache_.AvailableBlocks()) break;
    if (options_.policy == PoolPolicy::kRefuseAdmission || running_.size() <= 1) {
      // Admission control promised this cannot happen; a lone request always fits (Add checked it).
      throw MakeError("KV pool exhausted: the step needs ", blocks, " blocks and ", cache_.AvailableBlocks(),
                      " are available (policy ", PoolPolicyName(options_.policy), ")");
    }
    const RequestId newest = running_.back();
    Preempt(newest);
    report.preempted.push_back(newest);
  }
  if (plan.empty()) {
    // Add() lets in only requests that fit the whole pool, so with nothing running the first waiting one is
    // always admitted; were it not, callers looping on !Idle() would spin forever.
    if (!waiting_.empty()) {
      throw MakeError("scheduler: request ", waiting_.front(), " cannot be admitted into an idle KV pool (",
                      cache_.AvailableBlocks(), " blocks available)");
    }
    return report;
  }

  std::vector<SequenceChunk> chunks;
  chunks.reserve(plan.size());
  for (const Planned& p : plan) {
    Entry& e = entries_.at(p.id);
    KvSequence& kv = cache_.Sequence(*e.seq);
    chunks.push_back(
        {&kv, std::span<const int>(e.to_compute).subspan(kv.length(), p.count), ScoresPrompt(e)});
    (e.status.state == RequestState::kDecoding ? report.decode_tokens : report.prefill_tokens) += p.count;
  }
  const std::span<const float> logits = model_.Step(chunks, StepOptions{options_.batch_invariant});

  const std::size_t vocab = static_cast<std::size_t>(model_.config().vocab_size);
  std::vector<float> masked;  // a constrained request's logits with its mask applied (Step's are read-only)
  std::size_t first_row = 0;  // of plan[i]'s logits: one row, or one per token of a prompt being scored
  for (std::size_t i = 0; i < plan.size(); ++i) {
    const RequestId id = plan[i].id;
    Entry& e = entries_.at(id);
    const std::size_t rows = chunks[i].all_logits ? chunks[i].tokens.size() : 1;
    const std::span<const float> chunk_logits = logits.subspan(first_row * vocab, rows * vocab);
    first_row += rows;
    const int length = cache_.Sequence(*e.seq).length();
    if (chunks[i].all_logits) RecordPromptLogprobs(e, length - plan[i].count, chunk_logits);
    if (length < static_cast<int>(e.to_compute.size())) continue;  // prompt unfinished
    // max_new_tokens 0 (LogprobOptions::prompt): the prompt is scored, nothing is to be generated.
    if (e.options.max_new_tokens == 0) {
      Finish(id, StopReason::kMaxTokens);
      report.finished.push_back(id);
      continue;
    }
    const std::span<const float> row = chunk_logits.last(vocab);
    int token;
    if (e.matcher) {
      masked.assign(row.begin(), row.end());
      e.matcher->Apply(masked);
      token = e.sampler.Sample(masked);
      e.matcher->Accept(token);
    } else {
      token = e.sampler.Sample(row);
    }
    // The raw logits' log-softmax (OpenAI's convention), not the distribution sampled from.
    if (e.logprobs.sampled) e.status.generated_logprobs.push_back(ScorePosition(row, token, e.logprobs.top));
    e.status.generated.push_back(token);
    e.to_compute.push_back(token);
    e.status.state = RequestState::kDecoding;
    report.new_tokens.emplace_back(id, token);
    const auto& stops = e.options.stop_ids;
    if (std::find(stops.begin(), stops.end(), token) != stops.end()) {
      Finish(id, StopReason::kStopToken);
    } else if (static_cast<int>(e.status.generated.size()) >= e.options.max_new_tokens) {
      Finish(id, StopReason::kMaxTokens);
    } else if (static_cast<int>(e.to_compute.size()) > cache_.config().max_positions) {
      Finish(id, StopReason::kContextFull);
    } else {
      continue;
    }
    report.finished.push_back(id);
  }
  return report;
}

}  // namespace plumb
