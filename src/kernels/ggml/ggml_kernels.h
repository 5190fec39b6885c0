// The GGUF-type format's kernels that are not kernels/row_dot.h's (internal to src/kernels/; ggml_format.cpp
// registers both in kGgmlFormat).
#pragma once

#include "plumb/kernels/weight_matrix.h"

namespace plumb::kernels {
struct Int8Activations;
}  // namespace plumb::kernels

namespace plumb::kernels::ggml {

// The fast family (ggml_int8.cpp, which states its definition): Q4_0, Q4_1 and Q8_0 rows whose columns are
// whole blocks.
bool HasInt8(const WeightMatrix& W);
inline constexpr const char* kInt8Covers = "GGUF Q4_0, Q4_1, Q8_0";

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
