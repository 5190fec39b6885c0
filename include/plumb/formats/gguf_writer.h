// plumb::GgufWriter: writes GGUF version 3 files, little-endian, exactly as docs/formats.md ("GGUF
// container", "Writing GGUF") lays them out and GgufFile (gguf.h) reads them back.
//
// Metadata of every value type (the integers, FLOAT32/64, BOOL, STRING, arrays of any of them and arrays of
// arrays) and, optionally, tensors. Everything the reader would reject is refused when it is added, with a
// plumb::Error naming the key or tensor, so that what Bytes() returns always opens:
//
//   GgufWriter writer;
//   writer.Add("general.architecture", GgufString("llama"))
//       .Add("tokenizer.ggml.tokens", GgufStringArray({"<unk>", "<s>", "</s>"}));
//   writer.WriteFile("tokenizer.gguf");
//
// The encoding functions below (GgufAppend*) are the writer's building blocks and perform no checks: the
// test builder of deliberately malformed files (tests/support/gguf_builder.h) shares them.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "plumb/formats/ggml_types.h"
#include "plumb/formats/gguf.h"

namespace plumb {

// ---------------------------------------------------------------------------------------------------------
// Values: plumb::GgufValue is both what the reader returns and what the writer writes.

GgufValue GgufInteger(GgufValueType type, std::int64_t integer);  // any integer type, value as is
GgufValue GgufUint8(std::uint8_t v);
GgufValue GgufInt8(std::int8_t v);
GgufValue GgufUint16(std::uint16_t v);
GgufValue GgufInt16(std::int16_t v);
GgufValue GgufUint32(std::uint32_t v);
GgufValue GgufInt32(std::int32_t v);
GgufValue GgufUint64(std::uint64_t v);  // held as its two's-complement bit pattern, as the reader does
GgufValue GgufInt64(std::int64_t v);
GgufValue GgufFloat32(float v);
GgufValue GgufFloat64(double v);
GgufValue GgufBool(bool v);
GgufValue GgufString(std::string v);
// An array of `element_type`. GgufWriter requires every element's own `type` to be element_type; the
// encoder writes each element as element_type whatever its `type` says.
GgufValue GgufArray(GgufValueType element_type, std::vector<GgufValue> elements);
GgufValue GgufStringArray(const std::vector<std::string>& strings);
GgufValue GgufIntArray(GgufValueType element_type, const std::vector<std::int64_t>& integers);
GgufValue GgufFloat32Array(const std::vector<float>& numbers);

// ---------------------------------------------------------------------------------------------------------
// Encoding (docs/formats.md "Layout"), appended to `out`; no checks.

void GgufAppendU32(std::vector<std::uint8_t>& out, std::uint32_t v);
void GgufAppendU64(std::vector<std::uint8_t>& out, std::uint64_t v);
// magic "GGUF", version, tensor_count, kv_count: 24 bytes.
void GgufAppendHeader(std::vector<std::uint8_t>& out, std::uint32_t version, std::uint64_t tensor_count,
                      std::uint64_t kv_count);
void GgufAppendString(std::vector<std::uint8_t>& out, std::string_view s);  // uint64 length, then the bytes
// The value's bytes as `type` (without a type field of its own): integers truncated to the type's width,
// FLOAT32 rounded from `number`, an array's element type, count and elements.
void GgufAppendValue(std::vector<std::uint8_t>& out, GgufValueType type, const GgufValue& value);
// n rounded up to a multiple of `alignment` (n itself for alignment 0).
std::uint64_t GgufAlignUp(std::uint64_t n, std::uint64_t alignment);

// ---------------------------------------------------------------------------------------------------------
// The writer

class GgufWriter {
 public:
  // Metadata, written in the order added. Throws plumb::Error naming the key for: an empty or repeated key;
  // a value type id outside 0..12; an integer outside its type's range; a FLOAT32 value a float cannot
  // hold exactly; an array element whose type is not the array's element type; arrays nested more than 64
  // deep; a general.alignment that is not a UINT32 power of two (when it is one, tensors are laid out with
  // it; the default is 32).
  GgufWriter& Add(std::string key, GgufValue value);
  // Tensors, written in the order added, each at the previous one's end rounded up to the alignment (as
  // gguf-py and llama.cpp place them). `data` is the tensor's bytes as stored. Throws plumb::Error naming
  // the tensor for: an empty or repeated name, 0 or more than 4 dims, a dim of 0, dims[0] not a whole number
  // of the type's blocks, more than 2^63 - 1 elements, or data of the wrong size.
  GgufWriter& AddTensor(std::string name, GgmlType type, std::vector<std::uint64_t> dims,
                        std::vector<std::uint8_t> data);

  bool Has(std::string_view key) const { return keys_.contains(key); }
  std::uint64_t alignment() const { return alignment_; }

  // The whole file: header, metadata, tensor infos, zero padding to the alignment, the tensors' data (each
  // padded with zeros to the alignment, the last one too).
  std::vector<std::uint8_t> Bytes() const;
  // Bytes(), written to `path` (replacing it). Throws plumb::Error naming the path on an I/O error.
  void WriteFile(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<std::uint64_t> dims;
    std::vector<std::uint8_t> data;
  };

  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::set<std::string, std::less<>> keys_;
  std::vector<Tensor> tensors_;
  std::set<std::string, std::less<>> tensor_names_;
  std::uint64_t alignment_ = 32;
};

}  // namespace plumb
