// Model-card and hardware presets, and the estimate (include/plumb/roofline/presets.h; sources:
// docs/roofline.md "Presets").
#include "plumb/roofline/presets.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "plumb/core/error.h"

namespace plumb::roofline {
namespace {

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

struct Card {
  const char* name;
  int hidden, ffn, layers, heads, kv_heads, head_dim, vocab, max_positions;
  bool tied, bias;
  float rope_theta;
  int sliding_window = 0;  // > 0: Gemma 3 (five sliding-window layers to one global, its extra norms, GeGLU)
  // Mixture of experts (experts > 0) and MLA (kv_lora > 0), as ModelConfig names them.
  int experts = 0, experts_per_token = 0, shared_experts = 0, moe_ffn = 0, first_dense = 0;
  int kv_lora = 0, q_lora = 0, rope_dim = 0, nope_dim = 0, v_dim = 0;
  const char* model_type = nullptr;
};

// The config.json of each model's Hugging Face repository (docs/roofline.md "Presets" names them).
constexpr Card kCards[] = {
    {"llama-3-8b", 4096, 14336, 32, 32, 8, 128, 128256, 8192, false, false, 500000.0f},
    {"llama-3-70b", 8192, 28672, 80, 64, 8, 128, 128256, 8192, false, false, 500000.0f},
    {"llama-3.1-8b", 4096, 14336, 32, 32, 8, 128, 128256, 131072, false, false, 500000.0f},
    {"llama-3.2-1b", 2048, 8192, 16, 32, 8, 64, 128256, 131072, true, false, 500000.0f},
    {"llama-3.2-3b", 3072, 8192, 28, 24, 8, 128, 128256, 131072, true, false, 500000.0f},
    {"mistral-7b", 4096, 14336, 32, 32, 8, 128, 32000, 32768, false, false, 10000.0f},
    {"qwen2.5-72b", 8192, 29568, 80, 64, 8, 128, 152064, 32768, false, true, 1000000.0f},
    {"smollm2-135m", 576, 1536, 30, 9, 3, 64, 49152, 8192, true, false, 100000.0f},
    {"gemma-3-270m", 640, 2048, 18, 4, 1, 256, 262144, 32768, true, false, 1000000.0f, 512},
    // head_dim: a query / key head, qk_nope_head_dim + qk_rope_head_dim (MLA caches no per-head keys).
    {"deepseek-v3", 7168, 18432, 61,   128, 128, 192,  129280, 163840, false, false,        10000.0f, 0,
     256,           8,    1,     2048, 3,   512, 1536, 64,     128,    128,   "deepseek_v3"},
    {"mixtral-8x7b", 4096, 14336, 32, 32, 8, 128, 32000,    32768, false, false, 1000000.0f, 0, 8, 2, 0,
     14336,          0,    0,     0,  0,  0, 0,   "mixtral"},
    // Every layer as full attention: the card has no way to say that every other layer of gpt-oss sees a
    // 128-token window (docs/roofline.md says what that overstates).
    {"gpt-oss-20b", 2880, 2880, 24, 64, 8, 64, 201088,   131072, false, true, 150000.0f, 0, 32, 4, 0,
     2880,          0,    0,    0,  0,  0, 0,  "gpt_oss"},
    {"gpt-oss-120b", 2880, 2880, 36, 64, 8, 64, 201088,   131072, false, true, 150000.0f, 0, 128, 4, 0,
     2880,           0,    0,    0,  0,  0, 0,  "gpt_oss"},
};

// The cards whose config.json stretches RoPE to 128K positions with Llama 3.1's rule (rope_scaling
// {rope_type llama3, factor, low_freq_factor 1, high_freq_factor 4, original_max_position_embeddings 8192}).
struct CardRopeScaling {
  const char* name;
  double factor;
};
constexpr CardRopeScaling kLlama3Scaled[] = {
    {"llama-3.1-8b", 8.0}, {"llama-3.2-1b", 32.0}, {"llama-3.2-3b", 32.0}};

struct HardwareSpec {
  const char* name;
  double peak_flops, bandwidth, memory;
  const char* source;
};

constexpr HardwareSpec kHardware[] = {
    {"h100-sxm", 989e12, 3.35e12, 80e9,
     "NVIDIA H100 Tensor Core GPU datasheet (SXM5): 989 TFLOP/s dense FP16/BF16, 3.35 TB/s HBM3, 80 GB"},
    {"h200", 989e12, 4.8e12, 141e9,
     "NVIDIA H200 Tensor Core GPU datasheet (SXM): 989 TFLOP/s dense FP16/BF16, 4.8 TB/s HBM3e, 141 GB"},
    {"b200", 2.25e15, 8e12, 180e9,
     "NVIDIA HGX B200 datasheet, per GPU: 2.25 PFLOP/s dense FP16/BF16 (4.5 sparse), 8 TB/s HBM3e, 180 GB"},
};

// A config.json as a model card: ParseConfigJson's shapes (ConfigPurpose::kShapes: any model_type, and no
// judgement of RoPE scaling, activations or quantization_config, which change the numbers or the storage,
// not the shapes the estimate needs; --dtype says how weights are stored), then the MoE and MLA keys of the
// families ParseConfigJson does not read them for (it reads Qwen3-MoE's, which plumb runs).
ModelConfig CardFromConfigJson(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw MakeError(path, ": cannot open config file");
  std::ostringstream text;
  text << file.rdbuf();
  nlohmann::json root = nlohmann::json::parse(text.str(), nullptr, false);
  if (!root.is_object())
    return ParseConfigJson(text.str(), path, ConfigPurpose::kShapes);  // names the offset
  // A key's integer value, 0 when absent or null (DeepSeek-V2-Lite's q_lora_rank is null).
  auto int_key = [&](std::initializer_list<const char*> keys) {
    for (const char* key : keys) {
      const auto it = root.find(key);
      if (it == root.end() || it->is_null()) continue;
      if (!it->is_number_integer() || it->get<long long>() < 0 || it->get<long long>() > 1 << 30) {
        throw MakeError(path, ": field \"", key, "\" must be a non-negative integer, got ", it->dump());
      }
      return it->get<int>();
    }
    return 0;
  };
  const int experts = int_key({"n_routed_experts", "num_local_experts", "num_experts"});
  const int kv_lora = int_key({"kv_lora_rank"});
  ModelConfig c = ParseConfigJson(text.str(), path, ConfigPurpose::kShapes);
  if (c.IsMoe() || (experts == 0 && kv_lora == 0)) return c;  // a family plumb runs read its own MoE keys
  c.num_experts = experts;
  if (experts > 0) {
    c.experts_per_token = int_key({"num_experts_per_tok"});
    c.num_shared_experts = int_key({"n_shared_experts"});
    c.moe_intermediate_size = int_key({"moe_intermediate_size"});
    if (c.moe_intermediate_size == 0) c.moe_intermediate_size = c.intermediate_size;  // Mixtral's experts
    c.first_dense_layers = int_key({"first_k_dense_replace"});
    if (c.experts_per_token < 1 || c.experts_per_token > experts) {
      throw MakeError(path, ": num_experts_per_tok = ", c.experts_per_token, " must be in [1, ", experts,
                      "]");
    }
  }
  c.kv_lora_rank = kv_lora;
  if (kv_lora > 0) {
    c.q_lora_rank = int_key({"q_lora_rank"});
    c.qk_rope_head_dim = int_key({"qk_rope_head_dim"});
    c.qk_nope_head_dim = int_key({"qk_nope_head_dim"});
    c.v_head_dim = int_key({"v_head_dim"});
    c.head_dim = c.qk_nope_head_dim + c.qk_rope_head_dim;
  }
  return c;
}

}  // namespace

std::vector<std::string> ModelCardNames() {
  std::vector<std::string> names;
  for (const Card& c : kCards) names.emplace_back(c.name);
  return names;
}

ModelConfig ModelCard(std::string_view name_or_path) {
  const std::string name = Lower(name_or_path);
  for (const Card& card : kCards) {
    if (name != card.name) continue;
    ModelConfig c;
    c.model_type = card.bias ? "qwen2" : "llama";
    c.hidden_size = card.hidden;
    c.intermediate_size = card.ffn;
    c.num_layers = card.layers;
    c.num_heads = card.heads;
    c.num_kv_heads = card.kv_heads;
    c.head_dim = card.head_dim;
    c.vocab_size = card.vocab;
    c.max_position_embeddings = card.max_positions;
    c.tie_word_embeddings = card.tied;
    c.attention_bias = card.bias;
    c.rope_theta = card.rope_theta;
    for (const CardRopeScaling& scaled : kLlama3Scaled) {
      if (name != scaled.name) continue;
      SetRopeScaling(c, MetaLlama3RopeScaling(scaled.factor));
    }
    if (card.sliding_window > 0) SetGemma3Architecture(c, card.sliding_window);  // as a gemma3 GGUF reads
    if (card.model_type != nullptr) c.model_type = card.model_type;
    c.num_experts = card.experts;
    c.experts_per_token = card.experts_per_token;
    c.num_shared_experts = card.shared_experts;
    c.moe_intermediate_size = card.moe_ffn;
    c.first_dense_layers = card.first_dense;
    c.kv_lora_rank = card.kv_lora;
    c.q_lora_rank = card.q_lora;
    c.qk_rope_head_dim = card.rope_dim;
    c.qk_nope_head_dim = card.nope_dim;
    c.v_head_dim = card.v_dim;
    return c;
  }
  const std::string path(name_or_path);
  if (std::filesystem::is_directory(path) && std::filesystem::exists(path + "/config.json")) {
    return CardFromConfigJson(path + "/config.json");
  }
  if (std::filesystem::is_regular_file(path)) return CardFromConfigJson(path);
  std::string choices;
  for (const std::string& n : ModelCardNames()) choices += (choices.empty() ? "" : ", ") + n;
  throw MakeError("--model-card: '", name_or_path, "' is neither a preset (", choices,
                  ") nor a config.json file");
}

std::vector<std::string> HardwareNames() {
  std::vector<std::string> names;
  for (const HardwareSpec& h : kHardware) names.emplace_back(h.name);
  names.emplace_back("host");
  return names;
}

Hardware HardwarePreset(std::string_view name) {
  const std::string lower = Lower(name);
  for (const HardwareSpec& h : kHardware) {
    if (lower == h.name || (lower == "h100" && std::string_view(h.name) == "h100-sxm")) {
      return {h.name, h.peak_flops, h.bandwidth, h.memory, h.source};
    }
  }
  std::string choices;
  for (const std::string& n : HardwareNames()) choices += (choices.empty() ? "" : ", ") + n;
  throw MakeError("--hardware: unknown hardware '", name, "' (choices: ", choices, ")");
}

Estimate MakeEstimate(const EstimateSettings& s) {
  const Hardware& hw = s.hardware;
  if (s.tp < 1) throw MakeError("--tp must be at least 1, got ", s.tp);
  if (s.batches.empty() || s.contexts.empty()) throw MakeError("estimate: no batch or no context given");
  if (!(hw.peak_flops > 0) || !(hw.bandwidth > 0) || !(hw.memory_bytes > 0)) {
    throw MakeError("estimate: hardware '", hw.name, "' needs a positive peak, bandwidth and memory");
  }
  const ModelConfig& c = s.config;
  const WeightBytes weights = WeightBytesFor(c, s.dtype, s.vector_bytes);
  const CostOptions options{s.kv_element_bytes, 2};  // activations as 16-bit on a GPU
  // tp devices split every matrix, the KV heads and the work: one device of tp× the figures.
  const Roof roof{hw.peak_flops * s.tp, hw.bandwidth * s.tp};
  Estimate e;
  e.parameters = ParameterCount(c);
  e.active_parameters = ActiveParameterCount(c);
  e.weight_bytes = weights.Stored();
  e.bytes_per_parameter = s.dtype.BytesPerParameter();
  e.kv_bytes_per_token = KvBytesPerToken(c, s.kv_element_bytes);
  e.ridge = hw.peak_flops / hw.bandwidth;
  e.batch1_intensity = 2.0 / e.bytes_per_parameter;
  e.memory_bytes = hw.memory_bytes * s.tp * s.memory_utilization;
  for (int context : s.contexts) {
    ContextEstimate ce;
    ce.context = context;
    ce.kv_bytes_per_sequence = e.kv_bytes_per_token * context;
    const PassCost prefill = PrefillCost(c, weights, options, context);
    ce.prefill_flops = prefill.Flops();
    ce.prefill_seconds = roof.Seconds(prefill.Flops(), prefill.Bytes());
    ce.compute_bound_batch = ComputeBoundBatch(c, weights, options, context, roof);
    const double free_bytes = e.memory_bytes - e.weight_bytes;
    ce.max_sequences =
        free_bytes > 0 ? static_cast<long long>(std::floor(free_bytes / ce.kv_bytes_per_sequence)) : 0;
    e.contexts.push_back(ce);
    for (int batch : s.batches) {
      const PassCost step = DecodeStepCost(c, weights, options, batch, context);
      EstimateRow r;
      r.batch = batch;
      r.context = context;
      r.step_bytes = step.Bytes();
      r.step_flops = step.Flops();
      r.step_seconds = roof.Seconds(r.step_flops, r.step_bytes);
      r.compute_bound = roof.ComputeBound(r.step_flops, r.step_bytes);
      r.tokens_per_second = batch / r.step_seconds;
      r.kv_bytes = ce.kv_bytes_per_sequence * batch;
      r.fits = e.weight_bytes + r.kv_bytes <= e.memory_bytes;
      e.rows.push_back(r);
    }
  }
  return e;
}

}  // namespace plumb::roofline
