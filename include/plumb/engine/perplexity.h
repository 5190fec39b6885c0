// Perplexity as llama.cpp's `llama-perplexity` defines it, so the two tools' figures can be compared:
//
//   The text's tokens are cut into non-overlapping windows of n_ctx tokens (a partial last window is
//   dropped). Each window is evaluated from an empty cache; if the model adds BOS, the window's first token
//   is replaced by BOS. Only the second half of each window is scored: the logits at positions
//   j = n_ctx/2 .. n_ctx-2 predict token j+1, so every scored token has at least n_ctx/2 tokens of context.
//   PPL = exp(mean NLL). Its standard error is PPL·σ/√(N−1), σ² the variance of the per-token NLLs
//   (first-order propagation of the NLL mean's standard error through exp).
#pragma once

#include <functional>
#include <span>

#include "plumb/model/model.h"

namespace plumb {

struct PerplexityResult {
  int windows = 0;
  long long scored_tokens = 0;
  double mean_nll = 0;        // nats per token
  double perplexity = 0;      // exp(mean_nll)
  double standard_error = 0;  // of the perplexity
};

// Accumulates per-token negative log-likelihoods (in double) and turns them into the figures above.
class NllAccumulator {
 public:
  // Adds -log softmax(logits)[target] for one row of `vocab` logits.
  void Add(std::span<const float> logits, int target);
  PerplexityResult Result() const;

 private:
  long long count_ = 0;
  double sum_ = 0;
  double sum_squares_ = 0;
};

// Needs at least 2·n_ctx tokens (llama.cpp's rule: one full window and room to score it). bos_id < 0: the
// model adds no BOS. on_window(i, running) is called after each window.
PerplexityResult Perplexity(Model& model, std::span<const int> tokens, int n_ctx, int bos_id,
                            const std::function<void(int, int, const PerplexityResult&)>& on_window);

}  // namespace plumb
