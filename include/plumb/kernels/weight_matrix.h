// WeightMatrix: a weight matrix as stored, in any of the formats the kernels compute with.
//
// A Linear layer y = W·x stores W as [rows = out_features][cols = in_features], row-major. A row is
// `row_bytes` bytes in the format `format` names (kernels/weight_format.h: its codec, i.e. its kernels,
// size and scale rules):
//   kGgmlFormat  `type` elements: plain FP32/FP16/BF16 values, or GGUF blocks (Q8_0, Q4_0, Q4_1, ...;
//                docs/formats.md "GGUF blocks"), always whole blocks, since a block never straddles two rows.
//   kFp8Format   one FP8 code per element (`fp8_format`, formats/fp8.h), and an FP32 scale per row or one for
//                the whole matrix (`fp8_scales`, `fp8_per_row`). The scale is applied to the dot product, as
//                GPU epilogues do: y[r] = scale_r · Dot(decoded row r, x) (docs/formats.md "FP8").
//   kInt4Format  4-bit codes with FP16 group scales (and zero points), `int4` says which (formats/int4.h).
//   kMicroscaledFormat  FP4 or FP8 element codes in blocks of 32 or 16 that share an E8M0 or E4M3 scale, and
//                NVFP4's FP32 tensor scale, applied to the dot product as FP8's is (formats/microscaling.h).
//   kBlockFp8Format  one FP8 E4M3 code per element and an FP32 scale per 128 × 128 block (`fp8_block_scales`,
//                formats/block_fp8.h): each element decoded as its code's value times its block's scale.
// `type` and the fields below `owner` are the parameters and side arrays of one format each; the others
// leave them at their defaults. Model code hands these matrices to kernels::Gemv / kernels::Gemm and never
// decodes a row itself.
//
// The bytes are either the matrix's own (FromF32, FromBytes) or a view into a mapped model file that
// `owner` keeps alive, so a GGUF model's quantized weights are used in place, never expanded to FP32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "plumb/core/extent.h"
#include "plumb/formats/block_fp8.h"
#include "plumb/formats/fp8.h"
#include "plumb/formats/ggml_types.h"
#include "plumb/formats/int4.h"
#include "plumb/formats/microscaling.h"
#include "plumb/kernels/matrix.h"
#include "plumb/kernels/weight_format.h"

namespace plumb {

struct WeightMatrix {
  const kernels::WeightFormat* format = &kernels::kGgmlFormat;  // never null
  GgmlType type = GgmlType::F32;                                // kGgmlFormat only
  int rows = 0;
  int cols = 0;
  std::size_t row_bytes = 0;
  const std::uint8_t* data = nullptr;  // rows × row_bytes
  std::shared_ptr<const void> owner;   // keeps `data` and the arrays below alive

  // kFp8Format only.
  Fp8Format fp8_format = Fp8Format::kE4M3;
  bool fp8_per_row = true;
  const float* fp8_scales = nullptr;  // [rows] when fp8_per_row, else [1]

  // kInt4Format only (formats/int4.h): data holds the codes.
  Int4Params int4;
  const std::uint16_t* int4_scales = nullptr;  // [rows][Int4Groups(cols, group_size)] FP16
  const std::uint8_t* int4_zeros = nullptr;    // [rows][Int4ZeroRowBytes(int4, cols)]; null for kSymmetric

  // kMicroscaledFormat only (formats/microscaling.h): data holds the element codes.
  MicroscalingScheme mx_scheme = MicroscalingScheme::kMxfp4;
  const std::uint8_t* mx_scales = nullptr;  // [rows][MicroscaledBlocks(mx_scheme, cols)] block scale codes
  float mx_tensor_scale = 1.0f;             // NVFP4's; 1 for the MX schemes

  // kBlockFp8Format only (formats/block_fp8.h): data holds the E4M3 codes.
  const float* fp8_block_scales = nullptr;  // [Fp8BlockCount(rows)][Fp8BlockCount(cols)]

  // Runs the exact kernels in either family (kernels/int8_activations.h): for a caller that needs the
  // definition whatever family the process runs (fixtures/ops.cpp's threaded definition rows).
  bool exact_only = false;

  const std::uint8_t* Row(int r) const { return data + Extent(r, row_bytes); }
  // Every byte the matrix is stored in: the rows and the format's side arrays (scales, zero points).
  std::size_t Bytes() const;
  bool Is(const kernels::WeightFormat& f) const { return format == &f; }
  // Plain FP32 rows, which the GEMMs hand to sgemm as they lie.
  bool IsF32() const { return format == &kernels::kGgmlFormat && type == GgmlType::F32; }

  // Takes ownership of an FP32 matrix.
  static WeightMatrix FromF32(MatrixF32 matrix);
  // Copies `bytes` (rows × GgmlRowBytes(type, cols)) into a matrix that owns them. Throws plumb::Error if
  // cols is not a whole number of blocks or the size does not match.
  static WeightMatrix FromBytes(GgmlType type, int rows, int cols, std::vector<std::uint8_t> bytes);
  // A view of rows × cols elements at `data`, kept alive by `owner`. Throws plumb::Error for a type without
  // kernels (CanDequantize false) or cols not a whole number of blocks.
  static WeightMatrix View(GgmlType type, int rows, int cols, const std::uint8_t* data,
                           std::shared_ptr<const void> owner);
  // A view of an FP8 matrix: rows × cols codes, and `scales` ([rows] when per_row, else [1]).
  static WeightMatrix Fp8View(Fp8Format fp8, int rows, int cols, const std::uint8_t* codes,
                              const float* scales, bool per_row, std::shared_ptr<const void> owner);
  // A view of an INT4 matrix laid out as formats/int4.h defines (zeros null for kSymmetric). Throws
  // plumb::Error for a group size other than 32, 64 or 128, or zeros missing / present against the scheme.
  static WeightMatrix Int4View(Int4Params params, int rows, int cols, const std::uint8_t* codes,
                               const std::uint16_t* scales, const std::uint8_t* zeros,
                               std::shared_ptr<const void> owner);
  // A view of a microscaled matrix laid out as formats/microscaling.h defines. Throws plumb::Error for a
  // tensor scale that is not a positive finite number, or other than 1 for an MX scheme (they have none).
  static WeightMatrix MicroscaledView(MicroscalingScheme scheme, int rows, int cols,
                                      const std::uint8_t* codes, const std::uint8_t* scales,
                                      float tensor_scale, std::shared_ptr<const void> owner);
  // Takes ownership of a quantized microscaled matrix.
  static WeightMatrix FromMicroscaled(MicroscaledMatrix matrix);
  // A view of a block-scaled FP8 matrix: rows × cols E4M3 codes and the [⌈rows/128⌉][⌈cols/128⌉] scales.
  static WeightMatrix BlockFp8View(int rows, int cols, const std::uint8_t* codes, const float* scales,
                                   std::shared_ptr<const void> owner);
  // Takes ownership of a quantized block-scaled FP8 matrix.
  static WeightMatrix FromBlockFp8(BlockFp8Matrix matrix);
};

}  // namespace plumb
