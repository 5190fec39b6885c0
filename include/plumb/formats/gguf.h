// plumb::GgufFile: a bounds-checked reader of GGUF files (versions 2 and 3), the format of llama.cpp.
//
// Open() maps the file, parses the header, every metadata key/value (all 13 value types, arrays of arrays
// up to 64 deep) and every tensor info, and checks each count, string length, dimension, offset and size
// against the file before using it. Tensor data is not copied: GgufTensorInfo::data points into the
// mapping, which lives as long as the GgufFile (moving the GgufFile keeps it). The container layout and
// every check are in docs/formats.md, section "GGUF container".
//
// Every error is a plumb::Error whose message names the file, the field and the byte offset where it was
// read, e.g. "model.gguf: tensor 3 ('blk.0.attn_q.weight') dims[1] at offset 1234: ...".
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "plumb/core/mapped_file.h"
#include "plumb/formats/ggml_types.h"

namespace plumb {

enum class GgufValueType : std::uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};

std::string_view GgufValueTypeName(GgufValueType type);  // "uint32", "string", "array", ...

// One metadata value. Integers of every width are held in `integer` (signed types sign-extended, uint64
// values above INT64_MAX kept as their two's-complement bit pattern: use `type` to tell), floats in
// `number`, bools in `boolean`, strings in `string`; arrays have `element_type` and `elements`.
struct GgufValue {
  GgufValueType type = GgufValueType::UINT8;
  std::int64_t integer = 0;
  double number = 0;
  bool boolean = false;
  std::string string;
  GgufValueType element_type = GgufValueType::UINT8;  // arrays only
  std::vector<GgufValue> elements;                    // arrays only
};

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<std::uint64_t> dims;  // dims[0] is the innermost (contiguous) dimension, as in ggml
  std::uint64_t offset = 0;         // relative to the start of the data section, as stored
  std::uint64_t file_offset = 0;    // absolute offset of the data in the file
  std::uint64_t n_elements = 0;     // product of dims
  std::uint64_t n_bytes = 0;        // n_elements / block_elements * block_bytes
  // Into the mapping: n_bytes readable bytes. file_offset is a multiple of the alignment; with Open() the
  // mapping starts on a page, with FromBytes() only malloc's alignment is promised.
  const std::uint8_t* data = nullptr;

  std::span<const std::uint8_t> bytes() const { return {data, static_cast<std::size_t>(n_bytes)}; }
};

class GgufFile {
 public:
  static GgufFile Open(const std::string& path);
  // Parses an in-memory image (tests); `name` stands in for the path in messages. The bytes are copied.
  static GgufFile FromBytes(std::span<const std::uint8_t> bytes, const std::string& name);

  const std::string& path() const { return path_; }
  std::uint32_t version() const { return version_; }
  std::uint64_t alignment() const { return alignment_; }      // general.alignment, default 32
  std::uint64_t data_offset() const { return data_offset_; }  // start of the data section

  // Metadata, in file order, and lookup by key.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* FindValue(std::string_view key) const;  // nullptr when absent
  bool Has(std::string_view key) const { return FindValue(key) != nullptr; }

  // Typed getters. Get* throws "<file>: metadata key '<key>' is missing" when absent and
  // "<file>: metadata key '<key>' has type <t>, expected <what>" on a type mismatch. Find* return nullopt
  // when the key is absent (and still throw on a type mismatch).
  //   Uint: any integer type whose value is >= 0 (a negative value is an error naming it).
  //   Float: FLOAT32 or FLOAT64.  Bool: BOOL.  String: STRING.
  //   StringArray / FloatArray / IntArray: an ARRAY of STRING / of FLOAT32|FLOAT64 / of any integer type.
  std::uint64_t GetUint(std::string_view key) const;
  std::optional<std::uint64_t> FindUint(std::string_view key) const;
  double GetFloat(std::string_view key) const;
  std::optional<double> FindFloat(std::string_view key) const;
  bool GetBool(std::string_view key) const;
  std::optional<bool> FindBool(std::string_view key) const;
  const std::string& GetString(std::string_view key) const;
  std::optional<std::string> FindString(std::string_view key) const;
  std::vector<std::string> GetStringArray(std::string_view key) const;
  std::vector<double> GetFloatArray(std::string_view key) const;
  std::vector<std::int64_t> GetIntArray(std::string_view key) const;

  // Tensors, in file order, and lookup by name (names are unique: a duplicate is a parse error).
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* FindTensor(std::string_view name) const;  // nullptr when absent

 private:
  std::string path_;
  MappedFile mapping_;
  std::vector<std::uint8_t> owned_;  // FromBytes' copy
  std::uint32_t version_ = 0;
  std::uint64_t alignment_ = 32;
  std::uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::map<std::string, std::size_t, std::less<>> metadata_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, std::size_t, std::less<>> tensor_index_;

  friend class GgufParser;
};

}  // namespace plumb
