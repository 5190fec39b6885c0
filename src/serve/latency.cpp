#include "latency.h"

#include <algorithm>

namespace plumb::serve {

Histogram::Histogram(std::span<const double> upper_bounds)
    : bounds(upper_bounds.begin(), upper_bounds.end()), counts(upper_bounds.size() + 1, 0) {}

void Histogram::Observe(double value) {
  // The first bound >= value: Prometheus' buckets are "less than or equal" (le).
  const auto bucket = std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin();
  ++counts[static_cast<std::size_t>(bucket)];
  sum += value;
  ++count;
}

void LatencyStats::Observe(TokenTimes& times, LatencyClock::time_point now) {
  const LatencyClock::time_point since = times.any ? times.last : times.submitted;
  const double seconds = std::chrono::duration<double>(now - since).count();
  (times.any ? inter_token_latency : time_to_first_token).Observe(seconds);
  times.last = now;
  times.any = true;
}

}  // namespace plumb::serve
