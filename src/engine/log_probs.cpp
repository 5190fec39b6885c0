#include "plumb/engine/log_probs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace plumb {

LogSoftmax::LogSoftmax(std::span<const float> logits)
    : max_logit_(*std::max_element(logits.begin(), logits.end())) {
  double sum_exp = 0;
  for (float logit : logits) sum_exp += std::exp(static_cast<double>(logit) - max_logit_);
  log_sum_ = std::log(sum_exp);
}

PositionLogprobs ScorePosition(std::span<const float> logits, int token, int top) {
  const LogSoftmax log_p(logits);
  PositionLogprobs p{token, log_p(logits[static_cast<std::size_t>(token)]), {}};
  const std::size_t k = std::min(static_cast<std::size_t>(std::max(top, 0)), logits.size());
  if (k == 0) return p;
  // Ordered by the logits themselves: log-softmax is monotonic, so the order is the distribution's.
  std::vector<int> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  // A NaN (a broken model) ranks last rather than breaking the sort's strict weak order.
  const auto key = [&](int id) {
    const float l = logits[static_cast<std::size_t>(id)];
    return std::isnan(l) ? -std::numeric_limits<float>::infinity() : l;
  };
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(),
                    [&](int a, int b) { return key(a) > key(b) || (key(a) == key(b) && a < b); });
  p.top.reserve(k);
  for (std::size_t i = 0; i < k; ++i)
    p.top.push_back({ids[i], log_p(logits[static_cast<std::size_t>(ids[i])])});
  return p;
}

}  // namespace plumb
