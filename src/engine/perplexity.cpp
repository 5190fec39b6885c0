#include "plumb/engine/perplexity.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/core/extent.h"
#include "plumb/engine/log_probs.h"

namespace plumb {
namespace {

std::size_t Argmax(std::span<const float> logits) {
  return static_cast<std::size_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// llama.cpp's windows: tokens.size() / n_ctx windows of n_ctx tokens (at most max_windows if > 0), BOS in
// front when the model adds one;
// the logits at j = n_ctx/2 .. n_ctx-2 are scored against token j+1.
class Windows {
 public:
  Windows(std::span<const int> tokens, int n_ctx, int bos_id, int max_windows)
      : tokens_(tokens), n_ctx_(n_ctx), bos_id_(bos_id) {
    if (n_ctx < 4) throw MakeError("perplexity context must be at least 4 tokens, got ", n_ctx);
    if (tokens.size() < 2 * static_cast<std::size_t>(n_ctx)) {
      throw MakeError("the text has ", tokens.size(), " tokens; perplexity with --ctx ", n_ctx,
                      " needs at least ", 2 * n_ctx, " (use a smaller --ctx or a longer text)");
    }
    count_ = static_cast<int>(tokens.size() / n_ctx);
    if (max_windows > 0) count_ = std::min(count_, max_windows);
    // Only the windows evaluated are checked against the vocabulary.
    tokens_ = tokens_.first(Extent(count_, n_ctx));
  }

  // The checks that depend on the model: its context length and vocabulary.
  void CheckModel(const Model& model) const {
    if (n_ctx_ > model.config().max_position_embeddings) {
      throw MakeError("perplexity context ", n_ctx_, " exceeds the model's context length ",
                      model.config().max_position_embeddings);
    }
    CheckTokenIds(tokens_, model.config().vocab_size);
  }

  int count() const { return count_; }
  int first_scored() const { return n_ctx_ / 2; }
  int end_scored() const { return n_ctx_ - 1; }

  std::vector<int> Window(int w) const {
    const auto begin = tokens_.begin() + static_cast<std::ptrdiff_t>(w) * n_ctx_;
    std::vector<int> window(begin, begin + n_ctx_);
    if (bos_id_ >= 0) window[0] = bos_id_;
    return window;
  }

 private:
  std::span<const int> tokens_;
  int n_ctx_;
  int bos_id_;
  int count_;
};

// All n_ctx rows of logits of one window, evaluated from an empty cache along `path`.
std::vector<float> WindowLogits(Model& model, ContiguousKvCache& cache, const std::vector<int>& window,
                                LogitsPath path) {
  cache.set_length(0);
  if (path == LogitsPath::kPrefill) return model.Prefill(window, cache, PrefillLogits::kAllRows);
  const int vocab = model.config().vocab_size;
  std::vector<float> logits(Extent(window.size(), vocab));
  for (std::size_t j = 0; j < window.size(); ++j) {
    const std::span<const float> row = model.Decode(window[j], cache);
    std::copy(row.begin(), row.end(), logits.begin() + static_cast<std::ptrdiff_t>(Extent(j, vocab)));
  }
  return logits;
}

// Sets the active kernel family for one side of a comparison, and restores the caller's on destruction.
class FamilyScope {
 public:
  FamilyScope() : saved_(kernels::ActiveFamily()) {}
  ~FamilyScope() { kernels::SetFamily(saved_); }
  FamilyScope(const FamilyScope&) = delete;
  FamilyScope& operator=(const FamilyScope&) = delete;
  void Use(const std::optional<kernels::KernelFamily>& family) const {
    kernels::SetFamily(family.value_or(saved_));
  }

 private:
  kernels::KernelFamily saved_;
};

std::span<const float> Row(const std::vector<float>& logits, int j, int vocab) {
  return std::span<const float>(logits).subspan(Extent(j, vocab), vocab);
}

}  // namespace

void RunningMean::Add(double value) {
  ++count_;
  sum_ += value;
  sum_squares_ += value * value;
}

double RunningMean::Mean() const {
  return count_ ? sum_ / count_ : 0;
}

double RunningMean::Variance() const {
  if (count_ == 0) return 0;
  const double mean = Mean();
  return std::max(0.0, sum_squares_ / count_ - mean * mean);
}

double RunningMean::StandardError() const {
  return count_ > 1 ? std::sqrt(Variance() / (count_ - 1)) : 0;
}

void NllAccumulator::Add(std::span<const float> logits, int target) {
  nll_.Add(-LogSoftmax(logits)(logits[target]));
}

PerplexityResult NllAccumulator::Result() const {
  PerplexityResult r;
  r.scored_tokens = nll_.count();
  if (r.scored_tokens == 0) return r;
  r.mean_nll = nll_.Mean();
  r.perplexity = std::exp(r.mean_nll);
  r.standard_error = r.perplexity * nll_.StandardError();
  return r;
}

void KlAccumulator::Add(std::span<const float> base_logits, std::span<const float> logits) {
  if (base_logits.size() != logits.size() || logits.empty()) {
    throw MakeError("KL divergence needs two rows of logits of one vocabulary, got ", base_logits.size(),
                    " and ", logits.size());
  }
  // Both log-softmaxes first, each by the same function, so that identical rows give exactly 0.
  const LogSoftmax base(base_logits);
  const LogSoftmax model(logits);
  double kl = 0;
  for (std::size_t v = 0; v < logits.size(); ++v) {
    const double log_p = base(base_logits[v]);
    kl += std::exp(log_p) * (log_p - model(logits[v]));
  }
  kl_.Add(kl);
  agree_.Add(Argmax(base_logits) == Argmax(logits) ? 1.0 : 0.0);
}

KlDivergenceResult KlAccumulator::Result() const {
  KlDivergenceResult r;
  r.scored_tokens = kl_.count();
  r.mean_kl = kl_.Mean();
  r.kl_standard_error = kl_.StandardError();
  r.top1_agreement = agree_.Mean();
  r.top1_standard_error = agree_.StandardError();
  return r;
}

PerplexityResult Perplexity(Model& model, std::span<const int> tokens, int n_ctx, int bos_id,
                            const std::function<void(int, int, const PerplexityResult&)>& on_window,
                            const PerplexityOptions& options) {
  const Windows windows(tokens, n_ctx, bos_id, options.max_windows);
  windows.CheckModel(model);
  const int vocab = model.config().vocab_size;
  ContiguousKvCache cache = model.NewKvCache(n_ctx);
  NllAccumulator nll;
  for (int w = 0; w < windows.count(); ++w) {
    const std::vector<int> window = windows.Window(w);
    const std::vector<float> logits = WindowLogits(model, cache, window, options.path);
    for (int j = windows.first_scored(); j < windows.end_scored(); ++j)
      nll.Add(Row(logits, j, vocab), window[j + 1]);
    if (on_window) on_window(w + 1, windows.count(), nll.Result());
  }
  PerplexityResult result = nll.Result();
  result.windows = windows.count();
  return result;
}

KlDivergenceResult KlDivergence(Model& base, Model& model, std::span<const int> tokens, int n_ctx, int bos_id,
                                const std::function<void(int, int, const KlDivergenceResult&)>& on_window,
                                const PerplexityOptions& options) {
  const Windows windows(tokens, n_ctx, bos_id, options.max_windows);
  const int vocab = model.config().vocab_size;
  if (base.config().vocab_size != vocab) {
    throw MakeError("KL divergence needs one vocabulary: the base model has ", base.config().vocab_size,
                    " tokens, the model ", vocab);
  }
  windows.CheckModel(base);
  windows.CheckModel(model);
  ContiguousKvCache base_cache = base.NewKvCache(n_ctx);
  ContiguousKvCache cache = model.NewKvCache(n_ctx);
  NllAccumulator base_nll, nll;
  KlAccumulator kl;
  const FamilyScope family;
  const auto result = [&] {
    KlDivergenceResult r = kl.Result();
    r.base = base_nll.Result();
    r.model = nll.Result();
    return r;
  };
  for (int w = 0; w < windows.count(); ++w) {
    const std::vector<int> window = windows.Window(w);
    family.Use(options.base_kernels);
    const std::vector<float> base_logits = WindowLogits(base, base_cache, window, options.path);
    family.Use(options.model_kernels);
    const std::vector<float> logits = WindowLogits(model, cache, window, options.path);
    for (int j = windows.first_scored(); j < windows.end_scored(); ++j) {
      base_nll.Add(Row(base_logits, j, vocab), window[j + 1]);
      nll.Add(Row(logits, j, vocab), window[j + 1]);
      kl.Add(Row(base_logits, j, vocab), Row(logits, j, vocab));
    }
    if (on_window) on_window(w + 1, windows.count(), result());
  }
  KlDivergenceResult r = result();
  r.base.windows = r.model.windows = windows.count();
  return r;
}

}  // namespace plumb
