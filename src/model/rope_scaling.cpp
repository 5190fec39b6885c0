// RoPE scaling: config.json's two spellings read into ModelConfig (config_json::ReadRope), and Llama 3.1's
// per-pair frequency divisors (Llama3RopeFreqFactors). docs/models.md "RoPE scaling".
#include <algorithm>
#include <cmath>
#include <numbers>
#include <sstream>
#include <string>
#include <vector>

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
  if (scaling.type == RopeScalingType::kLinear) {
    c.rope_freq_factors.assign(static_cast<std::size_t>(c.head_dim / 2), static_cast<float>(scaling.factor));
  } else if (scaling.type == RopeScalingType::kLlama3) {
    c.rope_freq_factors = Llama3RopeFreqFactors(scaling, c.rope_theta, c.head_dim);
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
    case RopeScalingType::kFactors:
      out << ", per-pair frequency factors "
          << *std::min_element(c.rope_freq_factors.begin(), c.rope_freq_factors.end()) << ".."
          << *std::max_element(c.rope_freq_factors.begin(), c.rope_freq_factors.end())
          << " (rope_freqs.weight)";
      break;
  }
  if (c.rope_theta_local > 0.0f && c.sliding_window > 0) out << "; local layers theta " << c.rope_theta_local;
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

// partial_rotary_factor, at the top level (transformers 4) or in the RoPE object (5): RoPE on part of each
// head, which plumb does not implement. `where` prefixes the key in the message.
void RefusePartialRotary(const json& object, const std::string& where) {
  if (const json* partial = Find(object, "partial_rotary_factor");
      partial && *partial != 1 && *partial != 1.0) {
    throw MakeError(where, "partial_rotary_factor = ", partial->dump(),
                    " (RoPE on part of each head) is not supported");
  }
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

void ReadRope(const json& root, const std::string& source, ConfigPurpose purpose, ModelConfig& c) {
  const json* parameters = Find(root, "rope_parameters");
  const json* scaling = Find(root, "rope_scaling");
  const float top_theta = OptionalFloat(root, "rope_theta", 10000.0f, source);
  c.rope_theta = top_theta;
  const bool run = purpose == ConfigPurpose::kRun;
  if (run) RefusePartialRotary(root, source + ": ");
  if (parameters == nullptr && scaling == nullptr) return;
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
  const std::string type = TypeOf(rope, where);
  // The keys of the RoPE object plumb reads for this type; any other is refused below.
  std::vector<std::string> known = {"rope_type", "type", "rope_theta", "partial_rotary_factor"};
  RefusePartialRotary(rope, where + ".");
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
  } else {
    throw MakeError(where, ".rope_type = \"", type,
                    "\" is not supported (plumb implements \"default\", \"linear\" and \"llama3\")");
  }
  for (const auto& item : rope.items()) {
    if (item.value().is_null()) continue;
    if (std::find(known.begin(), known.end(), item.key()) == known.end()) {
      throw MakeError(where, ".", item.key(), " = ", item.value().dump(),
                      " is not a field plumb knows for rope_type \"", type, "\"");
    }
  }
  SetRopeScaling(c, s);
}

}  // namespace config_json
}  // namespace plumb
