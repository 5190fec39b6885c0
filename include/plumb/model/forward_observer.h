// ForwardObserver: what a forward pass reports as it runs, for the tools that look inside one. `plumb
// explain` times every kernel of a layer; the fixture suite records the residual stream at every layer
// boundary. The model's arithmetic is the same with or without an observer; a Model without one (the
// default) pays one untaken branch per kernel.
#pragma once

#include <cstdint>
#include <string_view>

namespace plumb {

// The kernels of a forward pass, in the order they run in each layer (embedding before the first layer,
// final_norm and lm_head after the last; kQuantize, where it runs, four times a layer). Model::Step runs RoPE
// for all its chunks, then their cache writes.
enum class ForwardKernel : std::uint8_t {
  kEmbedding,  // token ids -> [rows][d] (a row lookup, dequantized)
  kAttnNorm,   // RMSNorm before attention
  kQuantize,   // the fast family's rounding of x to int8 (kernels/int8_activations.h) for the projections of
               // a one-row pass that run int8 kernels: before q/k/v, o, gate/up and down
  kQProj,      // [rows][d] · Wqᵀ (+ bias)
  kKProj,      // [rows][d] · Wkᵀ (+ bias)
  kVProj,      // [rows][d] · Wvᵀ (+ bias)
  kQkNorm,     // RMSNorm of every query and key head (Gemma 3)
  kRope,       // rotary embedding of q and k
  kKvWrite,    // new keys and values into the cache (encoded to the cache's dtype)
  kAttention,  // causal GQA attention over the cache
  kWindowAttention,  // the same within a sliding window (Gemma 3's local layers, in place of kAttention)
  kOProj,            // attention output · Woᵀ, added to the residual stream (Gemma 3: by kPostAttnNorm)
  kPostAttnNorm,     // x += RMSNorm(o_proj's output) (Gemma 3)
  kMlpNorm,          // RMSNorm before the MLP
  kGateProj,         // [rows][d] · Wgateᵀ
  kUpProj,           // [rows][d] · Wupᵀ
  kSwiGlu,           // silu(gate) ⊙ up
  kGeGlu,            // gelu_tanh(gate) ⊙ up (Gemma 3, in place of kSwiGlu)
  kDownProj,         // [rows][ffn] · Wdownᵀ, added to the residual stream (Gemma 3: by kPostMlpNorm)
  kPostMlpNorm,      // x += RMSNorm(down_proj's output) (Gemma 3)
  kFinalNorm,        // RMSNorm after the last layer (only the rows whose logits are computed)
  kLmHead,           // [logit rows][d] · Wheadᵀ
};
inline constexpr int kForwardKernelCount = static_cast<int>(ForwardKernel::kLmHead) + 1;

// "embedding", "attn_norm", "q_proj", ..., "lm_head": the names `plumb explain` prints.
std::string_view ForwardKernelName(ForwardKernel kernel);

// Which entry point runs the pass (model/model.h): they differ in how projections are computed.
enum class ForwardPhase : std::uint8_t { kPrefill, kDecode, kStep };

// Points of the residual stream, each reported as [rows][d] floats.
enum class ActivationPoint : std::uint8_t {
  kLayerInput,      // x entering layer `layer` (layer 0: the embedding rows)
  kAfterAttention,  // x + o_proj(attention(...)) of layer `layer`
  kAfterMlp,        // x after the MLP block of layer `layer` (the input of layer + 1)
  kFinalNorm,       // the final RMSNorm of every row (layer = -1), before the LM head
  // Not the residual stream: the pass's new keys and values of layer `layer`, [rows][n_kv_heads · head_dim]
  // after RoPE (and Gemma 3's QK norm), as they go into the cache, before its dtype rounds them. Reported
  // before kAfterAttention of the same layer.
  kNewKeys,
  kNewValues,
};
std::string_view ActivationPointName(ActivationPoint point);  // "layer_input", "after_attention", ...

struct KernelTiming {
  ForwardKernel kernel;
  int layer = -1;        // -1 for embedding, final_norm and lm_head
  int rows = 0;          // rows (tokens) the kernel ran over
  double seconds = 0.0;  // wall time, from the end of the previous kernel (threads joined) to its end
};

class ForwardObserver {
 public:
  virtual ~ForwardObserver() = default;
  // A pass over `rows` tokens begins; every OnKernel and OnActivation until OnPassEnd belongs to it.
  virtual void OnPassBegin(ForwardPhase /*phase*/, int /*rows*/) {}
  virtual void OnKernel(const KernelTiming& /*timing*/) {}
  // data is [rows][cols], valid only during the call. Time spent here is not counted in any kernel.
  virtual void OnActivation(ActivationPoint /*point*/, int /*layer*/, const float* /*data*/, int /*rows*/,
                            int /*cols*/) {}
  virtual void OnPassEnd() {}
};

}  // namespace plumb
