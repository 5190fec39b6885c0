#include "plumb/kernels/weight_matrix.h"

#include "plumb/core/error.h"
#include "plumb/formats/gguf_blocks.h"

namespace plumb {

WeightMatrix WeightMatrix::FromF32(MatrixF32 matrix) {
  auto values = std::make_shared<std::vector<float>>(std::move(matrix.values));
  WeightMatrix w;
  w.type = GgmlType::F32;
  w.rows = matrix.rows;
  w.cols = matrix.cols;
  w.row_bytes = static_cast<std::size_t>(matrix.cols) * sizeof(float);
  w.data = reinterpret_cast<const std::uint8_t*>(values->data());
  w.owner = std::move(values);
  return w;
}

WeightMatrix WeightMatrix::FromBytes(GgmlType type, int rows, int cols, std::vector<std::uint8_t> bytes) {
  const std::size_t row_bytes = static_cast<std::size_t>(GgmlRowBytes(type, cols));
  if (bytes.size() != row_bytes * static_cast<std::size_t>(rows)) {
    throw MakeError("a ", rows, " x ", cols, " ", GgmlTypeName(type), " matrix needs ", row_bytes * rows,
                    " bytes, got ", bytes.size());
  }
  auto storage = std::make_shared<std::vector<std::uint8_t>>(std::move(bytes));
  return View(type, rows, cols, storage->data(), storage);
}

WeightMatrix WeightMatrix::View(GgmlType type, int rows, int cols, const std::uint8_t* data,
                                std::shared_ptr<const void> owner) {
  WeightMatrix w;
  w.type = type;
  w.rows = rows;
  w.cols = cols;
  w.row_bytes = static_cast<std::size_t>(GgmlRowBytes(type, cols));
  w.data = data;
  w.owner = std::move(owner);
  return w;
}

}  // namespace plumb
