// Perplexity as llama.cpp's `llama-perplexity` defines it, so the two tools' figures can be compared:
//
//   The text's tokens are cut into non-overlapping windows of n_ctx tokens (a partial last window is
//   dropped). Each window is evaluated from an empty cache; if the model adds BOS, the window's first token
//   is replaced by BOS. Only the second half of each window is scored: the logits at positions
//   j = n_ctx/2 .. n_ctx-2 predict token j+1, so every scored token has at least n_ctx/2 tokens of context.
//   PPL = exp(mean NLL). Its standard error is PPL·σ/√(N−1), σ² the variance of the per-token NLLs
//   (first-order propagation of the NLL mean's standard error through exp).
//
// KL divergence, as `llama-perplexity --kl-divergence` reports it: a model Q is compared with a base model
// over the same windows and the same scored positions. At each, with P = softmax(base logits) and
// Q = softmax(Q's logits), both log-softmaxes computed in double:
//   KL(P ‖ Q) = Σ_v P(v) · (log P(v) − log Q(v))   (nats; its mean ± σ/√(N−1) over the positions)
//   top-1 agreement: argmax P = argmax Q (lowest index on ties); ± √(a(1−a)/(N−1)).
//
// How a window's logits are computed (PerplexityOptions::path): by one Prefill of the whole window
// (llama.cpp's way, the default), or token by token through Decode, the path chat and generate run (and the
// one the fast kernel family changes: kernels/int8_activations.h). Both give every row's logits after the
// same tokens.
#pragma once

#include <functional>
#include <optional>
#include <span>

#include "plumb/kernels/int8_activations.h"
#include "plumb/model/model.h"

namespace plumb {

enum class LogitsPath { kPrefill, kDecode };

struct PerplexityOptions {
  LogitsPath path = LogitsPath::kPrefill;
  int max_windows = 0;  // > 0: only the first max_windows windows (llama.cpp's --chunks)
  // KlDivergence only: the kernel family each side runs with (SetFamily before its windows); nullopt: the
  // active one. One model file run with exact kernels as the base and fast ones as the model measures what
  // the fast family costs.
  std::optional<kernels::KernelFamily> base_kernels = std::nullopt, model_kernels = std::nullopt;
};

struct PerplexityResult {
  int windows = 0;
  long long scored_tokens = 0;
  double mean_nll = 0;        // nats per token
  double perplexity = 0;      // exp(mean_nll)
  double standard_error = 0;  // of the perplexity
};

// Count, sum and sum of squares of a series of values, in double: its mean and the mean's standard error.
class RunningMean {
 public:
  void Add(double value);
  long long count() const { return count_; }
  double Mean() const;           // 0 when empty
  double Variance() const;       // population variance (÷N), as llama.cpp computes it
  double StandardError() const;  // √(Variance / (N − 1)); 0 for N < 2

 private:
  long long count_ = 0;
  double sum_ = 0;
  double sum_squares_ = 0;
};

// Accumulates per-token negative log-likelihoods (in double) and turns them into the figures above.
class NllAccumulator {
 public:
  // Adds -log softmax(logits)[target] for one row of `vocab` logits.
  void Add(std::span<const float> logits, int target);
  PerplexityResult Result() const;

 private:
  RunningMean nll_;
};

struct KlDivergenceResult {
  PerplexityResult base;   // the base model's perplexity over the same windows
  PerplexityResult model;  // the compared model's
  long long scored_tokens = 0;
  double mean_kl = 0;              // nats per scored position
  double kl_standard_error = 0;    // of the mean
  double top1_agreement = 0;       // fraction in [0, 1]
  double top1_standard_error = 0;  // of the fraction
};

// Accumulates KL(base ‖ model) and top-1 agreement over rows of logits of one vocabulary.
class KlAccumulator {
 public:
  // base_logits and logits: one row each, of the same (non-zero) length.
  void Add(std::span<const float> base_logits, std::span<const float> logits);
  // Fills scored_tokens, mean_kl, top1_agreement and their errors (not the perplexities).
  KlDivergenceResult Result() const;

 private:
  RunningMean kl_;
  RunningMean agree_;
};

// Needs at least 2·n_ctx tokens (llama.cpp's rule: one full window and room to score it). bos_id < 0: the
// model adds no BOS. on_window(i, windows, running) is called after each window.
PerplexityResult Perplexity(Model& model, std::span<const int> tokens, int n_ctx, int bos_id,
                            const std::function<void(int, int, const PerplexityResult&)>& on_window,
                            const PerplexityOptions& options = {});

// Both models over the same windows (same checks as Perplexity, for each model); their vocabularies must have
// the same size. on_window(i, windows, running) is called after each window. The active kernel family is
// restored on return.
KlDivergenceResult KlDivergence(Model& base, Model& model, std::span<const int> tokens, int n_ctx, int bos_id,
                                const std::function<void(int, int, const KlDivergenceResult&)>& on_window,
                                const PerplexityOptions& options = {});

}  // namespace plumb
