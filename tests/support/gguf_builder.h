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
// alignment; the section ends padded too. Values, strings and padding are encoded by the library's writer
// functions (plumb/formats/gguf_writer.h), so a valid file built here is byte for byte what plumb::GgufWriter
// writes (tests/formats/gguf_writer_test.cpp checks it); what this builder adds is the freedom to write
// malformed files and the offsets of every field.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "plumb/formats/ggml_types.h"
#include "plumb/formats/gguf.h"
#include "plumb/formats/gguf_writer.h"

namespace plumb::testing {

// ---------------------------------------------------------------------------------------------------------
// Values: the constructors of plumb/formats/gguf_writer.h (plumb::GgufValue is both what the reader returns
// and what the builder writes)

using plumb::GgufArray;
using plumb::GgufBool;
using plumb::GgufFloat32;
using plumb::GgufFloat32Array;
using plumb::GgufFloat64;
using plumb::GgufInt16;
using plumb::GgufInt32;
using plumb::GgufInt64;
using plumb::GgufInt8;
using plumb::GgufIntArray;
using plumb::GgufInteger;
using plumb::GgufString;
using plumb::GgufStringArray;
using plumb::GgufUint16;
using plumb::GgufUint32;
using plumb::GgufUint64;
using plumb::GgufUint8;

// One value of every type, with the edge cases of each (extremes, NaN, denormal, empty and binary strings,
// empty and nested arrays, a key that is not UTF-8): the round-trip tests of the reader and of the writer.
inline std::vector<std::pair<std::string, GgufValue>> GgufValueSamples() {
  return {
      {"u8", GgufUint8(255)},
      {"i8", GgufInt8(-128)},
      {"u16", GgufUint16(65535)},
      {"i16", GgufInt16(-32768)},
      {"u32", GgufUint32(0xFFFFFFFFu)},
      {"i32", GgufInt32(std::numeric_limits<std::int32_t>::min())},
      {"u64", GgufUint64(std::numeric_limits<std::uint64_t>::max())},
      {"u64.above_int64", GgufUint64((std::uint64_t{1} << 63) + 7)},
      {"i64", GgufInt64(std::numeric_limits<std::int64_t>::min())},
      {"f32", GgufFloat32(0.1f)},
      {"f32.nan", GgufFloat32(std::numeric_limits<float>::quiet_NaN())},
      {"f32.denorm", GgufFloat32(std::numeric_limits<float>::denorm_min())},
      {"f64", GgufFloat64(-1e300)},
      {"f64.nan", GgufFloat64(-std::numeric_limits<double>::quiet_NaN())},
      {"bool.t", GgufBool(true)},
      {"bool.f", GgufBool(false)},
      {"str", GgufString("hello")},
      {"str.empty", GgufString("")},
      {"str.binary", GgufString(std::string("a\0b\xff", 4))},
      {"arr.empty", GgufArray(GgufValueType::UINT32, {})},
      {"arr.str", GgufStringArray({"x", "", "yz"})},
      {"arr.f32", GgufFloat32Array({1.5f, -0.0f})},
      {"arr.nested3", GgufArray(GgufValueType::ARRAY,
                                {GgufArray(GgufValueType::ARRAY, {GgufIntArray(GgufValueType::INT8, {-1}),
                                                                  GgufArray(GgufValueType::INT8, {})}),
                                 GgufArray(GgufValueType::ARRAY, {})})},
      {std::string("\xff\xfe key not UTF-8"), GgufUint8(1)},
  };
}

// Compares a value read by plumb with the value written: same type and payload, bit for bit for floats
// (NaNs included).
inline void ExpectSameGgufValue(const GgufValue& got, const GgufValue& want, const std::string& where) {
  SCOPED_TRACE(where);
  ASSERT_EQ(got.type, want.type);
  switch (want.type) {
    case GgufValueType::FLOAT32:
      EXPECT_EQ(std::bit_cast<std::uint32_t>(static_cast<float>(got.number)),
                std::bit_cast<std::uint32_t>(static_cast<float>(want.number)));
      break;
    case GgufValueType::FLOAT64:
      EXPECT_EQ(std::bit_cast<std::uint64_t>(got.number), std::bit_cast<std::uint64_t>(want.number));
      break;
    case GgufValueType::BOOL:
      EXPECT_EQ(got.boolean, want.boolean);
      break;
    case GgufValueType::STRING:
      EXPECT_EQ(got.string, want.string);
      break;
    case GgufValueType::ARRAY:
      ASSERT_EQ(got.element_type, want.element_type);
      ASSERT_EQ(got.elements.size(), want.elements.size());
      for (std::size_t i = 0; i < want.elements.size(); ++i) {
        ExpectSameGgufValue(got.elements[i], want.elements[i], where + "[" + std::to_string(i) + "]");
      }
      break;
    default:
      EXPECT_EQ(got.integer, want.integer);
  }
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
    std::vector<std::uint8_t>& out = image.bytes;
    GgufAppendHeader(out, version_, tensors_.size(), kvs_.size());  // fields at GgufLayout's defaults

    for (const Kv& kv : kvs_) {
      GgufLayout::Kv& at = image.at.kvs.emplace_back();
      at.key_at = out.size();
      GgufAppendString(out, kv.key);
      at.type_at = out.size();
      GgufAppendU32(out, kv.type_id);
      at.value_at = out.size();
      if (kv.value) {
        GgufAppendValue(out, kv.value->type, *kv.value);
      } else {
        out.insert(out.end(), kv.raw.begin(), kv.raw.end());
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
      at.name_at = out.size();
      GgufAppendString(out, t.name);
      at.n_dims_at = out.size();
      GgufAppendU32(out, static_cast<std::uint32_t>(t.dims.size()));
      at.dims_at = out.size();
      for (const std::uint64_t d : t.dims) GgufAppendU64(out, d);
      at.type_at = out.size();
      GgufAppendU32(out, t.type_id);
      at.offset_at = out.size();
      GgufAppendU64(out, offsets[i]);
    }
    image.at.infos_end = out.size();
    image.at.data_offset = Pad(out.size());
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

  std::uint64_t Pad(std::uint64_t n) const { return GgufAlignUp(n, layout_alignment_); }

  std::uint32_t version_ = 3;
  std::uint64_t layout_alignment_ = 32;
  std::vector<Kv> kvs_;
  std::vector<GgufTensorSpec> tensors_;
};

}  // namespace plumb::testing
