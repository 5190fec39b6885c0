#include "plumb/engine/speculative.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "plumb/core/error.h"
#include "plumb/sample/speculative.h"

namespace plumb {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The drafter's random stream differs from the target's (seeded with the same seed), so that a draft token
// and the target's decision on it never share a uniform: the rule assumes they are independent.
constexpr std::uint64_t kDrafterStream = 0x9e3779b97f4a7c15ull;

// As Sampler draws them (plumb/sample/sampler.h): 53 random bits, u in [0, 1).
double NextUniform(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

// A token drawn from `distribution`: its most probable token at temperature 0 (a point mass there).
int Draw(std::span<const Candidate> distribution, std::mt19937_64& rng) {
  return Sampler::SampleWithUniform(distribution, NextUniform(rng));
}

}  // namespace

ModelDrafter::ModelDrafter(Model& model, std::string name, const SamplingParams& sampling, int max_positions)
    : model_(model),
      name_(std::move(name)),
      sampling_(sampling),
      rng_(sampling.seed ^ kDrafterStream),
      cache_(model.NewKvCache(max_positions)) {
  ValidateSamplingParams(sampling);
}

void ModelDrafter::Propose(std::span<const int> context, int k, std::vector<int>& tokens,
                           std::vector<std::vector<Candidate>>& distributions) {
  tokens.clear();
  distributions.clear();
  if (k < 1 || context.empty()) return;
  // Keep what the cache computed for the context's longest common prefix (the accepted drafts among it);
  // at least the last context token is run again, since its logits are the first draft's distribution.
  std::size_t keep = 0;
  while (keep < cached_.size() && keep + 1 < context.size() && cached_[keep] == context[keep]) ++keep;
  cache_.set_length(static_cast<int>(keep));
  cached_.resize(keep);
  const std::span<const int> fresh = context.subspan(keep);
  std::vector<float> logits;
  if (fresh.size() == 1) {
    const std::span<const float> decoded = model_.Decode(fresh[0], cache_);
    logits.assign(decoded.begin(), decoded.end());
  } else {
    logits = model_.Prefill(fresh, cache_);
  }
  cached_.insert(cached_.end(), fresh.begin(), fresh.end());
  for (int i = 0; i < k; ++i) {
    std::vector<Candidate> q = CandidateDistribution(logits, sampling_);
    const int token = Draw(q, rng_);  // the argmax at temperature 0: q is a point mass there
    tokens.push_back(token);
    distributions.push_back(std::move(q));
    if (i + 1 == k) break;  // the last draft's logits would be the verifier's business
    const std::span<const float> next = model_.Decode(token, cache_);
    logits.assign(next.begin(), next.end());
    cached_.push_back(token);
  }
}

NgramDrafter::NgramDrafter(int min_n, int max_n) : min_n_(min_n), max_n_(max_n) {
  if (min_n < 1 || max_n < min_n)
    throw MakeError("n-gram drafter: need 1 <= min_n <= max_n, got ", min_n, "..", max_n);
}

std::string NgramDrafter::Describe() const {
  return "n-gram prompt lookup (n = " + std::to_string(max_n_) + ".." + std::to_string(min_n_) + ")";
}

void NgramDrafter::Propose(std::span<const int> context, int k, std::vector<int>& tokens,
                           std::vector<std::vector<Candidate>>& distributions) {
  tokens.clear();
  distributions.clear();
  const int len = static_cast<int>(context.size());
  for (int n = max_n_; n >= min_n_ && tokens.empty(); --n) {
    if (len < n + 1) continue;
    const std::span<const int> suffix = context.subspan(len - n);
    // The most recent earlier occurrence: what followed it most recently is the best guess.
    for (int start = len - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), context.begin() + start)) continue;
      const int follow = start + n;
      for (int i = follow; i < len && i < follow + k; ++i) tokens.push_back(context[i]);
      break;
    }
  }
  for (int token : tokens) distributions.push_back({Candidate{token, 1.0f}});
}

SpeculativeStats GenerateSpeculative(Model& target, ContiguousKvCache& cache, std::span<const int> prompt,
                                     Drafter& drafter, int k, const GenerationOptions& options,
                                     const std::function<void(int)>& on_token) {
  CheckGenerationFits(target, cache, prompt, options.max_new_tokens);
  if (k < 1) throw MakeError("draft tokens per step must be at least 1, got ", k);
  ValidateSamplingParams(options.sampling);
  SpeculativeStats stats;
  stats.draft_tokens_per_step = k;
  GenerationStats& gen = stats.generation;
  gen.prompt_tokens = static_cast<int>(prompt.size());
  const int vocab = target.config().vocab_size;
  // The target's uniforms: the first is what Sampler would draw for Generate's first token.
  std::mt19937_64 rng(options.sampling.seed);
  const auto is_stop = [&](int token) {
    return std::find(options.stop_ids.begin(), options.stop_ids.end(), token) != options.stop_ids.end();
  };

  const Clock::time_point start = Clock::now();
  const std::vector<float> logits = RunPrompt(target, cache, prompt, options);
  gen.prefill_seconds = SecondsSince(start);
  std::vector<std::vector<Candidate>> p(1, CandidateDistribution(logits, options.sampling));
  std::vector<int> emitted{Draw(p[0], rng)};
  gen.time_to_first_token = SecondsSince(start);

  std::vector<int> context(prompt.begin(), prompt.end());
  std::vector<int> drafts, chunk;
  std::vector<std::vector<Candidate>> q;
  std::vector<double> uniforms;
  gen.stop_reason = StopReason::kMaxTokens;
  for (;;) {
    for (int token : emitted) {
      gen.decode_steps = gen.generated_tokens;  // tokens after the first, as Generate counts its Decodes
      ++gen.generated_tokens;
      context.push_back(token);
      on_token(token);
      if (is_stop(token)) {
        gen.stop_reason = StopReason::kStopToken;
        return stats;
      }
      if (gen.generated_tokens == options.max_new_tokens) return stats;
    }
    // One target step emits up to drafts + 1 tokens: draft no more than can still be emitted (which also
    // keeps the step inside the context: CheckGenerationFits counted max_new_tokens positions).
    const int room = std::min(k, options.max_new_tokens - gen.generated_tokens - 1);
    const Clock::time_point draft_start = Clock::now();
    drafter.Propose(context, room, drafts, q);
    stats.draft_seconds += SecondsSince(draft_start);
    if (static_cast<int>(drafts.size()) > room || q.size() != drafts.size())
      throw MakeError("internal: the drafter proposed ", drafts.size(), " tokens for ", room);
    CheckTokenIds(drafts, vocab);

    // The last emitted token is not in the cache yet: the step runs it and the drafts, each row bitwise
    // what Decode would give it (batch-invariant kernels).
    const Clock::time_point verify_start = Clock::now();
    chunk.assign(1, context.back());
    chunk.insert(chunk.end(), drafts.begin(), drafts.end());
    const int length_before = cache.length();
    const SequenceChunk step{&cache, chunk, /*all_logits=*/true};
    const std::span<const float> rows = target.Step({&step, 1}, StepOptions{.batch_invariant = true});
    p.resize(chunk.size());
    uniforms.resize(chunk.size());
    for (std::size_t i = 0; i < chunk.size(); ++i) {
      p[i] = CandidateDistribution(rows.subspan(i * vocab, vocab), options.sampling);
      uniforms[i] = NextUniform(rng);
    }
    const DraftVerdict verdict = VerifyDraft(p, q, drafts, uniforms);
    // The cache keeps the last token and the accepted drafts; the rejected drafts' positions are dropped
    // (the verdict's own last token is run by the next step).
    cache.set_length(length_before + 1 + verdict.accepted);
    stats.verify_seconds += SecondsSince(verify_start);
    ++stats.target_steps;
    stats.drafted += static_cast<int>(drafts.size());
    stats.accepted += verdict.accepted;
    gen.decode_seconds = stats.draft_seconds + stats.verify_seconds;
    emitted = verdict.tokens;
  }
}

}  // namespace plumb
