#include "plumb/engine/generator.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "plumb/core/error.h"

namespace plumb {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

void CheckGenerationFits(const Model& model, const ContiguousKvCache& cache, std::span<const int> prompt,
                         int max_new_tokens) {
  if (prompt.empty()) throw MakeError("the prompt is empty: give at least one token");
  CheckTokenIds(prompt, model.config().vocab_size);
  if (max_new_tokens < 1) throw MakeError("max new tokens must be at least 1, got ", max_new_tokens);
  const long long needed =
      static_cast<long long>(cache.length()) + static_cast<long long>(prompt.size()) + max_new_tokens;
  if (needed > cache.max_positions()) {
    throw MakeError("prompt (", prompt.size(), " tokens",
                    cache.length() ? " after " + std::to_string(cache.length()) + " cached" : std::string(),
                    ") + max tokens (", max_new_tokens, ") = ", needed, " exceeds the context of ",
                    cache.max_positions(), " positions");
  }
}

void CheckConstraintFits(const Model& model, const GenerationOptions& options) {
  if (!options.constraint) return;
  const TokenConstraint& c = *options.constraint;
  if (c.vocabulary().size() > model.config().vocab_size) {
    throw MakeError("the output constraint's vocabulary has ", c.vocabulary().size(),
                    " tokens, more than the model's ", model.config().vocab_size);
  }
  for (const int id : c.end_ids()) {
    if (std::find(options.stop_ids.begin(), options.stop_ids.end(), id) == options.stop_ids.end())
      throw MakeError("the output constraint ends with token ", id, ", which is not a stop id");
  }
}

std::vector<float> RunPrompt(Model& model, ContiguousKvCache& cache, std::span<const int> prompt,
                             const GenerationOptions& options) {
  if (options.decode_one_token_prompt && prompt.size() == 1) {
    const std::span<const float> decoded = model.Decode(prompt[0], cache);
    return {decoded.begin(), decoded.end()};
  }
  const std::size_t chunk =
      options.prefill_chunk > 0 ? static_cast<std::size_t>(options.prefill_chunk) : prompt.size();
  std::size_t begin = 0;
  for (; prompt.size() - begin > chunk; begin += chunk) model.Prefill(prompt.subspan(begin, chunk), cache);
  return model.Prefill(prompt.subspan(begin), cache);
}

GenerationStats Generate(Model& model, ContiguousKvCache& cache, std::span<const int> prompt,
                         const GenerationOptions& options, const std::function<void(int)>& on_token) {
  CheckGenerationFits(model, cache, prompt, options.max_new_tokens);
  CheckConstraintFits(model, options);
  Sampler sampler(options.sampling);
  GenerationStats stats;
  stats.prompt_tokens = static_cast<int>(prompt.size());
  const auto is_stop = [&](int token) {
    return std::find(options.stop_ids.begin(), options.stop_ids.end(), token) != options.stop_ids.end();
  };

  std::optional<TokenMatcher> matcher;
  if (options.constraint) matcher.emplace(options.constraint);
  std::vector<float> masked;  // the logits with the constraint applied: Model's are read-only
  const auto sample = [&](std::span<const float> logits) {
    if (!matcher) return sampler.Sample(logits);
    const Clock::time_point begin = Clock::now();
    masked.assign(logits.begin(), logits.end());
    matcher->Apply(masked);
    stats.constraint_seconds += SecondsSince(begin);
    const int token = sampler.Sample(masked);
    matcher->Accept(token);
    return token;
  };

  const Clock::time_point start = Clock::now();
  const std::vector<float> logits = RunPrompt(model, cache, prompt, options);
  stats.prefill_seconds = SecondsSince(start);
  int token = sample(logits);
  stats.time_to_first_token = SecondsSince(start);

  stats.stop_reason = StopReason::kMaxTokens;
  for (;;) {
    ++stats.generated_tokens;
    on_token(token);
    if (is_stop(token)) {
      stats.stop_reason = StopReason::kStopToken;
      break;
    }
    if (stats.generated_tokens == options.max_new_tokens) break;
    if (options.interrupt && options.interrupt->load(std::memory_order_relaxed)) {
      stats.stop_reason = StopReason::kAborted;
      break;
    }
    const Clock::time_point step = Clock::now();
    const std::span<const float> next_logits = model.Decode(token, cache);
    token = sample(next_logits);
    stats.decode_seconds += SecondsSince(step);
    ++stats.decode_steps;
  }
  return stats;
}

}  // namespace plumb
