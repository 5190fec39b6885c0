// The typed metadata getters of GgufFile (include/plumb/formats/gguf.h). Parsing is in gguf.cpp; the value
// types are in docs/formats.md, section "GGUF container".
#include <cstdint>
#include <string>

#include "plumb/core/error.h"
#include "plumb/formats/gguf.h"

namespace plumb {
namespace {

bool IsInteger(GgufValueType type) {
  switch (type) {
    case GgufValueType::UINT8:
    case GgufValueType::INT8:
    case GgufValueType::UINT16:
    case GgufValueType::INT16:
    case GgufValueType::UINT32:
    case GgufValueType::INT32:
    case GgufValueType::UINT64:
    case GgufValueType::INT64:
      return true;
    default:
      return false;
  }
}

bool IsFloat(GgufValueType type) {
  return type == GgufValueType::FLOAT32 || type == GgufValueType::FLOAT64;
}

// "uint32", or for an array "array of string" / "array of array of int32" (the first element's type stands
// for the nested ones, which may differ from each other).
std::string TypeDescription(const GgufValue& value) {
  if (value.type != GgufValueType::ARRAY) return std::string(GgufValueTypeName(value.type));
  std::string out = "array of ";
  if (value.element_type == GgufValueType::ARRAY && !value.elements.empty()) {
    return out + TypeDescription(value.elements.front());
  }
  return out + std::string(GgufValueTypeName(value.element_type));
}

}  // namespace

std::string_view GgufValueTypeName(GgufValueType type) {
  switch (type) {
    case GgufValueType::UINT8:
      return "uint8";
    case GgufValueType::INT8:
      return "int8";
    case GgufValueType::UINT16:
      return "uint16";
    case GgufValueType::INT16:
      return "int16";
    case GgufValueType::UINT32:
      return "uint32";
    case GgufValueType::INT32:
      return "int32";
    case GgufValueType::FLOAT32:
      return "float32";
    case GgufValueType::BOOL:
      return "bool";
    case GgufValueType::STRING:
      return "string";
    case GgufValueType::ARRAY:
      return "array";
    case GgufValueType::UINT64:
      return "uint64";
    case GgufValueType::INT64:
      return "int64";
    case GgufValueType::FLOAT64:
      return "float64";
  }
  return "unknown";
}

namespace {

[[noreturn]] void ThrowMissing(const std::string& path, std::string_view key) {
  throw MakeError(path, ": metadata key '", key, "' is missing");
}

[[noreturn]] void ThrowType(const std::string& path, std::string_view key, const GgufValue& value,
                            const char* expected) {
  throw MakeError(path, ": metadata key '", key, "' has type ", TypeDescription(value), ", expected ",
                  expected);
}

}  // namespace

std::optional<std::uint64_t> GgufFile::FindUint(std::string_view key) const {
  const GgufValue* value = FindValue(key);
  if (value == nullptr) return std::nullopt;
  if (!IsInteger(value->type)) ThrowType(path_, key, *value, "an integer");
  if (value->type == GgufValueType::UINT64) return static_cast<std::uint64_t>(value->integer);
  if (value->integer < 0) {
    throw MakeError(path_, ": metadata key '", key, "' has the negative value ", value->integer, " (type ",
                    GgufValueTypeName(value->type), "), expected a value >= 0");
  }
  return static_cast<std::uint64_t>(value->integer);
}

std::uint64_t GgufFile::GetUint(std::string_view key) const {
  const std::optional<std::uint64_t> value = FindUint(key);
  if (!value) ThrowMissing(path_, key);
  return *value;
}

std::optional<double> GgufFile::FindFloat(std::string_view key) const {
  const GgufValue* value = FindValue(key);
  if (value == nullptr) return std::nullopt;
  if (!IsFloat(value->type)) ThrowType(path_, key, *value, "float32 or float64");
  return value->number;
}

double GgufFile::GetFloat(std::string_view key) const {
  const std::optional<double> value = FindFloat(key);
  if (!value) ThrowMissing(path_, key);
  return *value;
}

std::optional<bool> GgufFile::FindBool(std::string_view key) const {
  const GgufValue* value = FindValue(key);
  if (value == nullptr) return std::nullopt;
  if (value->type != GgufValueType::BOOL) ThrowType(path_, key, *value, "bool");
  return value->boolean;
}

bool GgufFile::GetBool(std::string_view key) const {
  const std::optional<bool> value = FindBool(key);
  if (!value) ThrowMissing(path_, key);
  return *value;
}

const std::string& GgufFile::GetString(std::string_view key) const {
  const GgufValue* value = FindValue(key);
  if (value == nullptr) ThrowMissing(path_, key);
  if (value->type != GgufValueType::STRING) ThrowType(path_, key, *value, "string");
  return value->string;
}

std::optional<std::string> GgufFile::FindString(std::string_view key) const {
  if (!Has(key)) return std::nullopt;
  return GetString(key);
}

std::vector<std::string> GgufFile::GetStringArray(std::string_view key) const {
  const GgufValue* value = FindValue(key);
  if (value == nullptr) ThrowMissing(path_, key);
  if (value->type != GgufValueType::ARRAY || value->element_type != GgufValueType::STRING) {
    ThrowType(path_, key, *value, "array of string");
  }
  std::vector<std::string> out;
  out.reserve(value->elements.size());
  for (const GgufValue& element : value->elements) out.push_back(element.string);
  return out;
}

std::vector<double> GgufFile::GetFloatArray(std::string_view key) const {
  const GgufValue* value = FindValue(key);
  if (value == nullptr) ThrowMissing(path_, key);
  if (value->type != GgufValueType::ARRAY || !IsFloat(value->element_type)) {
    ThrowType(path_, key, *value, "array of float32 or float64");
  }
  std::vector<double> out;
  out.reserve(value->elements.size());
  for (const GgufValue& element : value->elements) out.push_back(element.number);
  return out;
}

std::vector<std::int64_t> GgufFile::GetIntArray(std::string_view key) const {
  const GgufValue* value = FindValue(key);
  if (value == nullptr) ThrowMissing(path_, key);
  if (value->type != GgufValueType::ARRAY || !IsInteger(value->element_type)) {
    ThrowType(path_, key, *value, "array of integers");
  }
  std::vector<std::int64_t> out;
  out.reserve(value->elements.size());
  for (std::size_t i = 0; i < value->elements.size(); ++i) {
    const GgufValue& element = value->elements[i];
    if (element.type == GgufValueType::UINT64 && element.integer < 0) {
      throw MakeError(path_, ": metadata key '", key, "' element ", i, " is ",
                      static_cast<std::uint64_t>(element.integer), " (uint64), which does not fit in int64");
    }
    out.push_back(element.integer);
  }
  return out;
}

}  // namespace plumb
