// Model: a Llama-family decoder (Llama, Qwen2-style Q/K/V biases) in FP32, with its two phases.
//
//   Prefill(tokens): all P prompt tokens at once. Every projection is a [P, d] × [d, n] GEMM, so each weight
//                    read from memory serves P tokens: compute-bound for large P.
//   Decode(token):   one new token. Every projection is a GEMV, each weight is read once for one token:
//                    bandwidth-bound. Attention reads the whole KV cache.
//   Step(chunks):    several sequences at once (batched decode, chunked prefill beside decodes): the
//                    projections and the MLP run once over all their rows, so each weight is read once per
//                    step; attention runs per sequence over its own cache.
// All three append to a KvSequence (a ContiguousKvCache, or a sequence of a PagedKvCache) and continue from
// its length().
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "plumb/formats/gguf.h"
#include "plumb/kernels/kernels.h"
#include "plumb/kv/contiguous_kv_cache.h"
#include "plumb/kv/kv_sequence.h"
#include "plumb/model/config.h"
#include "plumb/model/forward_observer.h"
#include "plumb/model/weights.h"

namespace plumb {

// Throws plumb::Error naming the first id outside [0, vocab_size) and its index.
void CheckTokenIds(std::span<const int> tokens, int vocab_size);

// Which rows of logits Prefill computes: the LM head is [V, d], so for generation only the last is needed.
enum class PrefillLogits { kLastRow, kAllRows };

// One sequence's part of a Step: its next tokens, computed at positions kv->length() ...
struct SequenceChunk {
  KvSequence* kv = nullptr;
  std::span<const int> tokens;
  bool all_logits = false;  // logits of every token ([n][V]) instead of the last one's ([1][V])
};

struct StepOptions {
  // Every projection through kernels::GemvBatch, which gives each row bitwise what kernels::Gemv gives it
  // alone: a sequence's logits then do not depend on the batch it ran in, its chunking or the thread count
  // (bitwise what Decode gives, token by token). Otherwise a step of several rows uses kernels::Gemm
  // (BLAS), which is faster for long chunks and agrees to FP32 rounding.
  bool batch_invariant = false;
};

// Optional record of the residual stream during a prefill, for tests and fixtures: what a ForwardObserver
// sees at ActivationPoint kLayerInput of layer 0, kAfterMlp and kFinalNorm.
struct PrefillTrace {
  std::vector<float> embedding;                   // [P][d] input of layer 0
  std::vector<std::vector<float>> layer_outputs;  // [P][d] residual stream after each layer
  std::vector<float> final_norm;                  // [logit rows][d] after the final RMSNorm
};

namespace detail {
struct Activations;
enum class Projection;
}  // namespace detail

// What a model path holds, told by its content, never by its name: a directory is a Hugging Face checkpoint;
// a file starting with the GGUF magic ("GGUF") is a GGUF file whatever it is called (a download saved as
// model.bin, a symlink); a file starting as safetensors does (an 8-byte little-endian header length, then
// '{') is one safetensors file of a checkpoint whose config.json lies beside it. Throws plumb::Error for
// anything else, saying what was found: "/dev/zero: not a GGUF or safetensors file (first bytes 00 00 00
// 00 00 00 00 00 00) and not a directory".
enum class ModelPathKind { kCheckpointDir, kGguf, kSafetensorsFile };
ModelPathKind DetectModelPath(const std::string& path);

class Model {
 public:
  Model(ModelConfig config, ModelWeights weights);
  ~Model();
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;

  // Loads what DetectModelPath finds: a GGUF file, or a Hugging Face checkpoint: a directory holding
  // config.json and model.safetensors (or the shards listed in model.safetensors.index.json), or a
  // safetensors file with config.json beside it.
  static Model Load(const std::string& path);
  // A model from an open GGUF file; its quantized weights stay in the file's mapping, which the model keeps.
  static Model FromGguf(const std::shared_ptr<const GgufFile>& file);

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }

  // Every later Prefill, Decode and Step reports its kernels' times and its layer-boundary activations to
  // `observer` (model/forward_observer.h), which the caller keeps alive; nullptr (the default) stops it.
  void set_observer(ForwardObserver* observer) { observer_ = observer; }

  // A cache for up to max_positions tokens (0: the model's max_position_embeddings) of KV dtype `dtype`
  // (FP8 scales all 1; construct a ContiguousKvCache directly for others).
  ContiguousKvCache NewKvCache(int max_positions = 0, KvDtype dtype = KvDtype::kF32) const;

  // Runs the P tokens at positions kv.length() .. kv.length()+P-1, appends their keys and values and
  // returns logits, [1][V] or [P][V]. Throws plumb::Error for token ids outside [0, V) and for a cache
  // without room for P more positions, leaving the cache's committed state as it was.
  std::vector<float> Prefill(std::span<const int> tokens, KvSequence& kv,
                             PrefillLogits which = PrefillLogits::kLastRow, PrefillTrace* trace = nullptr);

  // Runs one token at position kv.length() and appends its key and value. The returned logits [V] live in
  // this model's decode buffers and stay valid until the next Decode.
  std::span<const float> Decode(int token, KvSequence& kv);

  // Runs the chunks of several sequences in one step: chunk i's tokens at positions kv->length()... All
  // projections and the MLP run once over the concatenated [T][d] rows (T = all chunks' tokens; weights
  // read once per step), attention per sequence over its own KV (kernels::CausalAttention's batched form).
  // Every chunk is checked and reserved before anything is computed, so an error (a bad token id, a full
  // context, an exhausted block pool) changes no sequence's committed state; then keys and values are
  // written and every chunk committed. Returns the logits, chunk after chunk: [1][V] (its last token) or
  // [n][V] (all_logits), in a buffer of this model's that stays valid until the next Step.
  std::span<const float> Step(std::span<const SequenceChunk> chunks, StepOptions options = {});

 private:
  void CheckTokens(std::span<const int> tokens, const KvSequence& kv) const;
  // Checks and reserves every chunk, then runs the layers over all their rows (src/model/model.cpp).
  std::span<const float> Forward(std::span<const SequenceChunk> chunks, ForwardPhase phase,
                                 detail::Projection projection, detail::Activations& a,
                                 ForwardObserver* observer);

  ModelConfig config_;
  ModelWeights weights_;
  ForwardObserver* observer_ = nullptr;
  // Decode's and Step's activations (src/model/forward_pass.h), kept between calls so that a steady decode
  // allocates nothing; Prefill allocates its own for the prompt and lets them go.
  std::unique_ptr<detail::Activations> decode_;
  std::unique_ptr<detail::Activations> step_;
};

}  // namespace plumb
