// ModelConfig: the hyper-parameters of a Llama-family decoder, read from a Hugging Face config.json.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "plumb/model/moe_router.h"
#include "plumb/model/packing.h"

namespace plumb {

// RoPE scaling: how a checkpoint stretches RoPE past the context it was pre-trained at (docs/models.md "RoPE
// scaling"). Every kind plumb runs divides each rotated pair's frequency by a factor of its own
// (scalar.h RopeRotateHalf's f_i); ModelConfig::rope_freq_factors holds them, this says where they came from.
enum class RopeScalingType {
  kNone,      // f_i = 1 (config.json rope_type "default", or no scaling given)
  kLinear,    // f_i = factor for every pair (rope_type "linear": position interpolation)
  kLlama3,    // Llama 3.1's piecewise rule (rope_type "llama3"): Llama3RopeFreqFactors
  kFactors,   // the divisors as stored, one per pair (GGUF rope_freqs.weight, llama.cpp's form of llama3)
  kLongRope,  // Phi-3's LongRoPE (rope_type "longrope"): short or long divisors by the pass's sequence length
};

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;                       // linear; llama3: the divisor of the low frequencies
  double low_freq_factor = 1.0;              // llama3
  double high_freq_factor = 4.0;             // llama3
  int original_max_position_embeddings = 0;  // llama3, longrope: the context the model was pre-trained at
  // longrope: the divisors per pair (short_factor for a pass whose sequence fits the original context,
  // long_factor past it) and the factor cos and sin are multiplied by (attention_factor; by default
  // sqrt(1 + ln(factor) / ln(original)), factor = max_position_embeddings / original).
  std::vector<double> short_factor{}, long_factor{};
  double attention_factor = 1.0;
};

// Llama 3.1's rule, per pair i of a head of head_dim (the definition transformers' _compute_llama3_parameters
// and llama.cpp's converter share): with inv_freq_i = theta^(−2i/head_dim) and wavelen_i = 2π / inv_freq_i,
//   wavelen_i < original / high_freq_factor:  f_i = 1                       (high frequencies kept)
//   wavelen_i > original / low_freq_factor:   f_i = factor                  (low frequencies interpolated)
//   otherwise, s = (original / wavelen_i − low_freq_factor) / (high_freq_factor − low_freq_factor):
//                                             f_i = 1 / ((1 − s) / factor + s)
// in double, each f_i rounded to float once (the F32 values a GGUF's rope_freqs.weight stores).
std::vector<float> Llama3RopeFreqFactors(const RopeScaling& scaling, float theta, int head_dim);

// Llama 3.1, 3.2 and 3.3's rule as their config.json gives it (low_freq_factor 1, high_freq_factor 4,
// original context 8192) with the model's factor: 8 for 3.1 and 3.3, 32 for 3.2.
RopeScaling MetaLlama3RopeScaling(double factor);

// The gated MLP's activation: down(act(gate(x)) ⊙ up(x)).
enum class MlpActivation {
  kSilu,      // SwiGLU: silu(g) = g / (1 + e^−g)  (Llama, Qwen2)
  kGeluTanh,  // GeGLU with GELU's tanh form (Gemma): kernels/scalar.h GeluTanhGlu
};

struct ModelConfig {
  std::string model_type;     // "llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "gemma3", ... (kFamilies)
  int hidden_size = 0;        // d
  int intermediate_size = 0;  // MLP width
  int num_layers = 0;         // num_hidden_layers
  int num_heads = 0;          // num_attention_heads
  int num_kv_heads = 0;       // num_key_value_heads (defaults to num_heads); divides num_heads
  int head_dim = 0;           // head_dim if present, else hidden_size / num_heads
  float rms_norm_eps = 1e-6f;
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  // [RotaryDim() / 2]: each rotated pair's frequency divisor f_i, or empty for none (every f_i = 1). From
  // rope_scaling for a config.json, from rope_freqs.weight for a GGUF. Layers with a RoPE base of their own
  // (Gemma 3's local layers) rotate unscaled, as in llama.cpp.
  std::vector<float> rope_freq_factors;
  // LongRoPE: the divisors past the original context (rope_freq_factors holds the short ones), and the
  // factor every rotated element is multiplied by (docs/models.md "RoPE scaling").
  std::vector<float> rope_long_freq_factors;
  float rope_attention_factor = 1.0f;
  int vocab_size = 0;
  int max_position_embeddings = 0;   // the context length plumb allows
  bool tie_word_embeddings = false;  // LM head = token embedding matrix
  bool attention_bias = false;       // Q/K/V projections carry biases (Qwen2)
  int bos_token_id = -1;             // -1: none
  std::vector<int> eos_token_ids;    // config's eos_token_id, a number or a list
  // Gemma 3 (docs/models.md "Gemma 3"), and qk_norm for Qwen3 too; a Llama or Qwen2 model leaves them all
  // at these defaults.
  MlpActivation mlp_activation = MlpActivation::kSilu;
  bool scale_embedding = false;  // x = embed[token] · √d
  bool qk_norm = false;          // RMSNorm of each query and key head (over head_dim) before RoPE
  bool sandwich_norm = false;    // an RMSNorm of the attention and MLP outputs before each residual add
  // Sliding-window attention: a layer is local unless (layer + 1) is a multiple of sliding_window_pattern
  // (pattern 0: every layer local, as in Mistral); a local layer's row at position p attends to positions
  // p − sliding_window + 1 .. p and, where rope_theta_local > 0 (Gemma 3), rotates with that base, unscaled.
  // sliding_window 0: every layer global.
  int sliding_window = 0;
  int sliding_window_pattern = 0;
  float rope_theta_local = 0.0f;
  float final_logit_softcap = 0.0f;  // > 0: logits = cap · tanh(logits / cap)
  // The other families' switches (docs/models.md has a row for each); a Llama leaves them at these defaults.
  // Attention scores = q·k · attention_scale (0: 1/√head_dim; Gemma's query_pre_attn_scalar^−½), then, where
  // attn_logit_softcap > 0 (Gemma 2), cap · tanh(score / cap) before the mask and softmax.
  float attention_scale = 0.0f;
  float attn_logit_softcap = 0.0f;
  bool pre_norm = true;        // RMSNorm before attention and MLP (OLMo 2: none, only sandwich_norm's after)
  bool qk_norm_whole = false;  // qk_norm over the whole q (k) projection, not per head (OLMo 2)
  int rotary_dim = 0;          // RoPE turns the first rotary_dim dims of each head (0: all; Phi-3's partial)
  std::vector<int> nope_layers;  // layers that skip RoPE (SmolLM3's NoPE layers)
  // Mixture of experts (docs/models.md "Qwen3-MoE"). plumb runs Qwen3-MoE's kind: softmax routing, routed
  // SwiGLU experts, no shared expert; `plumb estimate`'s cost model reads the rest too (DeepSeek-V3,
  // Mixtral, gpt-oss cards; docs/roofline.md "Mixture of experts and latent attention"). num_experts 0:
  // dense, and every other field here is then unused.
  int num_experts = 0;            // routed experts per MoE layer (num_experts, n_routed_experts, ...)
  int experts_per_token = 0;      // k of them chosen per token (num_experts_per_tok)
  int num_shared_experts = 0;     // experts every token passes through besides (n_shared_experts)
  int moe_intermediate_size = 0;  // one expert's MLP width (moe_intermediate_size; Mixtral's is
                                  // intermediate_size)
  MoeRouting moe_routing = MoeRouting::kSoftmaxTopK;  // the router's rule (model/moe_router.h)
  bool moe_renormalize = true;  // the chosen weights divided by their sum (Qwen3-MoE's norm_topk_prob)
  int first_dense_layers = 0;  // layers 0 .. first_dense_layers − 1 keep a dense MLP (first_k_dense_replace)
  int moe_layer_step = 1;      // only layers with (layer + 1) % step == 0 are MoE (decoder_sparse_step)
  std::vector<int> mlp_only_layers;  // and never these (Qwen3-MoE's mlp_only_layers)
  int kv_lora_rank = 0;              // > 0: MLA; the cache holds this latent and a RoPE key per position
  int q_lora_rank = 0;               // MLA's query down-projection (0: a full-rank q_proj)
  int qk_rope_head_dim = 0;          // MLA: the decoupled RoPE part of a query / key head
  int qk_nope_head_dim = 0;          // MLA: the part of a query / key head without RoPE
  int v_head_dim = 0;                // MLA: a value head

  // A packed checkpoint's FP8 / INT4 storage (config.json "quantization_config", docs/formats.md "Packed
  // checkpoints"); absent for plain F32/F16/BF16 checkpoints and for GGUF.
  std::optional<WeightPacking> packing;

  bool IsMoe() const { return num_experts > 0; }
  bool IsMla() const { return kv_lora_rank > 0; }
  // Whether `layer`'s MLP is the routed experts (otherwise the dense gate/up/down of intermediate_size).
  bool IsMoeLayer(int layer) const {
    return IsMoe() && layer >= first_dense_layers && (layer + 1) % moe_layer_step == 0 &&
           std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) == mlp_only_layers.end();
  }
  int MoeLayerCount() const {
    int n = 0;
    for (int layer = 0; layer < num_layers; ++layer) n += IsMoeLayer(layer) ? 1 : 0;
    return n;
  }
  MoeRouterParams MoeRouter() const { return {moe_routing, num_experts, experts_per_token, moe_renormalize}; }
  int QueryDim() const { return num_heads * head_dim; }
  int KvDim() const { return num_kv_heads * head_dim; }
  bool IsLocalLayer(int layer) const {
    return sliding_window > 0 && (sliding_window_pattern <= 0 || (layer + 1) % sliding_window_pattern != 0);
  }
  int AttentionWindow(int layer) const { return IsLocalLayer(layer) ? sliding_window : 0; }  // 0: all
  bool HasOwnLocalRope(int layer) const { return IsLocalLayer(layer) && rope_theta_local > 0.0f; }
  float RopeTheta(int layer) const { return HasOwnLocalRope(layer) ? rope_theta_local : rope_theta; }
  bool UsesRope(int layer) const {
    return std::find(nope_layers.begin(), nope_layers.end(), layer) == nope_layers.end();
  }
  int RotaryDim() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
  // The layer's RoPE frequency divisors for kernels::RopeRotateHalf (null: unscaled), for a forward pass
  // over a sequence of sequence_length positions (LongRoPE's long divisors past the original context, as
  // transformers and vLLM choose them per pass).
  const float* RopeFreqFactors(int layer, int sequence_length = 0) const {
    if (rope_freq_factors.empty() || HasOwnLocalRope(layer)) return nullptr;
    if (rope_scaling.type == RopeScalingType::kLongRope &&
        sequence_length > rope_scaling.original_max_position_embeddings) {
      return rope_long_freq_factors.data();
    }
    return rope_freq_factors.data();
  }
};

// What a config.json is read for. kRun: plumb will run the checkpoint, so every field that changes the
// math of its family must be one plumb implements, or parsing throws naming it (docs/models.md "What plumb
// refuses"). kShapes: only the shapes are wanted (plumb estimate's model cards), so any model_type is
// accepted and fields that change only the numbers (RoPE scaling, activations) are not judged.
enum class ConfigPurpose { kRun, kShapes };

// Parses config.json text; `source` names the file in error messages. Throws plumb::Error naming the field
// for a missing or ill-typed required field and for inconsistent values (e.g. heads not divisible), and
// (kRun) for a model_type, architecture or math-changing field plumb does not implement.
ModelConfig ParseConfigJson(const std::string& json_text, const std::string& source,
                            ConfigPurpose purpose = ConfigPurpose::kRun);
ModelConfig LoadConfigJson(const std::string& path);

// config.json text for `config` (the Hugging Face keys ParseConfigJson reads, "architectures", and a
// quantization_config when config.packing is set), so that ParseConfigJson gives `config` back. Keys sorted,
// two-space indent: the same config always gives the same bytes.
std::string ConfigToJson(const ModelConfig& config);

class GgufFile;
// Reads the hyper-parameters of a GGUF model from its `<arch>.*` metadata (llama.cpp's keys; arch is one of
// llama, qwen2, qwen3, qwen3moe, gemma2, gemma3, olmo2, phi3, smollm3; docs/models.md): e.g.
// llama.block_count, llama.attention.head_count_kv. A GGUF has no tie flag: a missing output.weight tensor
// means the LM head is the token embedding; rope_freqs.weight gives rope_freq_factors. Every `<arch>.*` key
// must be one plumb reads or checks (an unknown one is refused naming it and its value). Errors name the file
// and key.
ModelConfig ConfigFromGguf(const GgufFile& file);

// Gemma 3's architecture on top of the shapes already in `c`: GeGLU, the √d embedding scale, QK-norm, the
// post-block norms, and with sliding_window > 0 llama.cpp's fixed layout of five local layers (window
// `sliding_window`, RoPE base 10000) to one global. ConfigFromGguf and the gemma-3-270m estimate card share
// it.
void SetGemma3Architecture(ModelConfig& c, int sliding_window);

// Sets c.rope_scaling to a rule (none, linear or llama3) and derives c.rope_freq_factors from it with
// c.rope_theta and c.head_dim, which must be set: the one place a rule becomes divisors.
void SetRopeScaling(ModelConfig& c, const RopeScaling& scaling);

// "RoPE theta 500000, llama3 scaling (factor 8, low_freq_factor 1, high_freq_factor 4, original context
// 8192)": how the model rotates, for the CLI's model lines.
std::string RopeDescription(const ModelConfig& config);

// Checks the invariants the forward pass relies on; throws plumb::Error naming the offending field.
void ValidateConfig(const ModelConfig& config, const std::string& source);

}  // namespace plumb
