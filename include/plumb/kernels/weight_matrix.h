// WeightMatrix: a weight matrix as stored, in any of the element types the kernels compute with.
//
// A Linear layer y = W·x stores W as [rows = out_features][cols = in_features], row-major. A row is
// `row_bytes` bytes of `type` elements: plain FP32/FP16/BF16 values, or GGUF blocks (Q8_0, Q4_0, Q4_1, ...;
// docs/formats.md "GGUF blocks"), always whole blocks, since a block never straddles two rows. Model code
// hands these to kernels::Gemv / kernels::Gemm and never decodes a row itself.
//
// The bytes are either the matrix's own (FromF32, FromBytes) or a view into a mapped model file that
// `owner` keeps alive, so a GGUF model's quantized weights are used in place, never expanded to FP32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "plumb/formats/ggml_types.h"
#include "plumb/kernels/matrix.h"

namespace plumb {

struct WeightMatrix {
  GgmlType type = GgmlType::F32;
  int rows = 0;
  int cols = 0;
  std::size_t row_bytes = 0;
  const std::uint8_t* data = nullptr;  // rows × row_bytes
  std::shared_ptr<const void> owner;   // keeps `data` alive

  const std::uint8_t* Row(int r) const { return data + static_cast<std::size_t>(r) * row_bytes; }
  std::size_t Bytes() const { return static_cast<std::size_t>(rows) * row_bytes; }

  // Takes ownership of an FP32 matrix.
  static WeightMatrix FromF32(MatrixF32 matrix);
  // Copies `bytes` (rows × GgmlRowBytes(type, cols)) into a matrix that owns them. Throws plumb::Error if
  // cols is not a whole number of blocks or the size does not match.
  static WeightMatrix FromBytes(GgmlType type, int rows, int cols, std::vector<std::uint8_t> bytes);
  // A view of rows × cols elements at `data`, kept alive by `owner`.
  static WeightMatrix View(GgmlType type, int rows, int cols, const std::uint8_t* data,
                           std::shared_ptr<const void> owner);
};

}  // namespace plumb
