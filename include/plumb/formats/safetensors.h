// Reading and writing safetensors files (the Hugging Face weight format).
//
// Layout, dtypes and every check the reader makes are specified in docs/formats.md, section "safetensors".
// The reader memory-maps the file and validates the whole header up front, so that after Open() every
// tensor's bytes are known to lie inside the file; reading a tensor never fails for a structural reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "plumb/core/mapped_file.h"
#include "plumb/formats/dtype.h"

namespace plumb {

// One tensor of a safetensors file, as described by its header entry.
struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;  // row-major; empty for a scalar (one element)
  std::size_t data_begin = 0;       // byte offsets relative to the start of the data section,
  std::size_t data_end = 0;         // i.e. the header's "data_offsets" [begin, end)

  // Product of the dims (1 for a scalar, 0 if any dim is 0). Validated not to overflow.
  std::int64_t NumElements() const;
  std::size_t NumBytes() const { return data_end - data_begin; }
};

class SafetensorsFile {
 public:
  // Memory-maps `path` and validates everything (docs/formats.md). Throws plumb::Error naming the path, the
  // offending field or tensor and the bad value or offset.
  static SafetensorsFile Open(const std::string& path);
  // The same validation over bytes in memory; `name` stands for the path in messages and in path().
  static SafetensorsFile FromBytes(std::vector<std::uint8_t> bytes, std::string name);

  const std::string& path() const { return path_; }
  // All tensors, ordered by data_begin (then data_end, then name).
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // The "__metadata__" string map (empty if the header has none).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Absolute file offset of the data section (8 + header length).
  std::size_t data_section_offset() const { return data_section_offset_; }

  bool Contains(std::string_view name) const;
  // Throws plumb::Error naming the file and the tensor if there is no such tensor.
  const TensorInfo& Info(std::string_view name) const;
  // The tensor's raw little-endian bytes (no alignment guaranteed).
  std::span<const std::uint8_t> Bytes(std::string_view name) const;

  // The tensor converted to float32 from F32, F16, BF16 or F64 (F64 rounds to nearest; out of range gives
  // +-inf). Throws if the dtype is not a float type, or, when expected_shape is non-empty, if the tensor's
  // shape differs (the message gives the file, the tensor, the expected and the actual shape). A scalar
  // tensor has shape [] and so cannot be checked against a shape this way.
  std::vector<float> ReadF32(std::string_view name, std::span<const std::int64_t> expected_shape = {}) const;
  // The tensor converted (exactly) to double from F64, F32, F16 or BF16.
  std::vector<double> ReadF64(std::string_view name) const;
  // The tensor as int32 from I32, or from I64 if every value fits (else throws naming the element).
  std::vector<std::int32_t> ReadI32(std::string_view name) const;

 private:
  SafetensorsFile() = default;
  void Parse();  // validates storage_ and fills everything else; throws plumb::Error

  std::string path_;
  MappedFile mapped_;                // the file, for Open()
  std::vector<std::uint8_t> owned_;  // the bytes, for FromBytes()
  std::span<const std::uint8_t>
      all_;  // whichever of the two holds the file (both keep their address on move)
  std::span<const std::uint8_t> data_;  // the data section: all_ after the header
  std::size_t data_section_offset_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::size_t, std::less<>> index_;  // name -> position in tensors_
  std::map<std::string, std::string> metadata_;
};

// A tensor for the writer: `bytes` are the little-endian element bytes, exactly numel * DTypeSize(dtype).
struct TensorToWrite {
  std::string name;
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;
};

// The bytes of a safetensors file holding `tensors` and `metadata`. Deterministic: tensors are laid out in
// order of name (the input order does not matter), the header is compact JSON with sorted keys, padded with
// spaces so the data section starts at a multiple of 8 bytes. Throws plumb::Error for a duplicate
// name, the reserved name "__metadata__", a negative dim, or a byte count that does not match the shape.
std::vector<std::uint8_t> SerializeSafetensors(std::vector<TensorToWrite> tensors,
                                               const std::map<std::string, std::string>& metadata = {});

// SerializeSafetensors, written to `path` (replacing it). Throws plumb::Error naming the path on I/O errors.
void WriteSafetensors(const std::string& path, std::vector<TensorToWrite> tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace plumb
