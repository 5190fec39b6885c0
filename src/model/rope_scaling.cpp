// RoPE scaling: config.json's two spellings read into ModelConfig (config_json::ReadRope), and Llama 3.1's
// per-pair frequency divisors (Llama3RopeFreqFactors). docs/models.md "RoPE scaling".
#include <algorithm>
#include <cmath>
#include <numbers>
#include <sstream>
#include <string>
#include <vector>

#include "families.h"
#include "json_fields.h"
#include "plumb/core/error.h"
#include "plumb/model/config.h"

namespace plumb {

std::vector<float> Llama3RopeFreqFactors(const RopeScaling& s, float theta, int head_dim) {
  const double original = s.original_max_position_embeddings;
  const double low_freq_wavelen = original / s.low_freq_factor;
  const double high_freq_wavelen = original / s.high_freq_factor;
  std::vector<float> factors(static_cast<std::size_t>(head_dim / 2));
  for (int i = 0; i < head_dim / 2; ++i) {
    const double inv_freq = std::pow(static_cast<double>(theta), -2.0 * i / head_dim);
    const double wavelen = 2.0 * std::numbers::pi / inv_freq;
    double f = 1.0;
    if (wavelen > low_freq_wavelen) {
      f = s.factor;
    } else if (!(wavelen < high_freq_wavelen)) {
      const double smooth =
          (original / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      f = 1.0 / ((1.0 - smooth) / s.factor + smooth);
    }
    factors[static_cast<std::size_t>(i)] = static_cast<float>(f);
  }
  return factors;
}

RopeScaling MetaLlama3RopeScaling(double factor) {
  return {RopeScalingType::kLlama3, factor, 1.0, 4.0, 8192};
}

void SetRopeScaling(ModelConfig& c, const RopeScaling& scaling) {
  if (scaling.type == RopeScalingType::kFactors) {
    throw MakeError("internal: per-pair RoPE factors have no rule to derive them from");
  }
  c.rope_scaling = scaling;
  c.rope_freq_factors.clear();
  c.rope_long_freq_factors.clear();
  c.rope_attention_factor = 1.0f;
  if (scaling.type == RopeScalingType::kLinear) {
    c.rope_freq_factors.assign(static_cast<std::size_t>(c.RotaryDim() / 2),
                               static_cast<float>(scaling.factor));
  } else if (scaling.type == RopeScalingType::kLlama3) {
    c.rope_freq_factors = Llama3RopeFreqFactors(scaling, c.rope_theta, c.RotaryDim());
  } else if (scaling.type == RopeScalingType::kLongRope) {
    // transformers: inv_freq = 1 / (ext_factor · base^(2i/dim)), the factors as float32.
    c.rope_freq_factors.assign(scaling.short_factor.begin(), scaling.short_factor.end());
    c.rope_long_freq_factors.assign(scaling.long_factor.begin(), scaling.long_factor.end());
    c.rope_attention_factor = static_cast<float>(scaling.attention_factor);
  }
}

std::string RopeDescription(const ModelConfig& c) {
  std::ostringstream out;
  out.precision(10);  // 1000000, not 1e+06
  out << "RoPE theta " << c.rope_theta;
  const RopeScaling& s = c.rope_scaling;
  switch (s.type) {
    case RopeScalingType::kNone:
      break;
    case RopeScalingType::kLinear:
      out << ", linear scaling (factor " << s.factor << ")";
      break;
    case RopeScalingType::kLlama3:
      out << ", llama3 scaling (factor " << s.factor << ", low_freq_factor " << s.low_freq_factor
          << ", high_freq_factor " << s.high_freq_factor << ", original context "
          << s.original_max_position_embeddings << ")";
      break;
    case RopeScalingType::kLongRope:
      out << ", longrope scaling (original context " << s.original_max_position_embeddings
          << ", attention factor " << s.attention_factor << ")";
      break;
    case RopeScalingType::kFactors:
      out << ", per-pair frequency factors "
          << *std::min_element(c.rope_freq_factors.begin(), c.rope_freq_factors.end()) << ".."
          << *std::max_element(c.rope_freq_factors.begin(), c.rope_freq_factors.end())
          << " (rope_freqs.weight)";
      break;
  }
  if (c.rotary_dim > 0 && c.rotary_dim < c.head_dim) {
    out << "; on the first " << c.rotary_dim << " of " << c.head_dim << " dims of each head";
  }
  if (c.rope_theta_local > 0.0f && c.sliding_window > 0) out << "; local layers theta " << c.rope_theta_local;
  if (!c.nope_layers.empty()) out << "; " << c.nope_layers.size() << " layers without RoPE";
  return out.str();
}

namespace config_json {
namespace {

// A positive, finite number field of the RoPE object `where` names.
double PositiveNumber(const json& object, const char* key, const std::string& where) {
  const json* value = Find(object, key);
  if (value == nullptr) throw MakeError(where, ".", key, " is missing");
  if (!value->is_number() || !(value->get<double>() > 0.0) || !std::isfinite(value->get<double>())) {
    throw MakeError(where, ".", key, " = ", value->dump(), " must be a positive number");
  }
  return value->get<double>();
}

// partial_rotary_factor, at the top level (transformers 4) or in the RoPE object (5): RoPE on the first
// head_dim · factor dims of each head. Phi-3's transformers model reads it (Phi-4-mini: 0.75); for any other
// family plumb refuses a factor other than 1. `where` prefixes the key in the message.
void ReadPartialRotary(const json& object, const std::string& where, ModelConfig& c) {
  const json* partial = Find(object, "partial_rotary_factor");
  if (partial == nullptr || partial->is_null() || *partial == 1 || *partial == 1.0) return;
  if (!ReadingRulesOf(c).partial_rotary) {
    throw MakeError(where, "partial_rotary_factor = ", partial->dump(),
                    " (RoPE on part of each head) is not ", "supported for model_type \"",
                    ReadingRulesOf(c).hf_model_type, "\" (plumb reads it for ",
                    HfModelTypeNames(&Family::partial_rotary), ")");
  }
  const double factor = partial->is_number() ? partial->get<double>() : 0.0;
  // transformers: dim = int(head_dim · factor), rotated in pairs.
  const int dim = static_cast<int>(c.head_dim * factor);
  if (!(factor > 0.0 && factor <= 1.0) || dim < 2 || dim % 2 != 0) {
    throw MakeError(where, "partial_rotary_factor = ", partial->dump(), " must give an even number of ",
                    "rotated dims in [2, head_dim = ", c.head_dim, "]");
  }
  c.rotary_dim = dim;
}

std::string TypeOf(const json& object, const std::string& where) {
  // transformers 4.45 renamed "type" to "rope_type"; both are read, and must agree when both are given.
  const json* rope_type = Find(object, "rope_type");
  const json* type = Find(object, "type");
  for (const json* t : {rope_type, type}) {
    if (t != nullptr && !t->is_string())
      throw MakeError(where, " has a rope_type that is not a string: ", t->dump());
  }
  if (rope_type && type && *rope_type != *type) {
    throw MakeError(where, ".rope_type = ", rope_type->dump(), " and .type = ", type->dump(), " disagree");
  }
  if (rope_type) return rope_type->get<std::string>();
  if (type) return type->get<std::string>();
  return "default";
}

}  // namespace

// LongRoPE's keys, as transformers' _compute_longrope_parameters reads them: a divisor per rotated pair in
// short_factor and long_factor; the original context from the RoPE object or, where only there, config.json's
// top level (Phi-3 writes it there); factor, if absent, max_position_embeddings / original; attention_factor,
// if absent, sqrt(1 + ln(factor) / ln(original)) for factor > 1, else 1.
void ReadLongRope(const json& root, const json& rope, const std::string& where, const ModelConfig& c,
                  RopeScaling& s) {
  s.type = RopeScalingType::kLongRope;
  const std::size_t pairs = static_cast<std::size_t>(c.RotaryDim() / 2);
  for (auto [key, out] :
       {std::pair{"short_factor", &s.short_factor}, std::pair{"long_factor", &s.long_factor}}) {
    const json* list = Find(rope, key);
    if (list == nullptr || !list->is_array() || list->size() != pairs) {
      throw MakeError(where, ".", key, " must list a divisor for each of the ", pairs, " rotated pairs, got ",
                      list != nullptr ? list->dump() : std::string("none"));
    }
    for (std::size_t i = 0; i < pairs; ++i) {
      const json& f = (*list)[i];
      if (!f.is_number() || !(f.get<double>() > 0.0) || !std::isfinite(f.get<double>())) {
        throw MakeError(where, ".", key, "[", i, "] = ", f.dump(), " must be a positive number");
      }
      out->push_back(static_cast<double>(static_cast<float>(f.get<double>())));  // float32, as transformers
    }
  }
  const json& holder = Find(rope, "original_max_position_embeddings") != nullptr ? rope : root;
  const double original = PositiveNumber(holder, "original_max_position_embeddings", where);
  if (original != std::floor(original) || original > (1 << 30)) {
    throw MakeError(where, ".original_max_position_embeddings = ", original, " must be a whole number");
  }
  s.original_max_position_embeddings = static_cast<int>(original);
  s.factor = Find(rope, "factor") != nullptr ? PositiveNumber(rope, "factor", where)
                                             : static_cast<double>(c.max_position_embeddings) / original;
  if (Find(rope, "attention_factor") != nullptr) {
    s.attention_factor = PositiveNumber(rope, "attention_factor", where);
  } else {
    s.attention_factor = s.factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(s.factor) / std::log(original));
  }
}

// The rule of one RoPE object (rope_parameters, rope_scaling, or one layer type's entry of Gemma 3's):
// its scaling, checked key by key.
RopeScaling ReadRopeRule(const json& root, const json& rope, const std::string& where, ModelConfig& c) {
  const std::string type = TypeOf(rope, where);
  // The keys of the RoPE object plumb reads for this type; any other is refused below.
  std::vector<std::string> known = {"rope_type", "type", "rope_theta", "partial_rotary_factor"};
  ReadPartialRotary(rope, where + ".", c);
  RopeScaling s;
  if (type == "default") {
    s.type = RopeScalingType::kNone;
  } else if (type == "linear") {
    s.type = RopeScalingType::kLinear;
    s.factor = PositiveNumber(rope, "factor", where);
    known.emplace_back("factor");
  } else if (type == "llama3") {
    s.type = RopeScalingType::kLlama3;
    s.factor = PositiveNumber(rope, "factor", where);
    s.low_freq_factor = PositiveNumber(rope, "low_freq_factor", where);
    s.high_freq_factor = PositiveNumber(rope, "high_freq_factor", where);
    const double original = PositiveNumber(rope, "original_max_position_embeddings", where);
    if (original != std::floor(original) || original > (1 << 30)) {
      throw MakeError(where, ".original_max_position_embeddings = ", original, " must be a whole number");
    }
    s.original_max_position_embeddings = static_cast<int>(original);
    if (!(s.low_freq_factor < s.high_freq_factor)) {
      throw MakeError(where, ": low_freq_factor = ", s.low_freq_factor,
                      " must be below high_freq_factor = ", s.high_freq_factor);
    }
    for (const char* key :
         {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}) {
      known.emplace_back(key);
    }
  } else if (type == "longrope" && ReadingRulesOf(c).longrope) {
    ReadLongRope(root, rope, where, c, s);
    for (const char* key :
         {"short_factor", "long_factor", "factor", "attention_factor", "original_max_position_embeddings"}) {
      known.emplace_back(key);
    }
  } else {
    throw MakeError(where, ".rope_type = \"", type,
                    "\" is not supported (plumb implements \"default\", \"linear\", \"llama3\" and, for ",
                    HfModelTypeNames(&Family::longrope), ", \"longrope\")");
  }
  for (const auto& item : rope.items()) {
    if (item.value().is_null()) continue;
    if (std::find(known.begin(), known.end(), item.key()) == known.end()) {
      throw MakeError(where, ".", item.key(), " = ", item.value().dump(),
                      " is not a field plumb knows for rope_type \"", type, "\"");
    }
  }
  return s;
}

// Gemma 3's two RoPEs: the global layers' (rope_theta, and its scaling) and the sliding layers' base
// (rope_local_base_freq), unscaled. transformers 5 writes them as rope_parameters {"full_attention": {...},
// "sliding_attention": {...}}; transformers 4 as top-level rope_theta, rope_scaling and rope_local_base_freq.
void ReadGemma3Rope(const json& root, const std::string& source, ConfigPurpose purpose, ModelConfig& c) {
  const bool run = purpose == ConfigPurpose::kRun;
  RopeScaling global;
  if (const json* parameters = Find(root, "rope_parameters"); parameters != nullptr) {
    const std::string where = source + ": rope_parameters";
    for (const auto& item : parameters->items()) {
      if (item.key() != "full_attention" && item.key() != "sliding_attention") {
        throw MakeError(where, ".", item.key(), " is not a layer type (full_attention, sliding_attention)");
      }
    }
    for (const char* key : {"full_attention", "sliding_attention"}) {
      const json* rope = Find(*parameters, key);
      if (rope == nullptr || !rope->is_object()) throw MakeError(where, ".", key, " must be an object");
    }
    const json& full = (*parameters)["full_attention"];
    const json& sliding = (*parameters)["sliding_attention"];
    c.rope_theta = static_cast<float>(PositiveNumber(full, "rope_theta", where + ".full_attention"));
    c.rope_theta_local =
        static_cast<float>(PositiveNumber(sliding, "rope_theta", where + ".sliding_attention"));
    if (!run) return;
    global = ReadRopeRule(root, full, where + ".full_attention", c);
    if (ReadRopeRule(root, sliding, where + ".sliding_attention", c).type != RopeScalingType::kNone) {
      throw MakeError(where, ".sliding_attention = ", sliding.dump(), ": plumb rotates the sliding layers ",
                      "unscaled (as every Gemma 3 does)");
    }
  } else {
    c.rope_theta = OptionalFloat(root, "rope_theta", 1000000.0f, source);
    c.rope_theta_local = OptionalFloat(root, "rope_local_base_freq", 10000.0f, source);
    if (!run) return;
    if (const json* scaling = Find(root, "rope_scaling"); scaling != nullptr && !scaling->is_null()) {
      if (!scaling->is_object())
        throw MakeError(source, ": rope_scaling must be an object, got ", scaling->dump());
      global = ReadRopeRule(root, *scaling, source + ": rope_scaling", c);
    }
  }
  SetRopeScaling(c, global);
}

void ReadRope(const json& root, const std::string& source, ConfigPurpose purpose, ModelConfig& c) {
  if (ReadingRulesOf(c).rope_per_layer_type) return ReadGemma3Rope(root, source, purpose, c);
  const json* parameters = Find(root, "rope_parameters");
  const json* scaling = Find(root, "rope_scaling");
  const float top_theta = OptionalFloat(root, "rope_theta", 10000.0f, source);
  c.rope_theta = top_theta;
  const bool run = purpose == ConfigPurpose::kRun;
  if (run) ReadPartialRotary(root, source + ": ", c);
  if (parameters == nullptr && scaling == nullptr) return SetRopeScaling(c, {});
  // The object that says the rule: rope_parameters (transformers 5) or rope_scaling (4); when a file has
  // both, they must say the same.
  const json& rope = parameters != nullptr ? *parameters : *scaling;
  const std::string where = source + ": " + (parameters != nullptr ? "rope_parameters" : "rope_scaling");
  if (!rope.is_object()) throw MakeError(where, " must be an object, got ", rope.dump());
  if (parameters != nullptr) {
    if (const json* theta = Find(rope, "rope_theta"); theta != nullptr) {
      c.rope_theta = static_cast<float>(PositiveNumber(rope, "rope_theta", where));
      if (Find(root, "rope_theta") != nullptr && top_theta != c.rope_theta) {
        throw MakeError(where, ".rope_theta = ", theta->dump(),
                        " contradicts rope_theta = ", root["rope_theta"].dump());
      }
    }
  }
  if (!run) return;
  if (parameters != nullptr && scaling != nullptr &&
      TypeOf(*scaling, source + ": rope_scaling") != TypeOf(rope, where)) {
    throw MakeError(source, ": rope_parameters ", parameters->dump(), " and rope_scaling ", scaling->dump(),
                    " disagree");
  }
  SetRopeScaling(c, ReadRopeRule(root, rope, where, c));
}

}  // namespace config_json
}  // namespace plumb
