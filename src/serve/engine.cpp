#include "engine.h"

#include <algorithm>

#include "http_error.h"
#include "plumb/core/error.h"

namespace plumb::serve {

Engine::Engine(Model& model, PagedKvCache& cache, const SchedulerOptions& options, int max_queue)
    : scheduler_(model, cache, options), capacity_(options.max_running + max_queue) {
  stats_.kv = scheduler_.cache().Usage();
}

std::shared_ptr<Channel> Engine::Submit(std::vector<int> prompt, const GenerationOptions& options,
                                        LogprobOptions logprobs) {
  auto channel = std::make_shared<Channel>();
  channel->logprobs = logprobs;
  std::lock_guard lock(mu_);
  if (!accepting_) throw HttpError{503, "server_error", "shutting_down", "the server is shutting down"};
  if (active_ >= capacity_) {
    ++stats_.refused;
    throw HttpError{429, "rate_limit_error", "queue_full",
                    "the server has " + std::to_string(active_) + " requests running or queued, its limit " +
                        "(--max-batch + --max-queue); try again later"};
  }
  ++active_;
  incoming_.push_back({std::move(prompt), options, logprobs, channel});
  wake_.notify_one();
  return channel;
}

void Engine::Cancel(Channel& channel) {
  std::lock_guard lock(mu_);
  if (channel.finished || channel.cancel) return;
  channel.cancel = true;
  wake_.notify_one();
}

Progress Engine::Next(Channel& channel, std::size_t seen, std::chrono::milliseconds patience) {
  std::unique_lock lock(mu_);
  channel.cv.wait_for(lock, patience, [&] { return channel.finished || channel.tokens.size() > seen; });
  Progress p;
  p.new_tokens.assign(channel.tokens.begin() + static_cast<std::ptrdiff_t>(seen), channel.tokens.end());
  if (channel.token_logprobs.size() > seen) {
    p.new_logprobs.assign(channel.token_logprobs.begin() + static_cast<std::ptrdiff_t>(seen),
                          channel.token_logprobs.end());
  }
  if (channel.prompt_logprobs) {
    p.prompt_logprobs = std::move(channel.prompt_logprobs);
    channel.prompt_logprobs.reset();
  }
  p.finished = channel.finished;
  p.reason = channel.reason;
  p.cached_tokens = channel.cached_tokens;
  p.error = channel.error;
  return p;
}

int Engine::Active() {
  std::lock_guard lock(mu_);
  return active_;
}

EngineStats Engine::Stats() {
  std::lock_guard lock(mu_);
  EngineStats s = stats_;
  s.active = active_;
  return s;
}

void Engine::StopAccepting() {
  std::lock_guard lock(mu_);
  accepting_ = false;
}

void Engine::Shutdown() {
  std::lock_guard lock(mu_);
  shutdown_ = true;
  wake_.notify_one();
}

void Engine::Run() {
  for (;;) {
    std::deque<Submission> fresh;
    std::vector<RequestId> cancelled;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return shutdown_ || !incoming_.empty() || !scheduler_.Idle(); });
      if (shutdown_) {
        for (Submission& s : incoming_) FinishLocked(*s.channel, StopReason::kAborted, "");
        for (auto& [id, channel] : live_) FinishLocked(*channel, StopReason::kAborted, "");
        return;
      }
      fresh.swap(incoming_);
      for (const auto& [id, channel] : live_) {
        if (channel->cancel) cancelled.push_back(id);
      }
    }
    for (Submission& s : fresh) Admit(s);
    for (RequestId id : cancelled) {
      scheduler_.Abort(id);
      End(id);
    }
    StepReport report;
    if (!scheduler_.Idle()) report = scheduler_.Step();
    std::lock_guard lock(mu_);
    for (RequestId id : report.admitted) NoteAdmittedLocked(id);  // before `finished` forgets any of them
    const LatencyClock::time_point now = LatencyClock::now();
    for (const auto& [id, token] : report.new_tokens) {
      Channel& channel = *live_.at(id);
      stats_.latency.Observe(channel.times, now);
      channel.tokens.push_back(token);
      TakeLogprobsLocked(id, channel);
      channel.cv.notify_all();
    }
    for (RequestId id : report.finished) EndLocked(id);
    stats_.preemptions += static_cast<long long>(report.preempted.size());
    stats_.generated_tokens += static_cast<long long>(report.new_tokens.size());
    stats_.cancelled += static_cast<long long>(cancelled.size());
    PublishLocked();
  }
}

void Engine::Admit(Submission& s) {
  try {
    live_[scheduler_.Add(std::move(s.prompt), s.options, s.logprobs)] = s.channel;
  } catch (const Error& e) {  // a prompt the pool can never hold, ids outside the vocabulary
    std::lock_guard lock(mu_);
    FinishLocked(*s.channel, StopReason::kNone, e.what());
  }
}

void Engine::End(RequestId id) {
  std::lock_guard lock(mu_);
  EndLocked(id);
}

void Engine::EndLocked(RequestId id) {
  TakeLogprobsLocked(id, *live_.at(id));  // a prompt scored with nothing generated has no token to carry it
  FinishLocked(*live_.at(id), scheduler_.Status(id).finish_reason, "");
  live_.erase(id);
  scheduler_.Forget(id);
}

// Copies what the Scheduler recorded since the last call: the new tokens' log-probabilities, and the
// prompt's once it has all been scored (the handler sends them before any token's).
void Engine::TakeLogprobsLocked(RequestId id, Channel& channel) {
  const RequestStatus& status = scheduler_.Status(id);
  if (channel.logprobs.prompt && !channel.prompt_scored &&
      status.prompt_logprobs.size() + 1 >= status.prompt.size()) {
    channel.prompt_logprobs = status.prompt_logprobs;
    channel.prompt_scored = true;
  }
  const std::size_t known = std::min(status.generated_logprobs.size(), channel.tokens.size());
  for (std::size_t i = channel.token_logprobs.size(); i < known; ++i)
    channel.token_logprobs.push_back(status.generated_logprobs[i]);
}

// Counted at the first admission: a re-admission after a preemption finds the request's own blocks (its
// generated tokens too), which are not the client's prompt.
void Engine::NoteAdmittedLocked(RequestId id) {
  Channel& channel = *live_.at(id);
  if (channel.admitted) return;
  channel.admitted = true;
  const RequestStatus& status = scheduler_.Status(id);
  channel.cached_tokens = status.cached_prompt_tokens;
  stats_.prompt_tokens += static_cast<long long>(status.prompt.size());
  stats_.cached_prompt_tokens += status.cached_prompt_tokens;
}

void Engine::FinishLocked(Channel& channel, StopReason reason, const std::string& error) {
  channel.finished = true;
  channel.reason = reason;
  channel.error = error;
  --active_;
  ++stats_.finished;
  channel.cv.notify_all();
}

void Engine::PublishLocked() {
  stats_.running = scheduler_.running();
  stats_.waiting = scheduler_.waiting();
  stats_.kv = scheduler_.cache().Usage();
}

}  // namespace plumb::serve
