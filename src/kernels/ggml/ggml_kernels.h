// The GGUF-type format's kernels that are not kernels/row_dot.h's (internal to src/kernels/; ggml_format.cpp
// registers both in kGgmlFormat).
#pragma once

#include "plumb/kernels/weight_matrix.h"

namespace plumb::kernels::ggml {

#if defined(__x86_64__)
namespace avx2 {  // AVX2 + F16C: rows [r0, r0 + count) of W, exactly DequantizeRow's values
void DecodeRows(const WeightMatrix& W, int r0, int count, float* out);
}  // namespace avx2
#endif

}  // namespace plumb::kernels::ggml
