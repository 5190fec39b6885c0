// The GGUF-type format's kernels that are not kernels/row_dot.h's (internal to src/kernels/; ggml_format.cpp
// registers both in kGgmlFormat).
#pragma once

#include "plumb/formats/ggml_types.h"
#include "plumb/kernels/weight_matrix.h"

namespace plumb::kernels {
struct Int8Activations;
}  // namespace plumb::kernels

namespace plumb::kernels::ggml {

// The fast family (ggml_int8.cpp, which states its definition): Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 rows whose
// columns are whole blocks.
bool HasInt8(const WeightMatrix& W);
inline constexpr const char* kInt8Covers = "GGUF Q4_0, Q4_1, Q5_0, Q5_1, Q8_0";

// Where a block of a type with int8 kernels keeps its codes (docs/formats.md "GGUF blocks"): the block's
// bytes, the offset of qs (Q5's qh is the 4 bytes before it), the offset subtracted from a code (Q4_0's 8,
// Q5_0's 16), whether it has a minimum m (w = d·q + m) and whether its codes are unsigned.
template <GgmlType kType>
struct Int8Layout;
template <>
struct Int8Layout<GgmlType::Q4_0> {
  static constexpr int kBlockBytes = 18, kQs = 2, kOffset = 8;
  static constexpr bool kHasMin = false, kUnsigned = false;
};
template <>
struct Int8Layout<GgmlType::Q4_1> {
  static constexpr int kBlockBytes = 20, kQs = 4, kOffset = 0;
  static constexpr bool kHasMin = true, kUnsigned = true;
};
template <>
struct Int8Layout<GgmlType::Q5_0> {
  static constexpr int kBlockBytes = 22, kQs = 6, kOffset = 16;
  static constexpr bool kHasMin = false, kUnsigned = false;
};
template <>
struct Int8Layout<GgmlType::Q5_1> {
  static constexpr int kBlockBytes = 24, kQs = 8, kOffset = 0;
  static constexpr bool kHasMin = true, kUnsigned = true;
};
template <>
struct Int8Layout<GgmlType::Q8_0> {
  static constexpr int kBlockBytes = 34, kQs = 2, kOffset = 0;
  static constexpr bool kHasMin = false, kUnsigned = false;
};

namespace scalar {
void Int8RowDots(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y);
}  // namespace scalar

#if defined(__x86_64__)
namespace avx2 {
// AVX2 + F16C: rows [r0, r0 + count) of W, exactly DequantizeRow's values.
void DecodeRows(const WeightMatrix& W, int r0, int count, float* out);
// AVX2 + FMA (scalar:: on a CPU without FMA): the fast family's definition.
void Int8RowDots(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y);
}  // namespace avx2
namespace avx512 {
// AVX-512 VNNI (avx2:: on a CPU without it): the fast family's definition.
void Int8RowDots(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y);
}  // namespace avx512
#endif

}  // namespace plumb::kernels::ggml
