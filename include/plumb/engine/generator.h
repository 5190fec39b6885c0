// Generate: prefill a prompt, then sample and decode one token at a time until a stop id or the token limit.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "plumb/engine/stop_reason.h"
#include "plumb/kv/contiguous_kv_cache.h"
#include "plumb/model/model.h"
#include "plumb/sample/sampler.h"
#include "plumb/sample/token_constraint.h"

namespace plumb {

struct GenerationOptions {
  int max_new_tokens = 16;
  SamplingParams sampling;
  std::vector<int> stop_ids;  // generation ends after emitting one of these (usually the EOS ids)
  // A one-token prompt runs through Decode (a GEMV per projection) instead of Prefill (a GEMM): what an
  // uninterrupted run did with that token, so that continuing a KV hand-off gives its logits bitwise.
  bool decode_one_token_prompt = false;
  // A prompt longer than this many tokens is prefilled in chunks of it, each continuing the cache the one
  // before filled: Prefill's activations grow with its rows ([P][intermediate] for gate and up), so a whole
  // 4096-token prompt at 8B would hold about a gigabyte of them at once; 512-row chunks keep the GEMMs as
  // wide as they need to be compute-bound (llama.cpp's default micro-batch is 512 too). 0: one Prefill.
  int prefill_chunk = kDefaultPrefillChunk;
  static constexpr int kDefaultPrefillChunk = 512;
  // Constrained decoding (sample/token_constraint.h, e.g. a JSON schema's grammar): before each sample the
  // logits of the tokens it does not allow become -inf, so the output stays in its language and ends with
  // one of its end ids once complete (they must all be stop ids). Null: unconstrained.
  std::shared_ptr<const TokenConstraint> constraint;
  // Set from elsewhere (plumb chat's SIGINT handler) to stop after the token being emitted: stop_reason
  // kAborted. Read once per token, so a stop lands at the next token; null: never interrupted.
  const std::atomic<bool>* interrupt = nullptr;
};

struct GenerationStats {
  int prompt_tokens = 0;
  int generated_tokens = 0;
  double prefill_seconds = 0;                  // the prompt's forward pass
  double time_to_first_token = 0;              // prefill plus sampling the first token
  double decode_seconds = 0;                   // every Decode() call after the first token
  int decode_steps = 0;                        // number of Decode() calls
  StopReason stop_reason = StopReason::kNone;  // kStopToken, kMaxTokens or kAborted once it returns
  double constraint_seconds = 0;               // computing and applying the constraint's masks (in the above)

  double PrefillTokensPerSecond() const { return prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0; }
  double DecodeTokensPerSecond() const { return decode_seconds > 0 ? decode_steps / decode_seconds : 0; }
};

// Throws plumb::Error if the prompt is empty, holds an id outside the vocabulary, if prompt plus
// max_new_tokens does not fit in the cache's free positions, or (CheckConstraintFits) if the options'
// constraint has more tokens than the model or an end id that is not a stop id.
void CheckGenerationFits(const Model& model, const ContiguousKvCache& cache, std::span<const int> prompt,
                         int max_new_tokens);
void CheckConstraintFits(const Model& model, const GenerationOptions& options);

// The prompt's forward pass as Generate runs it (Prefill, in chunks of options.prefill_chunk tokens; Decode
// for a one-token prompt when options.decode_one_token_prompt): the logits of its last token, [V].
std::vector<float> RunPrompt(Model& model, ContiguousKvCache& cache, std::span<const int> prompt,
                             const GenerationOptions& options);

// Runs the prompt through model.Prefill, then emits up to max_new_tokens tokens, calling on_token for each
// as soon as it is sampled. The cache continues from its current length (a chat keeps it between turns).
GenerationStats Generate(Model& model, ContiguousKvCache& cache, std::span<const int> prompt,
                         const GenerationOptions& options, const std::function<void(int)>& on_token);

}  // namespace plumb
