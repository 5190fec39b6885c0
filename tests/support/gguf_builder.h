// GgufBuilder: writes small GGUF files in memory for tests (layout: docs/formats.md, "GGUF container").
//
// It writes what it is told, valid or not: any version, any value type id, any tensor type id, dims or
// offset, data of any length. Build() returns the bytes together with the file offset of every field it
// wrote (GgufLayout), so that a test can patch one field (GgufImage::PatchU32 / PatchU64), cut the file
// short, and expect the reader's message to name that field and offset.
//
//   GgufImage image = GgufBuilder()
//                         .Add("general.architecture", GgufString("llama"))
//                         .Add("tokenizer.ggml.tokens", GgufStringArray({"a", "b"}))
//                         .AddTensor("w", GgmlType::Q8_0, {64, 2})   // data: a byte pattern of the right
//                         size .Build();
//   image.PatchU64(image.at.tensors[0].offset_at, 3);               // misalign it
//   GgufFile::FromBytes(image.bytes, "test.gguf");                  // throws, naming tensor 0's offset field
//
// Data layout follows gguf-py's writer: the data section starts at the end of the tensor infos padded to
// the alignment, and each tensor without an explicit offset starts at the previous one's end padded to the
// alignment; the section ends padded too.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "plumb/formats/ggml_types.h"
#include "plumb/formats/gguf.h"

namespace plumb::testing {

// ---------------------------------------------------------------------------------------------------------
// Values (plumb::GgufValue is both what the reader returns and what the builder writes)

inline GgufValue GgufInteger(GgufValueType type, std::int64_t integer) {
  GgufValue value;
  value.type = type;
  value.integer = integer;
  return value;
}
inline GgufValue GgufUint8(std::uint8_t v) {
  return GgufInteger(GgufValueType::UINT8, v);
}
inline GgufValue GgufInt8(std::int8_t v) {
  return GgufInteger(GgufValueType::INT8, v);
}
inline GgufValue GgufUint16(std::uint16_t v) {
  return GgufInteger(GgufValueType::UINT16, v);
}
inline GgufValue GgufInt16(std::int16_t v) {
  return GgufInteger(GgufValueType::INT16, v);
}
inline GgufValue GgufUint32(std::uint32_t v) {
  return GgufInteger(GgufValueType::UINT32, v);
}
inline GgufValue GgufInt32(std::int32_t v) {
  return GgufInteger(GgufValueType::INT32, v);
}
inline GgufValue GgufUint64(std::uint64_t v) {
  return GgufInteger(GgufValueType::UINT64, static_cast<std::int64_t>(v));
}
inline GgufValue GgufInt64(std::int64_t v) {
  return GgufInteger(GgufValueType::INT64, v);
}

inline GgufValue GgufFloat32(float v) {
  GgufValue value;
  value.type = GgufValueType::FLOAT32;
  value.number = v;
  return value;
}
inline GgufValue GgufFloat64(double v) {
  GgufValue value;
  value.type = GgufValueType::FLOAT64;
  value.number = v;
  return value;
}
inline GgufValue GgufBool(bool v) {
  GgufValue value;
  value.type = GgufValueType::BOOL;
  value.boolean = v;
  return value;
}
inline GgufValue GgufString(std::string v) {
  GgufValue value;
  value.type = GgufValueType::STRING;
  value.string = std::move(v);
  return value;
}

// An array whose elements are all written as `element_type` (each element's own `type` is ignored).
inline GgufValue GgufArray(GgufValueType element_type, std::vector<GgufValue> elements) {
  GgufValue value;
  value.type = GgufValueType::ARRAY;
  value.element_type = element_type;
  value.elements = std::move(elements);
  return value;
}
inline GgufValue GgufStringArray(const std::vector<std::string>& strings) {
  std::vector<GgufValue> elements;
  for (const std::string& s : strings) elements.push_back(GgufString(s));
  return GgufArray(GgufValueType::STRING, std::move(elements));
}
inline GgufValue GgufIntArray(GgufValueType element_type, const std::vector<std::int64_t>& integers) {
  std::vector<GgufValue> elements;
  for (const std::int64_t v : integers) elements.push_back(GgufInteger(element_type, v));
  return GgufArray(element_type, std::move(elements));
}
inline GgufValue GgufFloat32Array(const std::vector<float>& numbers) {
  std::vector<GgufValue> elements;
  for (const float v : numbers) elements.push_back(GgufFloat32(v));
  return GgufArray(GgufValueType::FLOAT32, std::move(elements));
}

// ---------------------------------------------------------------------------------------------------------
// Tensors

struct GgufTensorSpec {
  std::string name;
  std::uint32_t type_id = 0;            // a GgmlType, or any id (unknown ones too)
  std::vector<std::uint64_t> dims;      // as written: dims[0] innermost; any count, zeros allowed
  std::vector<std::uint8_t> data;       // written at the tensor's offset in the data section
  std::optional<std::uint64_t> offset;  // default: the previous tensor's end padded to the alignment
};

// Bytes a tensor of `type` with `dims` takes: 0 if the type is unknown, the count is not whole blocks or
// overflows (give such tensors their data through GgufTensorSpec).
inline std::uint64_t GgufTensorBytes(std::uint32_t type_id, const std::vector<std::uint64_t>& dims) {
  const std::optional<GgmlTypeTraits> traits = FindGgmlType(type_id);
  if (!traits) return 0;
  std::uint64_t n = 1;
  for (const std::uint64_t d : dims) {
    if (__builtin_mul_overflow(n, d, &n)) return 0;
  }
  if (n % static_cast<std::uint64_t>(traits->block_elements) != 0) return 0;
  return n / static_cast<std::uint64_t>(traits->block_elements) *
         static_cast<std::uint64_t>(traits->block_bytes);
}

// ---------------------------------------------------------------------------------------------------------
// The built file

// File offsets of every field written. For a string field (key, name) it is the offset of its length.
struct GgufLayout {
  struct Kv {
    std::uint64_t key_at = 0;    // the key's length field
    std::uint64_t type_at = 0;   // the value type
    std::uint64_t value_at = 0;  // the value; for an array its element type, count at value_at + 4
  };
  struct Tensor {
    std::uint64_t name_at = 0;
    std::uint64_t n_dims_at = 0;
    std::uint64_t dims_at = 0;  // dims[k] at dims_at + 8k
    std::uint64_t type_at = 0;
    std::uint64_t offset_at = 0;
    std::uint64_t data_at = 0;  // absolute file offset of the data
  };
  std::uint64_t magic_at = 0;
  std::uint64_t version_at = 4;
  std::uint64_t tensor_count_at = 8;
  std::uint64_t kv_count_at = 16;
  std::vector<Kv> kvs;
  std::vector<Tensor> tensors;
  std::uint64_t infos_end = 0;    // end of the last tensor info, before padding
  std::uint64_t data_offset = 0;  // start of the data section
};

struct GgufImage {
  std::vector<std::uint8_t> bytes;
  GgufLayout at;

  void PatchU32(std::uint64_t offset, std::uint32_t value) { Patch(offset, &value, sizeof value); }
  void PatchU64(std::uint64_t offset, std::uint64_t value) { Patch(offset, &value, sizeof value); }
  void PatchByte(std::uint64_t offset, std::uint8_t value) { Patch(offset, &value, 1); }
  std::vector<std::uint8_t> Prefix(std::size_t n) const {
    return {bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(std::min(n, bytes.size()))};
  }

 private:
  void Patch(std::uint64_t offset, const void* value, std::size_t n) {
    if (offset + n > bytes.size()) throw std::out_of_range("GgufImage: patch past the end");
    std::memcpy(bytes.data() + offset, value, n);  // little-endian host (as the reader assumes)
  }
};

// ---------------------------------------------------------------------------------------------------------
// The builder

class GgufBuilder {
 public:
  GgufBuilder& SetVersion(std::uint32_t version) {
    version_ = version;
    return *this;
  }
  // Adds general.alignment (uint32) and lays the data out with it.
  GgufBuilder& SetAlignment(std::uint32_t alignment) {
    layout_alignment_ = alignment;
    return Add("general.alignment", GgufUint32(alignment));
  }
  // Lays the data out with `alignment` without writing a key (default 32, GGUF's default).
  GgufBuilder& SetLayoutAlignment(std::uint64_t alignment) {
    layout_alignment_ = alignment;
    return *this;
  }

  // Key/values are written in the order added; nothing stops a duplicate key.
  GgufBuilder& Add(std::string key, GgufValue value) {
    kvs_.push_back({std::move(key), static_cast<std::uint32_t>(value.type), {}, std::move(value)});
    return *this;
  }
  // A key with any value type id and the value's bytes as given (for unknown types, bad bools, ...).
  GgufBuilder& AddRaw(std::string key, std::uint32_t type_id, std::vector<std::uint8_t> value_bytes) {
    kvs_.push_back({std::move(key), type_id, std::move(value_bytes), std::nullopt});
    return *this;
  }

  // A tensor whose data is a byte pattern (distinct per tensor) of the size its type and dims call for.
  GgufBuilder& AddTensor(std::string name, GgmlType type, std::vector<std::uint64_t> dims) {
    const auto type_id = static_cast<std::uint32_t>(type);
    std::vector<std::uint8_t> data(static_cast<std::size_t>(GgufTensorBytes(type_id, dims)));
    for (std::size_t k = 0; k < data.size(); ++k) {
      data[k] = static_cast<std::uint8_t>(k * 7 + tensors_.size() * 101 + 1);
    }
    return AddTensor(
        GgufTensorSpec{std::move(name), type_id, std::move(dims), std::move(data), std::nullopt});
  }
  GgufBuilder& AddTensor(std::string name, GgmlType type, std::vector<std::uint64_t> dims,
                         std::vector<std::uint8_t> data) {
    return AddTensor(GgufTensorSpec{std::move(name), static_cast<std::uint32_t>(type), std::move(dims),
                                    std::move(data), std::nullopt});
  }
  GgufBuilder& AddTensor(GgufTensorSpec spec) {
    tensors_.push_back(std::move(spec));
    return *this;
  }

  const std::vector<GgufTensorSpec>& tensors() const { return tensors_; }
  GgufTensorSpec& tensor(std::size_t i) { return tensors_.at(i); }

  GgufImage Build() const {
    GgufImage image;
    Writer out{image.bytes};
    image.at.magic_at = out.Here();
    out.Bytes("GGUF", 4);
    image.at.version_at = out.Here();
    out.U32(version_);
    image.at.tensor_count_at = out.Here();
    out.U64(tensors_.size());
    image.at.kv_count_at = out.Here();
    out.U64(kvs_.size());

    for (const Kv& kv : kvs_) {
      GgufLayout::Kv& at = image.at.kvs.emplace_back();
      at.key_at = out.Here();
      out.String(kv.key);
      at.type_at = out.Here();
      out.U32(kv.type_id);
      at.value_at = out.Here();
      if (kv.value) {
        WriteValue(out, kv.value->type, *kv.value);
      } else {
        out.Bytes(kv.raw.data(), kv.raw.size());
      }
    }

    // Data offsets: explicit, or packed after the previous tensor with padding.
    std::vector<std::uint64_t> offsets;
    std::uint64_t cursor = 0;
    std::uint64_t data_size = 0;
    for (const GgufTensorSpec& t : tensors_) {
      const std::uint64_t offset = t.offset.value_or(cursor);
      offsets.push_back(offset);
      cursor = Pad(offset + t.data.size());
      data_size = std::max(data_size, cursor);
    }

    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      const GgufTensorSpec& t = tensors_[i];
      GgufLayout::Tensor& at = image.at.tensors.emplace_back();
      at.name_at = out.Here();
      out.String(t.name);
      at.n_dims_at = out.Here();
      out.U32(static_cast<std::uint32_t>(t.dims.size()));
      at.dims_at = out.Here();
      for (const std::uint64_t d : t.dims) out.U64(d);
      at.type_at = out.Here();
      out.U32(t.type_id);
      at.offset_at = out.Here();
      out.U64(offsets[i]);
    }
    image.at.infos_end = out.Here();
    image.at.data_offset = Pad(out.Here());
    image.bytes.resize(static_cast<std::size_t>(image.at.data_offset + data_size), 0);
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      const std::vector<std::uint8_t>& data = tensors_[i].data;
      image.at.tensors[i].data_at = image.at.data_offset + offsets[i];
      if (!data.empty()) {
        std::memcpy(image.bytes.data() + image.at.tensors[i].data_at, data.data(), data.size());
      }
    }
    return image;
  }

  std::vector<std::uint8_t> Bytes() const { return Build().bytes; }

 private:
  struct Kv {
    std::string key;
    std::uint32_t type_id = 0;
    std::vector<std::uint8_t> raw;   // AddRaw: the value's bytes
    std::optional<GgufValue> value;  // Add: the value
  };

  struct Writer {
    std::vector<std::uint8_t>& bytes;
    std::uint64_t Here() const { return bytes.size(); }
    void Bytes(const void* p, std::size_t n) {
      const auto* b = static_cast<const std::uint8_t*>(p);
      bytes.insert(bytes.end(), b, b + n);
    }
    template <typename T>
    void Scalar(T v) {
      Bytes(&v, sizeof v);  // little-endian host
    }
    void U32(std::uint32_t v) { Scalar(v); }
    void U64(std::uint64_t v) { Scalar(v); }
    void String(const std::string& s) {
      U64(s.size());
      Bytes(s.data(), s.size());
    }
  };

  std::uint64_t Pad(std::uint64_t n) const {
    return layout_alignment_ == 0 ? n : (n + layout_alignment_ - 1) / layout_alignment_ * layout_alignment_;
  }

  static void WriteValue(Writer& out, GgufValueType type, const GgufValue& v) {
    switch (type) {
      case GgufValueType::UINT8:
      case GgufValueType::INT8:
        return out.Scalar(static_cast<std::uint8_t>(v.integer));
      case GgufValueType::UINT16:
      case GgufValueType::INT16:
        return out.Scalar(static_cast<std::uint16_t>(v.integer));
      case GgufValueType::UINT32:
      case GgufValueType::INT32:
        return out.Scalar(static_cast<std::uint32_t>(v.integer));
      case GgufValueType::UINT64:
      case GgufValueType::INT64:
        return out.Scalar(static_cast<std::uint64_t>(v.integer));
      case GgufValueType::FLOAT32:
        return out.Scalar(static_cast<float>(v.number));
      case GgufValueType::FLOAT64:
        return out.Scalar(v.number);
      case GgufValueType::BOOL:
        return out.Scalar(static_cast<std::uint8_t>(v.boolean ? 1 : 0));
      case GgufValueType::STRING:
        return out.String(v.string);
      case GgufValueType::ARRAY:
        out.U32(static_cast<std::uint32_t>(v.element_type));
        out.U64(v.elements.size());
        for (const GgufValue& e : v.elements) WriteValue(out, v.element_type, e);
        return;
    }
  }

  std::uint32_t version_ = 3;
  std::uint64_t layout_alignment_ = 32;
  std::vector<Kv> kvs_;
  std::vector<GgufTensorSpec> tensors_;
};

}  // namespace plumb::testing
