// The engine thread of plumb serve and the channels that carry each request's tokens to its HTTP handler.
//
// One thread owns the Scheduler (and through it the Model and the PagedKvCache): it takes new requests from
// a mutex-protected queue, aborts those whose handler cancelled them, runs Step() while anything runs and
// appends each step's tokens to the requests' channels. It waits only for work, never for a client, so a
// slow or vanished client costs its own request alone.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "latency.h"
#include "plumb/engine/scheduler.h"

namespace plumb::serve {

// One request's tokens on their way from the engine thread to its handler; guarded by Engine's mutex.
struct Channel {
  std::vector<int> tokens;  // every token sampled so far
  bool finished = false;
  StopReason reason = StopReason::kNone;
  bool admitted = false;  // by the Scheduler, once
  int cached_tokens = 0;  // prompt tokens found in the prefix cache at that first admission
  std::string error;      // why Scheduler::Add refused it
  bool cancel = false;    // the handler wants it ended (a stop string matched, the client went away)
  TokenTimes times;       // for GET /metrics' latency histograms

  LogprobOptions logprobs;                       // what the request asked the Scheduler to record
  std::vector<PositionLogprobs> token_logprobs;  // with logprobs.sampled: one per token of `tokens`
  // With logprobs.prompt: prompt[1..]'s, from when the Scheduler has scored the whole prompt until the
  // handler takes them.
  std::optional<std::vector<PositionLogprobs>> prompt_logprobs;
  bool prompt_scored = false;
  std::condition_variable cv;
};

// What a handler learns from one wait on its channel.
struct Progress {
  std::vector<int> new_tokens;
  std::vector<PositionLogprobs> new_logprobs;  // new_tokens' when the request asked for them
  std::optional<std::vector<PositionLogprobs>> prompt_logprobs;  // once, when asked for and computed
  bool finished = false;
  StopReason reason = StopReason::kNone;
  int cached_tokens = 0;
  std::string error;
};

// A snapshot for GET /stats, taken by the engine thread after every turn of its loop (handlers must not
// read the Scheduler or the cache, which the engine thread alone touches).
struct EngineStats {
  int active = 0;   // requests submitted and not finished: running, waiting, or not yet taken by the engine
  int running = 0;  // admitted by the Scheduler (their prompt computing or decoding)
  int waiting = 0;  // in the Scheduler's queue, for a batch slot or for blocks
  PagedKvUsage kv;
  long long finished = 0;   // requests ended, for any reason
  long long cancelled = 0;  // of those, ended by their handler: a stop string, a client that went away
  long long refused = 0;    // 429s
  long long preemptions = 0;
  long long prompt_tokens = 0;         // of the requests admitted so far
  long long cached_prompt_tokens = 0;  // of those, found in the prefix cache
  long long generated_tokens = 0;      // handed to channels
  LatencyStats latency;                // time to first token, inter-token latency (GET /metrics)
};

class Engine {
 public:
  // capacity: the most requests running or queued at once (--max-batch + --max-queue).
  Engine(Model& model, PagedKvCache& cache, const SchedulerOptions& options, int max_queue);

  // Queues a request for the engine thread. Throws HttpError 503 while draining, 429 when the queue is full.
  std::shared_ptr<Channel> Submit(std::vector<int> prompt, const GenerationOptions& options,
                                  LogprobOptions logprobs = {});
  // Asks the engine thread to abort the request (a no-op once it has finished).
  void Cancel(Channel& channel);
  // Waits up to `patience` until the channel holds tokens past `seen` or has finished; what it holds then.
  Progress Next(Channel& channel, std::size_t seen, std::chrono::milliseconds patience);

  int Active();
  EngineStats Stats();
  void StopAccepting();
  // Ends Run(): every request still running is aborted and its handler told so.
  void Shutdown();

  // The engine thread: admits what handlers submitted, aborts what they cancelled, and steps the scheduler
  // while anything runs.
  void Run();

 private:
  struct Submission {
    std::vector<int> prompt;
    GenerationOptions options;
    LogprobOptions logprobs;
    std::shared_ptr<Channel> channel;
  };

  void Admit(Submission& s);
  void End(RequestId id);
  void EndLocked(RequestId id);
  void TakeLogprobsLocked(RequestId id, Channel& channel);
  void NoteAdmittedLocked(RequestId id);
  void FinishLocked(Channel& channel, StopReason reason, const std::string& error);
  void PublishLocked();

  Scheduler scheduler_;                                 // the engine thread's alone
  std::map<RequestId, std::shared_ptr<Channel>> live_;  // the engine thread's alone; channels under mu_
  const int capacity_;

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Submission> incoming_;
  int active_ = 0;  // submitted and not finished
  bool accepting_ = true;
  bool shutdown_ = false;
  EngineStats stats_;  // the counters, and the last snapshot of the scheduler and cache
};

}  // namespace plumb::serve
