// Log-probabilities of tokens under a model's next-token distribution: the log-softmax of one row of raw
// logits, as perplexity scores a text and as plumb serve reports `logprobs` (OpenAI's convention: before any
// sampling transform, so temperature, top-k/p and min-p do not change them).
//
//   log p(v) = (l_v − l_max) − log Σ_j exp(l_j − l_max)
//
// l_max is the row's largest logit (a float); each difference is taken in double and the sum of exponentials
// accumulated in double, in index order, so every caller gets the same value for the same row bit for bit.
#pragma once

#include <span>
#include <vector>

namespace plumb {

// The log-softmax of one row, its normaliser computed once: (*this)(logits[v]) is log p(v).
class LogSoftmax {
 public:
  // `logits` must not be empty.
  explicit LogSoftmax(std::span<const float> logits);
  double operator()(float logit) const { return (static_cast<double>(logit) - max_logit_) - log_sum_; }

 private:
  float max_logit_;
  double log_sum_;
};

struct TokenLogprob {
  int token = 0;
  double logprob = 0;
};

// One position of a sequence: the token that came there (sampled, or the prompt's) and its log-probability
// under the logits that predicted it, with the most probable tokens of that distribution.
struct PositionLogprobs {
  int token = 0;
  double logprob = 0;
  std::vector<TokenLogprob> top;  // descending log-probability, ties by ascending token id
};

// Scores `token` under `logits` and lists the `top` most probable tokens (at most the vocabulary).
PositionLogprobs ScorePosition(std::span<const float> logits, int token, int top);

}  // namespace plumb
