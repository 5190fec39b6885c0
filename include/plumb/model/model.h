// Model: a Llama-family decoder (Llama, Qwen2-style Q/K/V biases) in FP32, with its two phases.
//
//   Prefill(tokens): all P prompt tokens at once. Every projection is a [P, d] × [d, n] GEMM, so each weight
//                    read from memory serves P tokens: compute-bound for large P.
//   Decode(token):   one new token. Every projection is a GEMV, each weight is read once for one token:
//                    bandwidth-bound. Attention reads the whole KV cache.
// Both append to a ContiguousKvCache and continue from cache.length().
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "plumb/formats/gguf.h"
#include "plumb/kv/contiguous_kv_cache.h"
#include "plumb/model/config.h"
#include "plumb/model/weights.h"

namespace plumb {

// Throws plumb::Error naming the first id outside [0, vocab_size) and its index.
void CheckTokenIds(std::span<const int> tokens, int vocab_size);

// Which rows of logits Prefill computes: the LM head is [V, d], so for generation only the last is needed.
enum class PrefillLogits { kLastRow, kAllRows };

// Optional record of the residual stream during a prefill, for tests and fixtures. Each entry is [P][d].
struct PrefillTrace {
  std::vector<float> embedding;                   // input of layer 0
  std::vector<std::vector<float>> layer_outputs;  // residual stream after each layer
  std::vector<float> final_norm;                  // after the final RMSNorm
};

class Model {
 public:
  Model(ModelConfig config, ModelWeights weights);

  // Loads a GGUF file (*.gguf) or a Hugging Face checkpoint: a directory holding config.json and
  // model.safetensors (or the shards listed in model.safetensors.index.json), or a .safetensors file with
  // config.json beside it.
  static Model Load(const std::string& path);
  // A model from an open GGUF file; its quantized weights stay in the file's mapping, which the model keeps.
  static Model FromGguf(const std::shared_ptr<const GgufFile>& file);

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }

  // A cache for up to max_positions tokens (0: the model's max_position_embeddings).
  ContiguousKvCache NewKvCache(int max_positions = 0) const;

  // Runs the P tokens at positions cache.length() .. cache.length()+P-1, appends their keys and values and
  // returns logits, [1][V] or [P][V]. Throws plumb::Error for token ids outside [0, V) and for a cache
  // without room for P more positions.
  std::vector<float> Prefill(std::span<const int> tokens, ContiguousKvCache& cache,
                             PrefillLogits which = PrefillLogits::kLastRow, PrefillTrace* trace = nullptr);

  // Runs one token at position cache.length() and appends its key and value. The returned logits [V] live in
  // this model's decode buffers and stay valid until the next Decode.
  std::span<const float> Decode(int token, ContiguousKvCache& cache);

 private:
  void CheckTokens(std::span<const int> tokens, const ContiguousKvCache& cache) const;

  ModelConfig config_;
  ModelWeights weights_;

  // Decode's activations, allocated once so the per-token loop allocates nothing.
  struct DecodeBuffers {
    std::vector<float> x;          // [d]   residual stream
    std::vector<float> x_norm;     // [d]
    std::vector<float> q;          // [n_heads·hd]
    std::vector<float> k;          // [n_kv_heads·hd]
    std::vector<float> v;          // [n_kv_heads·hd]
    std::vector<float> attention;  // [n_heads·hd]
    std::vector<float> projected;  // [d]   output of o_proj / down_proj before the residual add
    std::vector<float> gate;       // [ffn]
    std::vector<float> up;         // [ffn]
    std::vector<float> logits;     // [V]
    std::vector<float> scores;     // attention scratch: one score row per thread
  } decode_;
};

}  // namespace plumb
