// The family table: one row per family plumb runs (families.h says what each field means).
#include "families.h"

#include <algorithm>
#include <vector>

#include "plumb/core/error.h"

namespace plumb {
namespace {

// llama.cpp's LLM_TYPE_27B of Gemma 2 and Gemma 3, which it names by block count (llama_model::load_hparams)
// and alone scales queries by 1/√(hidden_size / num_heads).
constexpr int kGemma2HiddenPerHeadSizes[] = {46};
constexpr int kGemma3HiddenPerHeadSizes[] = {62};

constexpr Family kFamilies[] = {
    {.name = "llama",
     .hf_model_type = "llama",
     .hf_architecture = "LlamaForCausalLM",
     .gguf_arch = "llama",
     .gguf_experts = true,
     .gguf_window_key = true,
     .gguf_rope_rows = GgufRopeRows::kPermuted,
     .gguf_rope_freqs = true,
     .writes_config_json = true,
     .reads_mlp_bias = true},
    {.name = "mistral",
     .hf_model_type = "mistral",
     .hf_architecture = "MistralForCausalLM",
     .gguf_arch = nullptr,
     .attention_bias = BiasRule::kNever,
     .window = WindowRule::kEveryLayer,
     .writes_config_json = true},
    {.name = "qwen2",
     .hf_model_type = "qwen2",
     .hf_architecture = "Qwen2ForCausalLM",
     .gguf_arch = "qwen2",
     .attention_bias = BiasRule::kAlways,
     .writes_config_json = true},
    {.name = "qwen3",
     .hf_model_type = "qwen3",
     .hf_architecture = "Qwen3ForCausalLM",
     .gguf_arch = "qwen3",
     .qk_norm = true,
     .writes_config_json = true},
    {.name = "qwen3_moe",
     .hf_model_type = "qwen3_moe",
     .hf_architecture = "Qwen3MoeForCausalLM",
     .gguf_arch = "qwen3moe",
     .qk_norm = true,
     .experts = ExpertLayout::kQwen3Moe,
     .gguf_experts = true,
     .writes_config_json = true},
    {.name = "mixtral",
     .hf_model_type = "mixtral",
     .hf_architecture = "MixtralForCausalLM",
     .gguf_arch = nullptr,
     .attention_bias = BiasRule::kNever,
     .window = WindowRule::kEveryLayer,
     .experts = ExpertLayout::kMixtral},
    {.name = "gemma2",
     .hf_model_type = "gemma2",
     .hf_architecture = "Gemma2ForCausalLM",
     .gguf_arch = "gemma2",
     .activation = MlpActivation::kGeluTanh,
     .scale_embedding = true,
     .norm_one_plus_w = true,
     .sandwich_norm = true,
     .attention_bias = BiasRule::kRefused,
     .window = WindowRule::kPeriodic,
     .window_period = 2,
     .default_window = 4096,
     .gguf_default_window = 4096,
     .default_attn_softcap = 50.0f,
     .default_final_softcap = 30.0f,
     .softcaps = true,
     .query_scale = QueryScaleRule::kGemmaQueryPreAttnScalar,
     .hidden_per_head_block_counts = kGemma2HiddenPerHeadSizes,
     .hidden_act_key = "hidden_activation",
     .hidden_act_value = "gelu_pytorch_tanh"},
    {.name = "gemma3",
     .hf_model_type = "gemma3_text",
     .hf_architecture = "Gemma3ForCausalLM",
     .gguf_arch = "gemma3",
     .hf_wrapper_model_type = "gemma3",
     .activation = MlpActivation::kGeluTanh,
     .scale_embedding = true,
     .norm_one_plus_w = true,
     .sandwich_norm = true,
     .qk_norm = true,
     .attention_bias = BiasRule::kRefused,
     .window = WindowRule::kPeriodic,
     .window_period = 6,  // llama.cpp's hparams.set_swa_pattern(6), transformers 4's sliding_window_pattern
     .default_window = 4096,
     .gguf_default_window = 0,
     .local_rope_theta =
         10000.0f,  // llama.cpp's rope_freq_base_train_swa, transformers' rope_local_base_freq
     .softcaps = true,
     .query_scale = QueryScaleRule::kGemmaQueryPreAttnScalar,
     .hidden_per_head_block_counts = kGemma3HiddenPerHeadSizes,
     .rope_per_layer_type = true,
     .gguf_reads_attn_softcap = false,
     .hidden_act_key = "hidden_activation",
     .hidden_act_value = "gelu_pytorch_tanh"},
    {.name = "olmo2",
     .hf_model_type = "olmo2",
     .hf_architecture = "Olmo2ForCausalLM",
     .gguf_arch = "olmo2",
     .pre_norm = false,
     .sandwich_norm = true,
     .qk_norm = true,
     .qk_norm_whole = true,
     .attention_bias = BiasRule::kRefused},
    {.name = "phi3",
     .hf_model_type = "phi3",
     .hf_architecture = "Phi3ForCausalLM",
     .gguf_arch = "phi3",
     .attention_bias = BiasRule::kNever,
     .window = WindowRule::kEveryLayer,
     .partial_rotary = true,
     .longrope = true,
     .fused_projections = true,
     .gguf_window_key = true},
    {.name = "smollm3",
     .hf_model_type = "smollm3",
     .hf_architecture = "SmolLM3ForCausalLM",
     .gguf_arch = "smollm3",
     .nope_layers = true,
     .nope_interval = 4,
     .gguf_rope_rows = GgufRopeRows::kPermuted,
     .reads_mlp_bias = true},
};

template <typename Key>
const Family* FindBy(Key key, const std::string& value) {
  const auto it = std::ranges::find_if(kFamilies, [&](const Family& f) {
    const char* name = f.*key;
    return name != nullptr && value == name;
  });
  return it == std::end(kFamilies) ? nullptr : &*it;
}

}  // namespace

std::span<const Family> Families() {
  return kFamilies;
}

const Family* FindFamilyByName(const std::string& name) {
  return FindBy(&Family::name, name);
}
const Family* FindFamilyByHfModelType(const std::string& model_type) {
  return FindBy(&Family::hf_model_type, model_type);
}
const Family* FindFamilyByGgufArch(const std::string& arch) {
  return FindBy(&Family::gguf_arch, arch);
}

const Family& FamilyOf(const ModelConfig& config) {
  const Family* family = FindFamilyByName(config.model_type.empty() ? "llama" : config.model_type);
  if (family == nullptr) {
    throw MakeError("model_type \"", config.model_type, "\" is not a family plumb runs (", HfModelTypeNames(),
                    ")");
  }
  return *family;
}

const Family& ReadingRulesOf(const ModelConfig& config) {
  const Family* family = FindFamilyByName(config.model_type);
  return family != nullptr ? *family : *FindFamilyByName("llama");
}

const Family* FindFamilyByHfWrapperModelType(const std::string& model_type) {
  return FindBy(&Family::hf_wrapper_model_type, model_type);
}

std::string HfModelTypeNames(bool Family::*flag) {
  std::string names;
  for (const Family& f : kFamilies) {
    if (flag == nullptr || f.*flag) names += (names.empty() ? "" : ", ") + std::string(f.hf_model_type);
  }
  return names;
}

std::string GgufArchNames(bool Family::*flag) {
  std::vector<std::string> archs;
  for (const Family& f : kFamilies) {
    if (f.gguf_arch != nullptr && (flag == nullptr || f.*flag)) archs.emplace_back(f.gguf_arch);
  }
  std::string names;
  for (std::size_t i = 0; i < archs.size(); ++i) {
    names += (i == 0 ? "'" : i + 1 == archs.size() ? " and '" : ", '") + archs[i] + "'";
  }
  return names;
}

void ApplyFamily(const Family& family, ModelConfig& c) {
  c.model_type = family.name;
  c.mlp_activation = family.activation;
  c.scale_embedding = family.scale_embedding;
  c.pre_norm = family.pre_norm;
  c.sandwich_norm = family.sandwich_norm;
  c.qk_norm = family.qk_norm;
  c.qk_norm_whole = family.qk_norm_whole;
}

}  // namespace plumb
