// GGUF writer: the layout of docs/formats.md "GGUF container" (and the writing rules of "Writing GGUF"),
// with every check the reader makes (section "What plumb validates") made when a key or tensor is added.
#include "plumb/formats/gguf_writer.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "plumb/core/error.h"
#include "plumb/core/write_file.h"

namespace plumb {

static_assert(std::endian::native == std::endian::little, "the GGUF writer stores fields with memcpy");

namespace {

constexpr std::uint32_t kVersion = 3;
constexpr int kMaxArrayDepth = 64;   // as the reader (gguf.cpp) allows
constexpr std::size_t kMaxDims = 4;  // ggml's GGML_MAX_DIMS

template <typename T>
void AppendScalar(std::vector<std::uint8_t>& out, T v) {
  std::uint8_t bytes[sizeof v];
  std::memcpy(bytes, &v, sizeof v);  // little-endian host (static_assert above)
  out.insert(out.end(), bytes, bytes + sizeof v);
}

// Whether an integer type holds v: UINT64 and INT64 hold every int64 (UINT64 as a bit pattern); true for
// the other, non-integer types, whose `integer` is not written.
bool IntegerFits(GgufValueType type, std::int64_t v) {
  auto in = [v](auto lo, auto hi) {
    return v >= static_cast<std::int64_t>(lo) && v <= static_cast<std::int64_t>(hi);
  };
  switch (type) {
    case GgufValueType::UINT8:
      return in(0, std::numeric_limits<std::uint8_t>::max());
    case GgufValueType::INT8:
      return in(std::numeric_limits<std::int8_t>::min(), std::numeric_limits<std::int8_t>::max());
    case GgufValueType::UINT16:
      return in(0, std::numeric_limits<std::uint16_t>::max());
    case GgufValueType::INT16:
      return in(std::numeric_limits<std::int16_t>::min(), std::numeric_limits<std::int16_t>::max());
    case GgufValueType::UINT32:
      return in(0, std::numeric_limits<std::uint32_t>::max());
    case GgufValueType::INT32:
      return in(std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max());
    default:
      return true;
  }
}

bool IsValueType(GgufValueType type) {
  return static_cast<std::uint32_t>(type) <= static_cast<std::uint32_t>(GgufValueType::FLOAT64);
}

// `where` names the value in messages: "metadata key 'k'", then "[i]" per array level.
void CheckValue(const GgufValue& v, const std::string& where, int depth) {
  if (!IsValueType(v.type)) {
    throw MakeError(where, ": value type ", static_cast<std::uint32_t>(v.type),
                    " is not a GGUF value type (0..12)");
  }
  if (!IntegerFits(v.type, v.integer)) {
    throw MakeError(where, ": ", v.integer, " does not fit in ", GgufValueTypeName(v.type));
  }
  // A FLOAT32 must read back as the same number; NaN reads back as NaN (payload kept, as the reader says).
  if (v.type == GgufValueType::FLOAT32 && !std::isnan(v.number) &&
      static_cast<double>(static_cast<float>(v.number)) != v.number) {
    throw MakeError(where, ": ", v.number, " is not a float32 value (it would be written rounded)");
  }
  if (v.type != GgufValueType::ARRAY) return;
  if (depth >= kMaxArrayDepth) {
    throw MakeError(where, ": arrays nested more than ", kMaxArrayDepth, " deep (the reader's limit)");
  }
  if (!IsValueType(v.element_type)) {
    throw MakeError(where, ": array element type ", static_cast<std::uint32_t>(v.element_type),
                    " is not a GGUF value type (0..12)");
  }
  for (std::size_t i = 0; i < v.elements.size(); ++i) {
    const GgufValue& e = v.elements[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (e.type != v.element_type) {
      throw MakeError(at, ": element of type ", GgufValueTypeName(e.type), " in an array of ",
                      GgufValueTypeName(v.element_type));
    }
    CheckValue(e, at, depth + 1);
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// Values

GgufValue GgufInteger(GgufValueType type, std::int64_t integer) {
  GgufValue value;
  value.type = type;
  value.integer = integer;
  return value;
}
GgufValue GgufUint8(std::uint8_t v) {
  return GgufInteger(GgufValueType::UINT8, v);
}
GgufValue GgufInt8(std::int8_t v) {
  return GgufInteger(GgufValueType::INT8, v);
}
GgufValue GgufUint16(std::uint16_t v) {
  return GgufInteger(GgufValueType::UINT16, v);
}
GgufValue GgufInt16(std::int16_t v) {
  return GgufInteger(GgufValueType::INT16, v);
}
GgufValue GgufUint32(std::uint32_t v) {
  return GgufInteger(GgufValueType::UINT32, v);
}
GgufValue GgufInt32(std::int32_t v) {
  return GgufInteger(GgufValueType::INT32, v);
}
GgufValue GgufUint64(std::uint64_t v) {
  return GgufInteger(GgufValueType::UINT64, static_cast<std::int64_t>(v));
}
GgufValue GgufInt64(std::int64_t v) {
  return GgufInteger(GgufValueType::INT64, v);
}
GgufValue GgufFloat32(float v) {
  GgufValue value;
  value.type = GgufValueType::FLOAT32;
  value.number = v;
  return value;
}
GgufValue GgufFloat64(double v) {
  GgufValue value;
  value.type = GgufValueType::FLOAT64;
  value.number = v;
  return value;
}
GgufValue GgufBool(bool v) {
  GgufValue value;
  value.type = GgufValueType::BOOL;
  value.boolean = v;
  return value;
}
GgufValue GgufString(std::string v) {
  GgufValue value;
  value.type = GgufValueType::STRING;
  value.string = std::move(v);
  return value;
}
GgufValue GgufArray(GgufValueType element_type, std::vector<GgufValue> elements) {
  GgufValue value;
  value.type = GgufValueType::ARRAY;
  value.element_type = element_type;
  value.elements = std::move(elements);
  return value;
}
GgufValue GgufStringArray(const std::vector<std::string>& strings) {
  std::vector<GgufValue> elements;
  elements.reserve(strings.size());
  for (const std::string& s : strings) elements.push_back(GgufString(s));
  return GgufArray(GgufValueType::STRING, std::move(elements));
}
GgufValue GgufIntArray(GgufValueType element_type, const std::vector<std::int64_t>& integers) {
  std::vector<GgufValue> elements;
  elements.reserve(integers.size());
  for (const std::int64_t v : integers) elements.push_back(GgufInteger(element_type, v));
  return GgufArray(element_type, std::move(elements));
}
GgufValue GgufFloat32Array(const std::vector<float>& numbers) {
  std::vector<GgufValue> elements;
  elements.reserve(numbers.size());
  for (const float v : numbers) elements.push_back(GgufFloat32(v));
  return GgufArray(GgufValueType::FLOAT32, std::move(elements));
}

// ---------------------------------------------------------------------------------------------------------
// Encoding

void GgufAppendU32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  AppendScalar(out, v);
}
void GgufAppendU64(std::vector<std::uint8_t>& out, std::uint64_t v) {
  AppendScalar(out, v);
}
void GgufAppendHeader(std::vector<std::uint8_t>& out, std::uint32_t version, std::uint64_t tensor_count,
                      std::uint64_t kv_count) {
  constexpr char kMagic[4] = {'G', 'G', 'U', 'F'};
  out.insert(out.end(), kMagic, kMagic + 4);
  GgufAppendU32(out, version);
  GgufAppendU64(out, tensor_count);
  GgufAppendU64(out, kv_count);
}
void GgufAppendString(std::vector<std::uint8_t>& out, std::string_view s) {
  GgufAppendU64(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

void GgufAppendValue(std::vector<std::uint8_t>& out, GgufValueType type, const GgufValue& v) {
  switch (type) {
    case GgufValueType::UINT8:
    case GgufValueType::INT8:
      return AppendScalar(out, static_cast<std::uint8_t>(v.integer));
    case GgufValueType::UINT16:
    case GgufValueType::INT16:
      return AppendScalar(out, static_cast<std::uint16_t>(v.integer));
    case GgufValueType::UINT32:
    case GgufValueType::INT32:
      return AppendScalar(out, static_cast<std::uint32_t>(v.integer));
    case GgufValueType::UINT64:
    case GgufValueType::INT64:
      return AppendScalar(out, static_cast<std::uint64_t>(v.integer));
    case GgufValueType::FLOAT32:
      return AppendScalar(out, static_cast<float>(v.number));
    case GgufValueType::FLOAT64:
      return AppendScalar(out, v.number);
    case GgufValueType::BOOL:
      return AppendScalar(out, static_cast<std::uint8_t>(v.boolean ? 1 : 0));
    case GgufValueType::STRING:
      return GgufAppendString(out, v.string);
    case GgufValueType::ARRAY:
      GgufAppendU32(out, static_cast<std::uint32_t>(v.element_type));
      GgufAppendU64(out, v.elements.size());
      for (const GgufValue& e : v.elements) GgufAppendValue(out, v.element_type, e);
      return;
  }
  // An id outside the enum: nothing to write beyond the type field the caller wrote.
}

std::uint64_t GgufAlignUp(std::uint64_t n, std::uint64_t alignment) {
  return alignment == 0 ? n : (n + alignment - 1) / alignment * alignment;
}

// ---------------------------------------------------------------------------------------------------------
// GgufWriter

GgufWriter& GgufWriter::Add(std::string key, GgufValue value) {
  const std::string where = "GGUF metadata key '" + key + "'";
  if (key.empty()) throw MakeError("GGUF metadata key #", metadata_.size(), ": the key is empty");
  if (Has(key)) throw MakeError(where, ": added twice");
  CheckValue(value, where, 0);
  if (key == "general.alignment") {
    // docs/formats.md "Layout": a UINT32, a non-zero power of two.
    if (value.type != GgufValueType::UINT32) {
      throw MakeError(where, ": has type ", GgufValueTypeName(value.type), ", expected uint32");
    }
    const auto alignment = static_cast<std::uint64_t>(value.integer);
    if (!std::has_single_bit(alignment)) {
      throw MakeError(where, ": ", alignment, " is not a power of two");
    }
    alignment_ = alignment;
  }
  keys_.insert(key);
  metadata_.emplace_back(std::move(key), std::move(value));
  return *this;
}

GgufWriter& GgufWriter::AddTensor(std::string name, GgmlType type, std::vector<std::uint64_t> dims,
                                  std::vector<std::uint8_t> data) {
  const std::string where = "GGUF tensor '" + name + "'";
  if (name.empty()) throw MakeError("GGUF tensor #", tensors_.size(), ": the name is empty");
  if (tensor_names_.contains(name)) throw MakeError(where, ": added twice");
  if (dims.empty() || dims.size() > kMaxDims) {
    throw MakeError(where, ": ", dims.size(), " dims, expected 1 to ", kMaxDims);
  }
  const GgmlTypeTraits traits = GgmlTraits(type);
  const auto block = static_cast<std::uint64_t>(traits.block_elements);
  std::uint64_t elements = 1;
  for (std::size_t k = 0; k < dims.size(); ++k) {
    constexpr auto kMaxElements = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    if (dims[k] == 0) throw MakeError(where, ": dims[", k, "] is 0");
    if (dims[k] > kMaxElements / elements) {
      throw MakeError(where, ": more than 2^63 - 1 elements (dims[", k, "] = ", dims[k], ")");
    }
    elements *= dims[k];
  }
  if (dims[0] % block != 0) {
    throw MakeError(where, ": dims[0] = ", dims[0], " is not a whole number of ", traits.name, " blocks (",
                    block, " elements)");
  }
  // The byte count fits in 64 bits (the reader's check 15), computed without overflow.
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(elements / block, static_cast<std::uint64_t>(traits.block_bytes), &bytes) ||
      bytes != data.size()) {
    throw MakeError(where, ": ", data.size(), " bytes of data, expected ", elements / block, " blocks of ",
                    traits.block_bytes, " bytes");
  }
  tensor_names_.insert(name);
  tensors_.push_back({std::move(name), type, std::move(dims), std::move(data)});
  return *this;
}

std::vector<std::uint8_t> GgufWriter::Bytes() const {
  std::vector<std::uint8_t> out;
  GgufAppendHeader(out, kVersion, tensors_.size(), metadata_.size());
  for (const auto& [key, value] : metadata_) {
    GgufAppendString(out, key);
    GgufAppendU32(out, static_cast<std::uint32_t>(value.type));
    GgufAppendValue(out, value.type, value);
  }
  std::uint64_t offset = 0;  // in the data section
  for (const Tensor& t : tensors_) {
    GgufAppendString(out, t.name);
    GgufAppendU32(out, static_cast<std::uint32_t>(t.dims.size()));
    for (const std::uint64_t d : t.dims) GgufAppendU64(out, d);
    GgufAppendU32(out, static_cast<std::uint32_t>(t.type));
    GgufAppendU64(out, offset);
    offset = GgufAlignUp(offset + t.data.size(), alignment_);
  }
  // The padding after the infos is written even without tensors, as gguf-py and llama.cpp do.
  out.resize(static_cast<std::size_t>(GgufAlignUp(out.size(), alignment_)), 0);
  for (const Tensor& t : tensors_) {
    out.insert(out.end(), t.data.begin(), t.data.end());
    out.resize(static_cast<std::size_t>(GgufAlignUp(out.size(), alignment_)), 0);
  }
  return out;
}

void GgufWriter::WriteFile(const std::string& path) const {
  WriteFileBytes(path, Bytes());
}

}  // namespace plumb
