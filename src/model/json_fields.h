// Typed reads of config.json fields, each error naming the file and the field. Internal to src/model.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "plumb/core/error.h"

namespace plumb::config_json {

using nlohmann::json;

inline const json* Find(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

inline int RequireInt(const json& object, const char* key, const std::string& source) {
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

inline int OptionalInt(const json& object, const char* key, int fallback, const std::string& source) {
  return Find(object, key) ? RequireInt(object, key, source) : fallback;
}

inline float OptionalFloat(const json& object, const char* key, float fallback, const std::string& source) {
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

inline bool OptionalBool(const json& object, const char* key, bool fallback, const std::string& source) {
  const json* value = Find(object, key);
  if (value == nullptr) return fallback;
  if (!value->is_boolean())
    throw MakeError(source, ": field \"", key, "\" must be true or false, got ", value->dump());
  return value->get<bool>();
}

}  // namespace plumb::config_json

namespace plumb {
struct ModelConfig;
enum class ConfigPurpose;
namespace config_json {

// RoPE's base and scaling from either spelling: transformers 5's "rope_parameters" {rope_type, rope_theta,
// ...} or transformers 4's top-level "rope_theta" and "rope_scaling" {rope_type or type, ...}. Sets
// c.rope_theta, c.rope_scaling and c.rope_freq_factors (c.head_dim must be set). For kRun, a type plumb does
// not implement, an unknown key of the RoPE object, a partial_rotary_factor other than 1, or two spellings
// that disagree is an error naming it; for kShapes only the base is read.
void ReadRope(const json& root, const std::string& source, ConfigPurpose purpose, ModelConfig& c);

}  // namespace config_json
}  // namespace plumb
