// The families plumb runs, one row each (in the spirit of gemma.cpp's configs): the names a checkpoint gives
// them (Hugging Face config.json's model_type and class, llama.cpp's general.architecture) and what each
// means for the layer. Both checkpoint readers (config.cpp, gguf_weights.cpp) and the weight loaders read
// a family through its row; nothing else compares a family's name. docs/models.md has the same table in
// words; docs/architecture.md "Add a family" says what a new row needs.
#pragma once

#include <span>
#include <string>

#include "plumb/model/config.h"

namespace plumb {

// Where a layer's attention window comes from.
enum class WindowRule {
  kNone,        // every layer attends to every earlier position; a Qwen-style use_sliding_window is refused
  kEveryLayer,  // config.json's sliding_window (GGUF <arch>.attention.sliding_window) on every layer
  kPeriodic,    // local layers with a full one every window_period-th (Gemma's layer_types)
};

// Whether the Q/K/V projections carry biases.
enum class BiasRule {
  kFromConfig,  // config.json's attention_bias (false when absent)
  kAlways,      // whatever config.json says (Qwen2's transformers model builds them with bias=True)
  kNever,       // whatever config.json says (the family's transformers model builds them without)
  kRefused,     // never, and attention_bias = true is refused (the family's model would bias o_proj too)
};

// The query scale (attention scores = q·k · scale) of a checkpoint that does not say it.
enum class QueryScaleRule {
  kHeadDim,  // 1/√head_dim
  // Gemma: config.json's query_pre_attn_scalar^−½ (256 when absent). A GGUF has no such key, and llama.cpp
  // derives it from the model size it names by block count: 1/√(hidden_size / num_heads) for the sizes in
  // Family::hidden_per_head_block_counts (the 27Bs), 1/√head_dim for the rest; <arch>.attention.scale wins.
  kGemmaQueryPreAttnScalar,
};

// How a GGUF stores the Q/K rows of each head (docs/formats.md "RoPE row order").
enum class GgufRopeRows {
  kHfOrder,   // as Hugging Face (llama.cpp runs rotate-half, NEOX, RoPE)
  kPermuted,  // llama.cpp's converter's LlamaModel permutation (it runs adjacent-pair RoPE): moved back on
              // load
};

// A mixture-of-experts family's keys and tensor names.
enum class ExpertLayout {
  kNone,
  kMixtral,   // num_local_experts, every layer; block_sparse_moe.gate, experts.E.w1 / w3 / w2
  kQwen3Moe,  // num_experts (or num_local_experts), mlp_only_layers, decoder_sparse_step; mlp.experts.E.*
};

struct Family {
  const char* name;             // plumb's one name for it (ModelConfig::model_type)
  const char* hf_model_type;    // config.json "model_type"
  const char* hf_architecture;  // config.json "architectures": the class transformers builds
  // general.architecture of its GGUF, or null where llama.cpp writes the family as another arch (Mistral and
  // Mixtral are "llama"s to llama.cpp, with a window or experts).
  const char* gguf_arch;
  const char* hf_wrapper_model_type = nullptr;  // the model_type of a multimodal checkpoint holding it

  // The layer (model/model.cpp reads only the ModelConfig fields these set).
  MlpActivation activation = MlpActivation::kSilu;
  bool scale_embedding = false;  // x = embed[token] · √d
  bool norm_one_plus_w = false;  // RMSNorm multiplies by (1 + w): the loader adds the 1 to a config.json's w
  bool pre_norm = true;          // an RMSNorm before attention and MLP
  bool sandwich_norm = false;    // an RMSNorm of the attention and MLP outputs before each residual add
  bool qk_norm = false;          // RMSNorm of q and k before RoPE ...
  bool qk_norm_whole = false;    // ... over the whole projection, not each head (OLMo 2)
  BiasRule attention_bias = BiasRule::kFromConfig;
  WindowRule window = WindowRule::kNone;
  int window_period = 0;               // kPeriodic: the default period (layer i full iff (i + 1) % p == 0)
  int default_window = 0;              // kPeriodic: config.json's default sliding_window (transformers')
  int gguf_default_window = 0;         // kPeriodic: a GGUF's, where it has no <arch>.attention.sliding_window
  float local_rope_theta = 0.0f;       // > 0: local layers rotate with this base, unscaled (Gemma 3)
  float default_attn_softcap = 0.0f;   // attention logit soft-cap where the checkpoint does not say (Gemma 2)
  float default_final_softcap = 0.0f;  // final logit soft-cap where the checkpoint does not say
  bool softcaps = false;               // config.json's attn_ and final_logit_softcapping read (Gemma)
  QueryScaleRule query_scale = QueryScaleRule::kHeadDim;
  std::span<const int> hidden_per_head_block_counts{};  // kGemmaQueryPreAttnScalar's GGUF sizes
  bool rope_per_layer_type = false;  // rope_parameters per layer type (Gemma 3's full / sliding)
  bool partial_rotary = false;       // partial_rotary_factor / rope.dimension_count below head_dim read
  bool longrope = false;             // rope_type "longrope" (Phi-3); GGUF rope_factors_{long,short}
  bool nope_layers = false;          // SmolLM3's no_rope_layers (GGUF: llama.cpp's every 4th layer)
  int nope_interval = 0;             // the period without the list (transformers' and llama.cpp's 4)
  bool fused_projections = false;    // qkv_proj and gate_up_proj stacked (Phi-3; GGUF attn_qkv, ffn_up)
  ExpertLayout experts = ExpertLayout::kNone;
  // Its GGUF arch may have experts: always where the family is MoE (qwen3moe), and for llama (Mixtral) only
  // with <arch>.expert_count.
  bool gguf_experts = false;
  // <arch>.attention.sliding_window, a window on every layer: Phi-3's, and Mistral's in a "llama" GGUF
  // (export_gguf.py writes it; llama.cpp's llama arch has no window and ignores the key).
  bool gguf_window_key = false;
  bool gguf_reads_attn_softcap = true;  // false: <arch>.attn_logit_softcapping > 0 is refused (Gemma 3)
  GgufRopeRows gguf_rope_rows = GgufRopeRows::kHfOrder;
  bool gguf_rope_freqs = false;     // rope_freqs.weight, per-pair divisors (llama.cpp's Llama 3.1 form)
  bool writes_config_json = false;  // plumb pack can write its config.json (ConfigToJson)

  // config.json keys that must hold one value where present: their family's transformers model computes
  // something else for any other.
  const char* hidden_act_key = "hidden_act";  // the MLP activation's key ...
  const char* hidden_act_value = "silu";      // ... and the value plumb runs
  bool reads_mlp_bias = false;                // mlp_bias must be false (Llama's MLP bias switch)
};

// Every family, in the order docs/models.md lists them.
std::span<const Family> Families();

// The row whose name, config.json model_type or GGUF arch this is, or null.
const Family* FindFamilyByName(const std::string& name);
const Family* FindFamilyByHfModelType(const std::string& model_type);
const Family* FindFamilyByGgufArch(const std::string& arch);

// The row of a config (an empty model_type, as a hand-made ModelConfig has, is a Llama); throws when the
// name is no row's (a config plumb did not read).
const Family& FamilyOf(const ModelConfig& config);

// The row a config being read follows: its family's, or, for a model card's model_type plumb does not run
// (ConfigPurpose::kShapes), a Llama's.
const Family& ReadingRulesOf(const ModelConfig& config);

// The row whose multimodal checkpoint's model_type this is (Gemma 3's "gemma3"), or null: a refusal's hint.
const Family* FindFamilyByHfWrapperModelType(const std::string& model_type);

// "llama, mistral, ..." (config.json model_types; only the rows with `flag` set, if given) and
// "'llama', 'qwen2', ... and 'smollm3'" (GGUF archs; only those with `flag`): the lists a refusal names.
std::string HfModelTypeNames(bool Family::*flag = nullptr);
std::string GgufArchNames(bool Family::*flag = nullptr);

// Sets the layer's switches of `family` in `c` (its name, activation, norms, QK-norm, embedding scale,
// window period and local RoPE base), leaving the shapes and what a checkpoint says to its reader.
void ApplyFamily(const Family& family, ModelConfig& c);

}  // namespace plumb
