// The GGUF-type format's kernels that are not kernels/row_dot.h's (internal to src/kernels/). The vector
// ones are entered per type in the GGUF kernel table (ggml_kernel_table.h), which kGgmlFormat's x86 entries
// (ggml_format.cpp) look up; NEON's int8 entries look up the column of their path (sdot where the CPU has
// dotprod, else plain), and the *Path functions below take the path, so that the tests run both.
#pragma once

#include <cstddef>

#include "plumb/formats/ggml_types.h"
#include "plumb/kernels/weight_matrix.h"

namespace plumb::kernels {
struct Int8Activations;
}  // namespace plumb::kernels

namespace plumb::kernels::ggml {

// The fast family (ggml_int8.cpp, which states its definition): Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K,
// Q4_K, Q5_K and Q6_K rows whose columns are whole blocks.
bool HasInt8(const WeightMatrix& W);
// The types of HasInt8, whatever the row length.
bool HasInt8Type(GgmlType type);
// The types whose int8_gemm variants prepare each block once for several x rows: Q4_0 … Q8_0 (the K-quants
// run their row dots per x row).
bool HasInt8Gemm(const WeightMatrix& W);
inline constexpr const char* kInt8Covers = "GGUF Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K";

// Where a 32-element block of a type with int8 kernels keeps its codes (docs/formats.md "GGUF blocks"): the
// block's bytes, the offset of qs (Q5's qh is the 4 bytes before it), the offset subtracted from a code
// (Q4_0's 8, Q5_0's 16), whether it has a minimum m (w = d·q + m), whether its codes are unsigned and whether
// they have a fifth bit in qh. block_bytes is 0 for every other type (the K-quants: KLayout). One table for
// the scalar definition (at run time) and the x86 kernels (at compile time).
struct Int8Layout {
  int block_bytes = 0, qs = 0, offset = 0;
  bool has_min = false, is_unsigned = false, five_bits = false;
};
constexpr Int8Layout Int8LayoutOf(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0:
      return {.block_bytes = 18, .qs = 2, .offset = 8};
    case GgmlType::Q4_1:
      return {.block_bytes = 20, .qs = 4, .has_min = true, .is_unsigned = true};
    case GgmlType::Q5_0:
      return {.block_bytes = 22, .qs = 6, .offset = 16, .five_bits = true};
    case GgmlType::Q5_1:
      return {.block_bytes = 24, .qs = 8, .has_min = true, .is_unsigned = true, .five_bits = true};
    case GgmlType::Q8_0:
      return {.block_bytes = 34, .qs = 2};
    default:
      return {};
  }
}

// Where a K-quant super-block (256 elements, docs/formats.md "GGUF blocks") keeps its FP16 factors: its
// bytes and the offsets of d and dmin (−1 for Q3_K and Q6_K, which have none). block_bytes is 0 for every
// other type. Their codes and integer scales are read by each kernel as its type's layout says.
struct KLayout {
  int block_bytes = 0, d = 0, dmin = -1;
};
constexpr KLayout KLayoutOf(GgmlType type) {
  switch (type) {
    case GgmlType::Q2_K:
      return {.block_bytes = 84, .d = 80, .dmin = 82};
    case GgmlType::Q3_K:
      return {.block_bytes = 110, .d = 108};
    case GgmlType::Q4_K:
      return {.block_bytes = 144, .d = 0, .dmin = 2};
    case GgmlType::Q5_K:
      return {.block_bytes = 176, .d = 0, .dmin = 2};
    case GgmlType::Q6_K:
      return {.block_bytes = 210, .d = 208};
    default:
      return {};
  }
}

// The fast family's float rows (float_fma.cpp; the definition is kernels/simd/fma_dot.h's): F32, F16, BF16.
bool HasFma(const WeightMatrix& W);
bool HasFmaType(GgmlType type);  // the same, by type
inline constexpr const char* kFmaCovers = "F32, F16, BF16";

// The integer scale c and minimum of each 16-element sub-block s = 0..15 of a K-quant super-block at sb, as
// ggml_int8.cpp's definition reads them (Q4_K and Q5_K: sub-block s has x block s / 2's 32-element scale;
// min is 0 for Q3_K and Q6_K). For the vector kernels that take a super-block's factors once per row.
void KSubBlockScales(GgmlType type, const std::uint8_t* sb, int scale[16], int min[16]);

namespace scalar {
// DequantizeRow on each row (ggml_format.cpp): the definition of decode_rows.
void DecodeRows(const WeightMatrix& W, int r0, int count, float* out);
void FmaRowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y);
void Int8RowDots(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y);
}  // namespace scalar

#if defined(__aarch64__)
namespace neon {
// NEON, with the dotprod extension's sdot where the CPU has it (int8_sums::HasDotprod): the fast family's
// definition for every type HasInt8 accepts (Q4_0 .. Q8_0 and the K-quants).
void Int8RowDots(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y);
// The same with sdot (only where the CPU has dotprod) or without it on any CPU, so that tests run both.
void Int8RowDotsPath(bool sdot, const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x,
                     float* y);
// Its int8_gemm (kernels/weight_format.h): Int8RowDots for each x row, bitwise; and the same on a chosen
// path.
void Int8Gemm(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs, int m, float* Y,
              std::size_t ldy);
void Int8GemmPath(bool sdot, const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs,
                  int m, float* Y, std::size_t ldy);
}  // namespace neon
#endif

}  // namespace plumb::kernels::ggml
