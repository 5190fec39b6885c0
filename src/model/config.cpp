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

#include "plumb/core/error.h"

namespace plumb {
namespace {

using nlohmann::json;

const json* Find(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

int RequireInt(const json& object, const char* key, const std::string& source) {
  const json* value = Find(object, key);
  if (value == nullptr) throw MakeError(source, ": missing required field \"", key, "\"");
  if (!value->is_number_integer())
    throw MakeError(source, ": field \"", key, "\" must be an integer, got ", value->dump());
  // (An unsigned value above INT64_MAX read as long long would wrap to a negative number.)
  const auto number = value->is_number_unsigned()
                          ? static_cast<long long>(std::min<unsigned long long>(
                                value->get<unsigned long long>(), std::numeric_limits<long long>::max()))
                          : value->get<long long>();
  if (number < 0 || number > std::numeric_limits<int>::max()) {
    throw MakeError(source, ": field \"", key, "\" = ", value->dump(), " is out of range");
  }
  return static_cast<int>(number);
}

int OptionalInt(const json& object, const char* key, int fallback, const std::string& source) {
  return Find(object, key) ? RequireInt(object, key, source) : fallback;
}

float OptionalFloat(const json& object, const char* key, float fallback, const std::string& source) {
  const json* value = Find(object, key);
  if (value == nullptr) return fallback;
  if (!value->is_number())
    throw MakeError(source, ": field \"", key, "\" must be a number, got ", value->dump());
  // A double beyond float's range has no float value (converting it is undefined behaviour).
  const double number = value->get<double>();
  if (!(std::abs(number) <= std::numeric_limits<float>::max()))
    throw MakeError(source, ": field \"", key, "\" = ", value->dump(), " is beyond float's range");
  return static_cast<float>(number);
}

bool OptionalBool(const json& object, const char* key, bool fallback, const std::string& source) {
  const json* value = Find(object, key);
  if (value == nullptr) return fallback;
  if (!value->is_boolean())
    throw MakeError(source, ": field \"", key, "\" must be true or false, got ", value->dump());
  return value->get<bool>();
}

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
  } else {
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

}  // namespace

ModelConfig ParseConfigJson(const std::string& json_text, const std::string& source) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::parse_error& e) {
    throw MakeError(source, ": invalid JSON at byte ", e.byte, ": ", e.what());
  } catch (const json::out_of_range& e) {  // a number beyond double's range, e.g. 1e400 (nlohmann's 406)
    throw MakeError(source, ": invalid JSON: ", e.what());
  }
  if (!root.is_object()) throw MakeError(source, ": expected a JSON object at the top level");

  ModelConfig c;
  if (const json* type = Find(root, "model_type"); type != nullptr && type->is_string()) {
    c.model_type = type->get<std::string>();
  }
  if (c.model_type.starts_with("gemma")) {
    throw MakeError(source, ": model_type \"", c.model_type,
                    "\": plumb runs Gemma 3 from a GGUF file (its Hugging Face checkpoints not yet)");
  }
  c.hidden_size = RequireInt(root, "hidden_size", source);
  c.intermediate_size = RequireInt(root, "intermediate_size", source);
  c.num_layers = RequireInt(root, "num_hidden_layers", source);
  c.num_heads = RequireInt(root, "num_attention_heads", source);
  c.num_kv_heads = OptionalInt(root, "num_key_value_heads", c.num_heads, source);
  c.head_dim = c.num_heads > 0 ? OptionalInt(root, "head_dim", c.hidden_size / c.num_heads, source) : 0;
  c.rms_norm_eps = OptionalFloat(root, "rms_norm_eps", 1e-6f, source);
  c.rope_theta = OptionalFloat(root, "rope_theta", 10000.0f, source);
  c.vocab_size = RequireInt(root, "vocab_size", source);
  c.max_position_embeddings = RequireInt(root, "max_position_embeddings", source);
  c.tie_word_embeddings = OptionalBool(root, "tie_word_embeddings", false, source);
  // Qwen2 has Q/K/V biases without saying so in config.json; Llama may say attention_bias.
  c.attention_bias = OptionalBool(root, "attention_bias", c.model_type == "qwen2", source);
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
  if (const json* scaling = Find(root, "rope_scaling"); scaling != nullptr) {
    // Llama-3.1-style frequency scaling changes RoPE's numerics; refusing beats being silently wrong.
    throw MakeError(source, ": rope_scaling ", scaling->dump(), " is not supported yet");
  }
  if (const json* q = Find(root, "quantization_config"); q != nullptr) {
    c.packing = ParseQuantizationConfig(*q, source);
  }
  ValidateConfig(c, source);
  return c;
}

void SetGemma3Architecture(ModelConfig& c, int sliding_window) {
  c.model_type = "gemma3";
  c.mlp_activation = MlpActivation::kGeluTanh;
  c.scale_embedding = c.qk_norm = c.sandwich_norm = true;
  if (sliding_window > 0) {
    c.sliding_window = sliding_window;
    c.sliding_window_pattern = 6;   // llama.cpp hparams.set_swa_pattern(6)
    c.rope_theta_local = 10000.0f;  // llama.cpp rope_freq_base_train_swa
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
  json root = {
      {"architectures", json::array({c.model_type == "qwen2" ? "Qwen2ForCausalLM" : "LlamaForCausalLM"})},
      {"model_type", c.model_type.empty() ? "llama" : c.model_type},
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
