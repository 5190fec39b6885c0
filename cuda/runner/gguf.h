// A small GGUF reader for the runner's model cases (docs/fixtures.md "layer", "end_to_end", "kv_handoff"):
// the header, the metadata and the tensor directory of a GGUF file held in memory, every count, length and
// offset checked against the file's size before it is used. The runner links no plumb library (the nvcc-only
// build of cuda/check-on-gpu.sh compiles it alone), so it has its own reader, as an engine would.
//
// The file format (ggml's docs/gguf.md), all little-endian:
//   "GGUF", version u32 (2 or 3), tensor count u64, metadata count u64,
//   metadata: key (string), value type u32, value        a string is a u64 length and its bytes
//   tensors:  name (string), n_dims u32, dims u64[n_dims] (dims[0] the innermost: a matrix's columns),
//             GGML type u32, offset u64 (from the start of the data section, a multiple of the alignment)
//   padding to general.alignment (default 32), then the data section.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace plumb::cuda {

// The GGML tensor types the harness's kernels decode (kernels.h WeightDtype: the same bytes); the reader
// knows the sizes of others only to say which type a refused tensor has.
enum class GgmlType : std::uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ8_0 = 8,
  kBf16 = 30,
};

// One metadata value: its GGUF value type and the value, for the scalar types and strings (arrays are
// skipped, with bounds checks, and keep only their element type and count).
struct GgufValue {
  std::uint32_t type = 0;  // 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool, 8 string, 9 array,
                           // 10 u64, 11 i64, 12 f64
  std::uint64_t u = 0;     // the unsigned types and bool
  std::int64_t i = 0;      // the signed types
  double f = 0.0;          // f32, f64
  std::string s;           // string
  std::uint32_t array_type = 0;
  std::uint64_t array_count = 0;
};

struct GgufTensor {
  std::string name;
  std::uint32_t type = 0;           // GGML type id (GgmlType for the decodable ones)
  std::vector<std::uint64_t> dims;  // dims[0] innermost
  std::uint64_t offset = 0;         // from the start of the file (not of the data section)
  std::uint64_t bytes = 0;          // its size, from the type and dims
  std::uint64_t Rows() const;       // the product of dims[1..]
  std::uint64_t Columns() const { return dims.empty() ? 1 : dims[0]; }
};

// The name of a GGML type id ("Q6_K", "type 99" for one the reader does not know).
std::string GgmlTypeName(std::uint32_t type);
// Whether kernels.h's Gemv decodes a tensor of this type (F32, F16, BF16, Q4_0, Q4_1, Q8_0).
bool IsDecodable(std::uint32_t type);
// Bytes of one row of `columns` elements of a type (a multiple of its block size: checked by the caller).
std::uint64_t GgmlRowBytes(std::uint32_t type, std::uint64_t columns);

class GgufFile {
 public:
  // Parses the header, metadata and tensor directory of `file` (the whole file's bytes, which must outlive
  // the GgufFile: tensors are views into it). Throws plumb::Error naming `name`, the offset and the field
  // for anything malformed: a bad magic or version, a length or count past the end of the file, a tensor
  // type the reader does not know, dims whose block size does not divide the row, a tensor whose offset is
  // not aligned or whose data runs past the end of the file, a repeated key or tensor name.
  static GgufFile Parse(std::span<const std::uint8_t> file, const std::string& name);

  const std::string& name() const { return name_; }
  std::uint32_t version() const { return version_; }
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }

  bool Has(const std::string& key) const { return metadata_.count(key) != 0; }
  // Metadata `key` as an unsigned integer (any integer type, non-negative), a float (f32 or f64) or a
  // string; each throws naming the key if it is absent or of another type.
  std::uint64_t Uint(const std::string& key) const;
  double Float(const std::string& key) const;
  std::string String(const std::string& key) const;

  const GgufTensor* Find(const std::string& tensor) const;  // null if absent
  // The tensor's bytes (inside the file: Parse checked).
  std::span<const std::uint8_t> Data(const GgufTensor& t) const {
    return file_.subspan(static_cast<std::size_t>(t.offset), static_cast<std::size_t>(t.bytes));
  }

 private:
  std::span<const std::uint8_t> file_;
  std::string name_;
  std::uint32_t version_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensor> tensors_;
};

}  // namespace plumb::cuda
