#include "plumb/kernels/weight_matrix.h"

#include <cmath>

#include "plumb/core/error.h"
#include "plumb/core/extent.h"
#include "plumb/formats/gguf_blocks.h"

namespace plumb {

std::size_t WeightMatrix::Bytes() const {
  return Extent(rows, row_bytes) + format->side_bytes(*this);
}

WeightMatrix WeightMatrix::FromF32(MatrixF32 matrix) {
  auto values = std::make_shared<std::vector<float>>(std::move(matrix.values));
  WeightMatrix w;
  w.type = GgmlType::F32;
  w.rows = matrix.rows;
  w.cols = matrix.cols;
  w.row_bytes = Extent(matrix.cols, sizeof(float));
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
  // A matrix that exists can be computed with: the kernels check nothing per call.
  if (!CanDequantize(type)) {
    throw MakeError("a ", rows, " x ", cols, " ", GgmlTypeName(type),
                    " matrix: plumb has no kernels for this type (supported: ", DequantizableTypeNames(),
                    ")");
  }
  WeightMatrix w;
  w.type = type;
  w.rows = rows;
  w.cols = cols;
  w.row_bytes = static_cast<std::size_t>(GgmlRowBytes(type, cols));
  w.data = data;
  w.owner = std::move(owner);
  return w;
}

WeightMatrix WeightMatrix::Fp8View(Fp8Format fp8, int rows, int cols, const std::uint8_t* codes,
                                   const float* scales, bool per_row, std::shared_ptr<const void> owner) {
  WeightMatrix w;
  w.format = &kernels::kFp8Format;
  w.type = GgmlType::I8;  // not a ggml matrix; a type no kernel accepts, so a mix-up fails loudly
  w.rows = rows;
  w.cols = cols;
  w.row_bytes = static_cast<std::size_t>(cols);
  w.data = codes;
  w.owner = std::move(owner);
  w.fp8_format = fp8;
  w.fp8_per_row = per_row;
  w.fp8_scales = scales;
  return w;
}

WeightMatrix WeightMatrix::Int4View(Int4Params params, int rows, int cols, const std::uint8_t* codes,
                                    const std::uint16_t* scales, const std::uint8_t* zeros,
                                    std::shared_ptr<const void> owner) {
  if (params.group_size != 32 && params.group_size != 64 && params.group_size != 128) {
    throw MakeError("INT4 group size ", params.group_size, ": expected 32, 64 or 128");
  }
  if ((zeros == nullptr) != (params.scheme == Int4Scheme::kSymmetric)) {
    throw MakeError("INT4 ", Int4SchemeName(params.scheme), " matrix ",
                    zeros == nullptr ? "needs zero points" : "has zero points it cannot use");
  }
  WeightMatrix w;
  w.format = &kernels::kInt4Format;
  w.type = GgmlType::I8;  // see Fp8View
  w.rows = rows;
  w.cols = cols;
  w.row_bytes = Int4RowBytes(cols);
  w.data = codes;
  w.owner = std::move(owner);
  w.int4 = params;
  w.int4_scales = scales;
  w.int4_zeros = zeros;
  return w;
}

WeightMatrix WeightMatrix::MicroscaledView(MicroscalingScheme scheme, int rows, int cols,
                                           const std::uint8_t* codes, const std::uint8_t* scales,
                                           float tensor_scale, std::shared_ptr<const void> owner) {
  const bool nvfp4 = scheme == MicroscalingScheme::kNvfp4;
  if (nvfp4 ? !(std::isfinite(tensor_scale) && tensor_scale > 0.0f) : tensor_scale != 1.0f) {
    throw MakeError("a ", rows, " x ", cols, " ", MicroscalingSchemeName(scheme),
                    " matrix with tensor scale ", tensor_scale,
                    nvfp4 ? ": expected a positive finite number" : ": MX schemes have none (1)");
  }
  WeightMatrix w;
  w.format = &kernels::kMicroscaledFormat;
  w.type = GgmlType::I8;  // not a ggml matrix; a type no kernel accepts, so a mix-up fails loudly
  w.rows = rows;
  w.cols = cols;
  w.row_bytes = MicroscaledRowBytes(scheme, cols);
  w.data = codes;
  w.owner = std::move(owner);
  w.mx_scheme = scheme;
  w.mx_scales = scales;
  w.mx_tensor_scale = tensor_scale;
  return w;
}

WeightMatrix WeightMatrix::FromMicroscaled(MicroscaledMatrix matrix) {
  auto storage = std::make_shared<MicroscaledMatrix>(std::move(matrix));
  return MicroscaledView(storage->scheme, storage->rows, storage->cols, storage->codes.data(),
                         storage->scales.data(), storage->tensor_scale, storage);
}

WeightMatrix WeightMatrix::BlockFp8View(int rows, int cols, const std::uint8_t* codes, const float* scales,
                                        std::shared_ptr<const void> owner) {
  WeightMatrix w;
  w.format = &kernels::kBlockFp8Format;
  w.type = GgmlType::I8;  // see Fp8View
  w.rows = rows;
  w.cols = cols;
  w.row_bytes = static_cast<std::size_t>(cols);
  w.data = codes;
  w.owner = std::move(owner);
  w.fp8_block_scales = scales;
  return w;
}

WeightMatrix WeightMatrix::FromBlockFp8(BlockFp8Matrix matrix) {
  auto storage = std::make_shared<BlockFp8Matrix>(std::move(matrix));
  return BlockFp8View(storage->rows, storage->cols, storage->codes.data(), storage->scales.data(), storage);
}

}  // namespace plumb
