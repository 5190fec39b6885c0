// Speculative decoding: a cheap drafter proposes k tokens, the target model scores all of them in one step,
// and the rejection-sampling rule of plumb/sample/speculative.h (VerifyDraft) keeps a prefix of them and adds
// one token of the target's own. Each target step then emits between 1 and k + 1 tokens, and the emitted
// sequence is distributed exactly as the target's alone (Leviathan et al. 2023, Chen et al. 2023):
//
//   loop:  drafts d_1..d_k ~ q (the drafter)
//          target step over [last, d_1..d_k]          k + 1 rows of logits, one pass over the weights
//          VerifyDraft(p_0..p_k, q_1..q_k, d, u_0..u_k)  → n accepted drafts + one token
//          the target's cache keeps [last, d_1..d_n]; the rest is rolled back
//
// Why it pays: decode is bandwidth-bound, so scoring k + 1 rows costs about what scoring one does (the
// weights are read once either way), while the draft costs a fraction of a target step.
//
// Exactness: the target's verification runs Model::Step with batch-invariant kernels, whose every row is
// bitwise what Model::Decode gives that token alone; so with greedy sampling (temperature 0) the emitted
// tokens are bitwise those of Generate (plumb/engine/generator.h) whatever the drafter proposes. With
// sampling, the target's uniforms come from one std::mt19937_64 seeded with the sampling seed (as Sampler
// draws them), k + 1 per target step, the drafter's from a stream of its own: a seed fixes every decision.
#pragma once

#include <functional>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "plumb/engine/generator.h"
#include "plumb/kv/contiguous_kv_cache.h"
#include "plumb/model/model.h"
#include "plumb/sample/sampler.h"

namespace plumb {

// Proposes the tokens that follow a context, with the distribution each was drawn from.
class Drafter {
 public:
  virtual ~Drafter() = default;
  // Up to k tokens that follow `context` (every id of the sequence so far: prompt and emitted tokens), and
  // for each the distribution q it was drawn from (a point mass for a deterministic drafter). Fewer than k,
  // or none, when the drafter has nothing to say.
  virtual void Propose(std::span<const int> context, int k, std::vector<int>& tokens,
                       std::vector<std::vector<Candidate>>& distributions) = 0;
  // "model PATH" or "n-gram (prompt lookup, n = 3..1)": for the printed summary.
  virtual std::string Describe() const = 0;
};

// A smaller model of the same vocabulary, sampled with the target's sampling parameters (temperature, top-k,
// top-p, min-p; greedy at temperature 0) from a random stream of its own. Its cache follows the context:
// what it computed for a draft that was rejected is rolled back on the next Propose.
class ModelDrafter final : public Drafter {
 public:
  // `model` must outlive the drafter; its cache holds up to max_positions tokens of KV dtype kF32.
  ModelDrafter(Model& model, std::string name, const SamplingParams& sampling, int max_positions);
  void Propose(std::span<const int> context, int k, std::vector<int>& tokens,
               std::vector<std::vector<Candidate>>& distributions) override;
  std::string Describe() const override { return "model " + name_; }

 private:
  Model& model_;
  std::string name_;
  SamplingParams sampling_;
  std::mt19937_64 rng_;
  ContiguousKvCache cache_;
  std::vector<int> cached_;  // the ids of the positions cache_ holds
};

// Prompt lookup (n-gram) drafting, as vLLM's "ngram" speculator and llama.cpp's lookup decoding: find the
// most recent earlier occurrence of the context's last n tokens (n = max_n down to min_n) and propose the k
// tokens that followed it. Costs no model at all, and pays where the output repeats the input (code
// editing, summaries, quoting). Each proposal is a point mass: accepted with the target's probability of it.
class NgramDrafter final : public Drafter {
 public:
  NgramDrafter(int min_n = 1, int max_n = 3);
  void Propose(std::span<const int> context, int k, std::vector<int>& tokens,
               std::vector<std::vector<Candidate>>& distributions) override;
  std::string Describe() const override;

 private:
  int min_n_, max_n_;
};

struct SpeculativeStats {
  // As Generate's, to compare with it: decode_steps counts the tokens emitted after the first (one Decode
  // each in Generate), decode_seconds the time after the first token, drafting included.
  GenerationStats generation;
  int draft_tokens_per_step = 0;  // k
  int target_steps = 0;           // verification steps after the first token
  int drafted = 0;                // draft tokens proposed
  int accepted = 0;               // draft tokens accepted
  double draft_seconds = 0;       // time in the drafter
  double verify_seconds = 0;      // time in the target's steps and the verification

  // Of the proposed draft tokens, the fraction accepted.
  double AcceptanceRate() const { return drafted > 0 ? static_cast<double>(accepted) / drafted : 0; }
  // Tokens emitted per target step after the first token (1 without speculation).
  double TokensPerStep() const {
    return target_steps > 0 ? static_cast<double>(generation.decode_steps) / target_steps : 0;
  }
};

// Generate (plumb/engine/generator.h) with speculation: the same checks, prompt prefill and first token,
// then target steps over [last token, up to k drafts] until a stop id or max_new_tokens. Throws plumb::Error
// for k < 1 and for a prompt that does not fit (as Generate).
SpeculativeStats GenerateSpeculative(Model& target, ContiguousKvCache& cache, std::span<const int> prompt,
                                     Drafter& drafter, int k, const GenerationOptions& options,
                                     const std::function<void(int)>& on_token);

}  // namespace plumb
