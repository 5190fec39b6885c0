// The latency histograms of GET /metrics (docs/serve.md, "Metrics"): time to first token and inter-token
// latency, observed by the engine thread as it hands each step's tokens to their channels, so that they
// measure the engine (its queue, prefill and steps) and not how soon a handler thread woke up.
#pragma once

#include <array>
#include <chrono>
#include <span>
#include <vector>

namespace plumb::serve {

using LatencyClock = std::chrono::steady_clock;

// A Prometheus histogram: counts[i] observations <= bounds[i] (not cumulative; the exposition sums them),
// the last count for those above every bound (+Inf).
struct Histogram {
  explicit Histogram(std::span<const double> upper_bounds);
  void Observe(double value);

  std::vector<double> bounds;
  std::vector<long long> counts;  // bounds.size() + 1
  double sum = 0;
  long long count = 0;
};

// Seconds from a request's hand-over to the engine (after parsing and tokenizing) to its first token: the
// engine's queue and the prompt's prefill. From 10 ms (a turn of the default 135M model whose history is in
// the prefix cache; a fresh 30-token chat prompt takes 100-200 ms on one core here) to 2 minutes (a
// 4k-token prompt of an 8B model on a laptop's CPU), in steps of about 2x (1, 2.5, 5 per decade, as
// Prometheus' defaults), so a quantile is read to within a step.
inline constexpr std::array<double, 13> kTimeToFirstTokenBounds = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                                                   2.5,  5,     10,   25,  60,   120};
// Seconds between two tokens of a request: one decode step (or more, for a request preempted and
// recomputed). From 1 ms (the 135M model's step takes about 8 ms on one core here, docs/performance.md; a
// faster host or a smaller model less) to 5 s (an 8B model's step over a batch of 64 on a laptop), the same
// 2x steps; Prometheus' default buckets start at 5 ms and would put every step of a small model into two.
inline constexpr std::array<double, 12> kInterTokenLatencyBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                                    0.1,   0.25,   0.5,   1,    2.5,   5};

// When a request's tokens came: its channel holds one, made when the handler submits the request.
struct TokenTimes {
  LatencyClock::time_point submitted = LatencyClock::now();
  LatencyClock::time_point last{};  // the previous token's arrival
  bool any = false;                 // a token has come
};

struct LatencyStats {
  Histogram time_to_first_token{kTimeToFirstTokenBounds};
  Histogram inter_token_latency{kInterTokenLatencyBounds};

  // A token of the request timed by `times` came at `now`: its time to first token, or the gap since the
  // previous one.
  void Observe(TokenTimes& times, LatencyClock::time_point now);
};

}  // namespace plumb::serve
