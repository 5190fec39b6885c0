#include "plumb/engine/perplexity.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "plumb/core/error.h"

namespace plumb {

void NllAccumulator::Add(std::span<const float> logits, int target) {
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  double sum_exp = 0;
  for (float logit : logits) sum_exp += std::exp(static_cast<double>(logit) - max_logit);
  const double nll = std::log(sum_exp) - (static_cast<double>(logits[target]) - max_logit);
  ++count_;
  sum_ += nll;
  sum_squares_ += nll * nll;
}

PerplexityResult NllAccumulator::Result() const {
  PerplexityResult r;
  r.scored_tokens = count_;
  if (count_ == 0) return r;
  r.mean_nll = sum_ / count_;
  r.perplexity = std::exp(r.mean_nll);
  const double variance = sum_squares_ / count_ - r.mean_nll * r.mean_nll;
  if (count_ > 1 && variance > 0) r.standard_error = r.perplexity * std::sqrt(variance / (count_ - 1));
  return r;
}

PerplexityResult Perplexity(Model& model, std::span<const int> tokens, int n_ctx, int bos_id,
                            const std::function<void(int, int, const PerplexityResult&)>& on_window) {
  if (n_ctx < 4) throw MakeError("perplexity context must be at least 4 tokens, got ", n_ctx);
  if (n_ctx > model.config().max_position_embeddings) {
    throw MakeError("perplexity context ", n_ctx, " exceeds the model's context length ",
                    model.config().max_position_embeddings);
  }
  if (tokens.size() < 2 * static_cast<std::size_t>(n_ctx)) {
    throw MakeError("the text has ", tokens.size(), " tokens; perplexity with --ctx ", n_ctx,
                    " needs at least ", 2 * n_ctx, " (use a smaller --ctx or a longer text)");
  }
  CheckTokenIds(tokens, model.config().vocab_size);
  const int windows = static_cast<int>(tokens.size() / n_ctx);
  const int vocab = model.config().vocab_size;
  const int first = n_ctx / 2;
  ContiguousKvCache cache = model.NewKvCache(n_ctx);
  NllAccumulator nll;
  for (int w = 0; w < windows; ++w) {
    std::vector<int> window(tokens.begin() + static_cast<std::ptrdiff_t>(w) * n_ctx,
                            tokens.begin() + static_cast<std::ptrdiff_t>(w + 1) * n_ctx);
    if (bos_id >= 0) window[0] = bos_id;
    cache.set_length(0);
    const std::vector<float> logits = model.Prefill(window, cache, PrefillLogits::kAllRows);
    for (int j = first; j < n_ctx - 1; ++j) {
      nll.Add(std::span<const float>(logits).subspan(static_cast<std::size_t>(j) * vocab, vocab),
              window[j + 1]);
    }
    if (on_window) on_window(w + 1, windows, nll.Result());
  }
  PerplexityResult result = nll.Result();
  result.windows = windows;
  return result;
}

}  // namespace plumb
