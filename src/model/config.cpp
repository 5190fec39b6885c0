// config.json → ModelConfig. Field names are those of Hugging Face's LlamaConfig / Qwen2Config.
#include "plumb/model/config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "families.h"
#include "json_fields.h"
#include "plumb/core/error.h"

namespace plumb {
namespace {

using nlohmann::json;
using namespace config_json;

// config.json "quantization_config" of a packed checkpoint (docs/formats.md "Packed checkpoints"). Strict:
// an unknown key or method is an error, since a checkpoint quantized some other way would load as garbage.
WeightPacking ParseQuantizationConfig(const json& q, const std::string& source) {
  const std::string where = source + ": quantization_config";
  if (!q.is_object()) throw MakeError(where, " must be an object, got ", q.dump());
  auto string_field = [&](const char* key) -> std::string {
    const json* value = Find(q, key);
    if (value == nullptr) throw MakeError(where, ".", key, " is missing");
    if (!value->is_string()) throw MakeError(where, ".", key, " must be a string, got ", value->dump());
    return value->get<std::string>();
  };
  const std::string method = string_field("quant_method");
  if (method != "plumb") {
    throw MakeError(
        where, ".quant_method = \"", method,
        "\" is not supported (plumb reads the packed checkpoints it writes, quant_method \"plumb\")");
  }
  const std::string name = string_field("format");
  const std::optional<PackFormat> format = ParsePackFormat(name);
  if (!format || !format->IsQuantized()) {
    std::string valid;
    for (const std::string& n : PackFormatNames()) {
      if (ParsePackFormat(n)->IsQuantized()) valid += (valid.empty() ? "" : ", ") + n;
    }
    throw MakeError(where, ".format = \"", name, "\" is not a packed format (", valid, ")");
  }
  WeightPacking packing{*format, true};
  const std::string embedding = string_field("embedding");
  if (embedding != "packed" && embedding != "f16") {
    throw MakeError(where, ".embedding = \"", embedding, "\": expected \"packed\" or \"f16\"");
  }
  packing.embedding_packed = embedding == "packed";
  std::vector<std::string> known = {"quant_method", "format", "embedding"};
  if (format->kind == PackKind::kFp8) {
    const std::string scale = string_field("weight_scale");
    if (scale != "channel" && scale != "tensor") {
      throw MakeError(where, ".weight_scale = \"", scale, "\": expected \"channel\" or \"tensor\"");
    }
    packing.format.fp8_per_row = scale == "channel";
    known.push_back("weight_scale");
  } else if (format->kind == PackKind::kInt4) {
    // Said again in the keys other tools look for; they must agree with "format".
    if (RequireInt(q, "group_size", where) != format->int4.group_size) {
      throw MakeError(where, ".group_size = ", q["group_size"].dump(), " contradicts format \"", name, "\"");
    }
    if (RequireInt(q, "bits", where) != 4) {
      throw MakeError(where, ".bits = ", q["bits"].dump(), " contradicts format \"", name, "\"");
    }
    if (string_field("scheme") != Int4SchemeName(format->int4.scheme)) {
      throw MakeError(where, ".scheme = ", q["scheme"].dump(), " contradicts format \"", name, "\"");
    }
    known.insert(known.end(), {"group_size", "bits", "scheme"});
  }
  for (const auto& item : q.items()) {
    if (std::find(known.begin(), known.end(), item.key()) == known.end()) {
      throw MakeError(where, ".", item.key(), " is not a field plumb knows for format \"", name, "\"");
    }
  }
  return packing;
}

// A string field that must hold `expected` when present (hidden_act "silu"): transformers' model of the
// family computes something else for any other value.
void RequireValue(const json& root, const char* key, const json& expected, const std::string& source,
                  const char* why) {
  const json* value = Find(root, key);
  if (value != nullptr && *value != expected) {
    throw MakeError(source, ": ", key, " = ", value->dump(), " is not supported (", why, ")");
  }
}

// Which layers attend through a sliding window (the family's WindowRule). kEveryLayer (Mistral, Mixtral,
// Phi-3) applies config.json's sliding_window to every layer; kPeriodic (Gemma 2 and 3) to the layers
// transformers 5's layer_types calls "sliding_attention" (or, without that list, transformers 4's rule: every
// layer but each sliding_window_pattern-th), which plumb runs as a period (ModelConfig::IsLocalLayer); kNone
// attends to every earlier position, refuses Qwen's optional window, and its layer_types, if given, must say
// so.
void ReadSlidingWindow(const json& root, const std::string& source, bool run, const Family& family,
                       ModelConfig& c) {
  const bool periodic = family.window == WindowRule::kPeriodic;
  if (periodic && !root.contains("sliding_window")) c.sliding_window = family.default_window;
  if (family.window != WindowRule::kNone) {
    if (Find(root, "sliding_window") != nullptr) {
      c.sliding_window = RequireInt(root, "sliding_window", source);
      if (c.sliding_window == 0) throw MakeError(source, ": sliding_window = 0 leaves nothing to attend to");
    }
  }
  if (periodic && c.sliding_window > 0) {
    c.sliding_window_pattern = family.window_period;
    for (const char* key : {"sliding_window_pattern", "_sliding_window_pattern"}) {
      if (Find(root, key) != nullptr) c.sliding_window_pattern = RequireInt(root, key, source);
    }
  }
  if (!run) return;
  if (family.window == WindowRule::kNone && OptionalBool(root, "use_sliding_window", false, source)) {
    // Qwen's window covers the layers from max_window_layers on only: a layout plumb does not run.
    throw MakeError(source, ": use_sliding_window = true (a window on some layers) is not supported for ",
                    c.model_type);
  }
  const json* types = Find(root, "layer_types");
  if (types == nullptr) return;
  if (!types->is_array() || types->size() != static_cast<std::size_t>(c.num_layers)) {
    throw MakeError(source, ": layer_types must list the ", c.num_layers, " layers, got ", types->dump());
  }
  if (periodic && c.sliding_window > 0) {
    // The period p with layer i full exactly when (i + 1) is a multiple of p (0: no full layer).
    c.sliding_window_pattern = 0;
    for (std::size_t i = 0; i < types->size(); ++i) {
      if ((*types)[i] == "full_attention") {
        c.sliding_window_pattern = static_cast<int>(i) + 1;
        break;
      }
    }
  }
  for (std::size_t i = 0; i < types->size(); ++i) {
    const int layer = static_cast<int>(i);
    const std::string want = c.IsLocalLayer(layer) ? "sliding_attention" : "full_attention";
    if ((*types)[i] != want) {
      throw MakeError(
          source, ": layer_types[", i, "] = ", (*types)[i].dump(), ": plumb runs ", c.model_type, " layer ",
          i, " as \"", want, "\" (sliding_window = ", c.sliding_window,
          periodic ? ", a full layer every " + std::to_string(c.sliding_window_pattern) : std::string(),
          "); a layout that is not periodic is not supported");
    }
  }
}

// The query scale and the soft-caps of a family whose transformers model reads them (Gemma 2 and 3):
// query_pre_attn_scalar, attn_logit_softcapping and final_logit_softcapping, with the family's defaults
// where a key is absent; null switches a cap off.
void ReadQueryScaleAndSoftcaps(const json& root, const std::string& source, const Family& family,
                               ModelConfig& c) {
  if (family.query_scale == QueryScaleRule::kGemmaQueryPreAttnScalar) {
    const float query_pre_attn_scalar = OptionalFloat(root, "query_pre_attn_scalar", 256.0f, source);
    if (!(query_pre_attn_scalar > 0.0f)) {
      throw MakeError(source, ": query_pre_attn_scalar = ", query_pre_attn_scalar, " must be positive");
    }
    // transformers: scaling = query_pre_attn_scalar ** -0.5 (a Python float), applied to FP32 scores.
    c.attention_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(query_pre_attn_scalar)));
  }
  if (!family.softcaps) return;
  c.attn_logit_softcap = root.contains("attn_logit_softcapping")
                             ? OptionalFloat(root, "attn_logit_softcapping", 0.0f, source)
                             : family.default_attn_softcap;
  c.final_logit_softcap = root.contains("final_logit_softcapping")
                              ? OptionalFloat(root, "final_logit_softcapping", 0.0f, source)
                              : family.default_final_softcap;
  for (const float cap : {c.attn_logit_softcap, c.final_logit_softcap}) {
    if (cap < 0.0f) throw MakeError(source, ": a soft-capping of ", cap, " must not be negative");
  }
}

// Whether the Q/K/V projections carry biases, by the family's BiasRule.
void ReadAttentionBias(const json& root, const std::string& source, bool run, const Family& family,
                       ModelConfig& c) {
  switch (family.attention_bias) {
    case BiasRule::kFromConfig:
      c.attention_bias = OptionalBool(root, "attention_bias", false, source);
      break;
    case BiasRule::kAlways:
      c.attention_bias = true;
      break;
    case BiasRule::kNever:
      c.attention_bias = false;
      break;
    case BiasRule::kRefused:
      // Its transformers model (Gemma's, Olmo2Attention) would give o_proj a bias too: not plumb's.
      if (run) {
        RequireValue(root, "attention_bias", false, source,
                     ("plumb's " + std::string(family.name) + " projections have no biases").c_str());
      }
      c.attention_bias = false;
      break;
  }
}

// NoPE layers (SmolLM3): no_rope_layers[i] = 0 marks a layer without RoPE (1: RoPE); without the list, every
// no_rope_layer_interval-th layer (the family's default interval, transformers' 4).
void ReadNopeLayers(const json& root, const std::string& source, const Family& family, ModelConfig& c) {
  const json* list = Find(root, "no_rope_layers");
  if (list == nullptr) {
    const int interval = OptionalInt(root, "no_rope_layer_interval", family.nope_interval, source);
    if (interval <= 0) throw MakeError(source, ": no_rope_layer_interval = ", interval, " must be positive");
    for (int layer = 0; layer < c.num_layers; ++layer) {
      if ((layer + 1) % interval == 0) c.nope_layers.push_back(layer);
    }
    return;
  }
  if (!list->is_array() || list->size() != static_cast<std::size_t>(c.num_layers)) {
    throw MakeError(source, ": no_rope_layers must hold a 0 or 1 for each of the ", c.num_layers,
                    " layers, got ", list->dump());
  }
  for (std::size_t i = 0; i < list->size(); ++i) {
    if ((*list)[i] != 0 && (*list)[i] != 1) {
      throw MakeError(source, ": no_rope_layers[", i, "] = ", (*list)[i].dump(), " must be 0 or 1");
    }
    if ((*list)[i] == 0) c.nope_layers.push_back(static_cast<int>(i));
  }
}

// The expert counts both MoE families read; count_key is the key c.num_experts came from.
void CheckExpertCounts(const ModelConfig& c, const char* count_key, const std::string& source) {
  if (c.num_experts <= 0) throw MakeError(source, ": ", count_key, " = ", c.num_experts, " must be positive");
  if (c.experts_per_token < 1 || c.experts_per_token > c.num_experts) {
    throw MakeError(source, ": num_experts_per_tok = ", c.experts_per_token, " must be in [1, ",
                    c.num_experts, "]");
  }
}

// Mixtral: every layer a mixture of num_local_experts SwiGLU experts of intermediate_size, the top
// num_experts_per_tok of a softmax over all, renormalized (transformers' MixtralTopKRouter).
void ReadMixtral(const json& root, const std::string& source, ModelConfig& c) {
  c.num_experts = RequireInt(root, "num_local_experts", source);
  c.experts_per_token = RequireInt(root, "num_experts_per_tok", source);
  c.moe_intermediate_size = c.intermediate_size;
  c.moe_routing = MoeRouting::kSoftmaxTopK;
  c.moe_renormalize = true;
  CheckExpertCounts(c, "num_local_experts", source);
}

// Qwen3-MoE's experts (transformers' Qwen3MoeConfig; its defaults where a key is absent, except the shapes,
// which must be given). Which layers are MoE: docs/models.md "Qwen3-MoE".
void ReadQwen3Moe(const json& root, const std::string& source, ModelConfig& c) {
  // The hub's configs say num_experts; transformers 5 writes its alias num_local_experts (attribute_map).
  const bool hub = Find(root, "num_experts") != nullptr, alias = Find(root, "num_local_experts") != nullptr;
  c.num_experts = RequireInt(root, hub || !alias ? "num_experts" : "num_local_experts", source);
  if (hub && alias) {
    const int local = RequireInt(root, "num_local_experts", source);
    if (local != c.num_experts) {
      throw MakeError(source, ": num_experts = ", c.num_experts, " and num_local_experts = ", local,
                      " disagree (transformers reads them as one)");
    }
  }
  c.experts_per_token = RequireInt(root, "num_experts_per_tok", source);
  c.moe_intermediate_size = RequireInt(root, "moe_intermediate_size", source);
  c.moe_routing = MoeRouting::kSoftmaxTopK;
  c.moe_renormalize = OptionalBool(root, "norm_topk_prob", false, source);
  c.moe_layer_step = OptionalInt(root, "decoder_sparse_step", 1, source);
  if (const json* dense = Find(root, "mlp_only_layers"); dense != nullptr && !dense->is_null()) {
    if (!dense->is_array()) {
      throw MakeError(source, ": mlp_only_layers must be a list of layer indices, got ", dense->dump());
    }
    for (std::size_t i = 0; i < dense->size(); ++i) {
      const json& layer = (*dense)[i];
      if (!layer.is_number_integer() || layer.get<long long>() < 0 ||
          layer.get<long long>() >= c.num_layers) {
        throw MakeError(source, ": mlp_only_layers[", i, "] = ", layer.dump(), " is not a layer in [0, ",
                        c.num_layers, ")");
      }
      c.mlp_only_layers.push_back(layer.get<int>());
    }
  }
  CheckExpertCounts(c, "num_experts", source);
  if (c.moe_intermediate_size <= 0) {
    throw MakeError(source, ": moe_intermediate_size = ", c.moe_intermediate_size, " must be positive");
  }
  if (c.moe_layer_step <= 0) {
    throw MakeError(source, ": decoder_sparse_step = ", c.moe_layer_step, " must be positive");
  }
}

}  // namespace

ModelConfig ParseConfigJson(const std::string& json_text, const std::string& source, ConfigPurpose purpose) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::parse_error& e) {
    throw MakeError(source, ": invalid JSON at byte ", e.byte, ": ", e.what());
  } catch (const json::out_of_range& e) {  // a number beyond double's range, e.g. 1e400 (nlohmann's 406)
    throw MakeError(source, ": invalid JSON: ", e.what());
  }
  if (!root.is_object()) throw MakeError(source, ": expected a JSON object at the top level");

  const bool run = purpose == ConfigPurpose::kRun;
  ModelConfig c;
  const json* type = Find(root, "model_type");
  if (type != nullptr && !type->is_string()) {
    throw MakeError(source, ": field \"model_type\" must be a string, got ", type->dump());
  }
  const std::string model_type = type != nullptr ? type->get<std::string>() : "";
  const Family* family = FindFamilyByHfModelType(model_type);
  if (run && family == nullptr) {
    const Family* wrapped = FindFamilyByHfWrapperModelType(model_type);
    const std::string hint = wrapped != nullptr
                                 ? "; a multimodal " + model_type +
                                       " checkpoint's text model is model_type " + wrapped->hf_model_type
                                 : "";
    throw MakeError(source, ": model_type ", type != nullptr ? type->dump() : std::string("is missing and"),
                    " is not a family plumb runs from a Hugging Face checkpoint (", HfModelTypeNames(), hint,
                    "; docs/models.md \"What plumb refuses\")");
  }
  // A model card's config (kShapes) of a family plumb does not run keeps its model_type and reads as a
  // Llama's.
  const Family& rules = family != nullptr ? *family : *FindFamilyByName("llama");
  ApplyFamily(rules, c);
  if (family == nullptr) c.model_type = model_type;
  if (run) {
    // The class transformers would build: another head (sequence classification, ...) is other math.
    if (const json* classes = Find(root, "architectures"); classes != nullptr) {
      if (!classes->is_array() || classes->size() != 1 || (*classes)[0] != family->hf_architecture) {
        throw MakeError(source, ": architectures = ", classes->dump(), ": plumb runs [\"",
                        family->hf_architecture, "\"] for model_type \"", family->hf_model_type, "\"");
      }
    }
    RequireValue(root, family->hidden_act_key, family->hidden_act_value, source,
                 family->activation == MlpActivation::kSilu ? "plumb's MLP is SwiGLU, silu(gate) * up"
                                                            : "plumb's GeGLU MLP is GELU's tanh form");
    if (family->reads_mlp_bias) {
      RequireValue(root, "mlp_bias", false, source, "plumb's MLP projections have no biases");
    }
    RequireValue(root, "use_bidirectional_attention", false, source, "plumb's attention is causal");
  }
  c.hidden_size = RequireInt(root, "hidden_size", source);
  c.intermediate_size = RequireInt(root, "intermediate_size", source);
  c.num_layers = RequireInt(root, "num_hidden_layers", source);
  c.num_heads = RequireInt(root, "num_attention_heads", source);
  c.num_kv_heads = OptionalInt(root, "num_key_value_heads", c.num_heads, source);
  c.head_dim = c.num_heads > 0 ? OptionalInt(root, "head_dim", c.hidden_size / c.num_heads, source) : 0;
  c.rms_norm_eps = OptionalFloat(root, "rms_norm_eps", 1e-6f, source);
  c.max_position_embeddings = RequireInt(root, "max_position_embeddings", source);  // LongRoPE's factor
  ReadRope(root, source, purpose, c);
  c.vocab_size = RequireInt(root, "vocab_size", source);
  c.tie_word_embeddings = OptionalBool(root, "tie_word_embeddings", false, source);
  ReadAttentionBias(root, source, run, rules, c);
  ReadSlidingWindow(root, source, run, rules, c);
  if (rules.experts == ExpertLayout::kQwen3Moe) ReadQwen3Moe(root, source, c);
  if (rules.experts == ExpertLayout::kMixtral) ReadMixtral(root, source, c);
  ReadQueryScaleAndSoftcaps(root, source, rules, c);
  if (rules.nope_layers) ReadNopeLayers(root, source, rules, c);
  c.bos_token_id = OptionalInt(root, "bos_token_id", -1, source);
  if (const json* eos = Find(root, "eos_token_id"); eos != nullptr) {
    if (eos->is_array()) {
      for (std::size_t i = 0; i < eos->size(); ++i) {
        const json& id = (*eos)[i];
        if (!id.is_number_integer() || id.get<long long>() < 0) {
          throw MakeError(source, ": eos_token_id[", i, "] must be a non-negative integer, got ", id.dump());
        }
        c.eos_token_ids.push_back(id.get<int>());
      }
    } else {
      c.eos_token_ids.push_back(RequireInt(root, "eos_token_id", source));
    }
  }
  if (const json* q = Find(root, "quantization_config"); q != nullptr && run) {
    c.packing = ParseQuantizationConfig(*q, source);
  }
  ValidateConfig(c, source);
  return c;
}

void SetGemma3Architecture(ModelConfig& c, int sliding_window) {
  const Family& gemma3 = *FindFamilyByName("gemma3");
  ApplyFamily(gemma3, c);
  if (sliding_window > 0) {
    c.sliding_window = sliding_window;
    c.sliding_window_pattern = gemma3.window_period;
    c.rope_theta_local = gemma3.local_rope_theta;
  }
}

void ValidateConfig(const ModelConfig& c, const std::string& source) {
  auto require_positive = [&](int value, const char* field) {
    if (value <= 0) throw MakeError(source, ": field \"", field, "\" must be positive, got ", value);
  };
  require_positive(c.hidden_size, "hidden_size");
  require_positive(c.intermediate_size, "intermediate_size");
  require_positive(c.num_layers, "num_hidden_layers");
  require_positive(c.num_heads, "num_attention_heads");
  require_positive(c.num_kv_heads, "num_key_value_heads");
  require_positive(c.head_dim, "head_dim");
  require_positive(c.vocab_size, "vocab_size");
  require_positive(c.max_position_embeddings, "max_position_embeddings");
  if (c.num_heads % c.num_kv_heads != 0) {
    throw MakeError(source, ": num_key_value_heads = ", c.num_kv_heads,
                    " does not divide num_attention_heads = ", c.num_heads);
  }
  if (c.head_dim % 2 != 0) throw MakeError(source, ": head_dim = ", c.head_dim, " must be even for RoPE");
  if (!(c.rms_norm_eps > 0.0f))
    throw MakeError(source, ": rms_norm_eps = ", c.rms_norm_eps, " must be positive");
  if (!(c.rope_theta > 0.0f)) throw MakeError(source, ": rope_theta = ", c.rope_theta, " must be positive");
  if (!c.rope_freq_factors.empty()) {
    if (c.rope_freq_factors.size() != static_cast<std::size_t>(c.RotaryDim() / 2)) {
      throw MakeError(source, ": ", c.rope_freq_factors.size(), " RoPE frequency factors for ", c.RotaryDim(),
                      " rotated dims (one per rotated pair: ", c.RotaryDim() / 2, ")");
    }
    for (std::size_t i = 0; i < c.rope_freq_factors.size(); ++i) {
      const float f = c.rope_freq_factors[i];
      if (!(f > 0.0f) || !std::isfinite(f)) {
        throw MakeError(source, ": RoPE frequency factor ", i, " = ", f, " must be a positive number");
      }
    }
  }
  if (!c.rope_long_freq_factors.empty() && c.rope_long_freq_factors.size() != c.rope_freq_factors.size()) {
    throw MakeError(source, ": ", c.rope_long_freq_factors.size(), " long RoPE factors for ",
                    c.rope_freq_factors.size(), " short ones");
  }
  if (c.bos_token_id >= c.vocab_size) {
    throw MakeError(source, ": bos_token_id = ", c.bos_token_id, " is not below vocab_size = ", c.vocab_size);
  }
  for (int eos : c.eos_token_ids) {
    if (eos >= c.vocab_size) {
      throw MakeError(source, ": eos_token_id = ", eos, " is not below vocab_size = ", c.vocab_size);
    }
  }
}

ModelConfig LoadConfigJson(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw MakeError(path, ": cannot open config file");
  std::ostringstream text;
  text << file.rdbuf();
  return ParseConfigJson(text.str(), path);
}

}  // namespace plumb

namespace plumb {
namespace {

// The shortest decimal that reads back as `value` (1e-05, not the double 9.999999747378752e-06).
nlohmann::json ShortestJson(float value) {
  char text[32];
  const auto result = std::to_chars(text, text + sizeof text, value);
  return nlohmann::json(std::strtod(std::string(text, result.ptr).c_str(), nullptr));
}

}  // namespace

std::string ConfigToJson(const ModelConfig& c) {
  // The families whose config.json this writes in full; the others have keys of their own it does not
  // write yet (docs/models.md).
  const Family* family = FindFamilyByName(c.model_type.empty() ? "llama" : c.model_type);
  if (family == nullptr || !family->writes_config_json) {
    throw MakeError("config.json: model_type \"", c.model_type,
                    "\" has no Hugging Face checkpoint form in plumb (",
                    HfModelTypeNames(&Family::writes_config_json), ")");
  }
  json root = {
      {"architectures", json::array({family->hf_architecture})},
      {"model_type", family->hf_model_type},
      {"hidden_act", "silu"},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_layers},
      {"num_attention_heads", c.num_heads},
      {"num_key_value_heads", c.num_kv_heads},
      {"head_dim", c.head_dim},
      {"rms_norm_eps", ShortestJson(c.rms_norm_eps)},
      {"rope_theta", ShortestJson(c.rope_theta)},
      {"vocab_size", c.vocab_size},
      {"max_position_embeddings", c.max_position_embeddings},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"attention_bias", c.attention_bias},
  };
  // RoPE in transformers 4's spelling (top-level rope_theta, rope_scaling), which 4 and 5 both read.
  if (c.rope_scaling.type == RopeScalingType::kLinear) {
    root["rope_scaling"] = {{"rope_type", "linear"}, {"factor", c.rope_scaling.factor}};
  } else if (c.rope_scaling.type == RopeScalingType::kLlama3) {
    const RopeScaling& s = c.rope_scaling;
    root["rope_scaling"] = {{"rope_type", "llama3"},
                            {"factor", s.factor},
                            {"low_freq_factor", s.low_freq_factor},
                            {"high_freq_factor", s.high_freq_factor},
                            {"original_max_position_embeddings", s.original_max_position_embeddings}};
  } else if (!c.rope_freq_factors.empty()) {
    throw MakeError(
        "config.json: RoPE frequency factors given per pair (a GGUF's rope_freqs.weight) have no "
        "config.json spelling; pack the Hugging Face checkpoint instead");
  }
  if (family->window == WindowRule::kEveryLayer && c.sliding_window > 0) {
    root["sliding_window"] = c.sliding_window;
  }
  if (family->experts == ExpertLayout::kQwen3Moe) {
    root["num_experts"] = c.num_experts;
    root["num_experts_per_tok"] = c.experts_per_token;
    root["moe_intermediate_size"] = c.moe_intermediate_size;
    root["norm_topk_prob"] = c.moe_renormalize;
    root["decoder_sparse_step"] = c.moe_layer_step;
    root["mlp_only_layers"] = c.mlp_only_layers;
  }
  if (c.bos_token_id >= 0) root["bos_token_id"] = c.bos_token_id;
  if (c.eos_token_ids.size() == 1) root["eos_token_id"] = c.eos_token_ids[0];
  if (c.eos_token_ids.size() > 1) root["eos_token_id"] = c.eos_token_ids;
  if (c.packing) {
    const PackFormat& f = c.packing->format;
    json q = {{"quant_method", "plumb"},
              {"format", f.Name()},
              {"embedding", c.packing->embedding_packed ? "packed" : "f16"}};
    if (f.kind == PackKind::kFp8) q["weight_scale"] = f.fp8_per_row ? "channel" : "tensor";
    if (f.kind == PackKind::kInt4) {
      q["bits"] = 4;
      q["group_size"] = f.int4.group_size;
      q["scheme"] = Int4SchemeName(f.int4.scheme);
    }
    root["quantization_config"] = q;
  }
  return root.dump(2) + "\n";
}

}  // namespace plumb
