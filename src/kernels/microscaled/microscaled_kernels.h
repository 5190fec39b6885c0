// The microscaled format's kernels, one namespace per ISA (internal to src/kernels/; microscaled_format.cpp
// registers them in kMicroscaledFormat). Each computes microscaled_format.cpp's definition bit for bit; the
// contracts are kernels/weight_format.h's row_dots and decode_rows.
#pragma once

#include "plumb/kernels/weight_matrix.h"

namespace plumb::kernels::microscaled {

namespace scalar {
void RowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y);
void DecodeRows(const WeightMatrix& W, int r0, int count, float* out);
}  // namespace scalar

#if defined(__x86_64__)
namespace avx2 {  // AVX2 + F16C; AVX-512 hosts run it too
void RowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y);
}  // namespace avx2
#endif

#if defined(__aarch64__)
namespace neon {
void RowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y);
}  // namespace neon
#endif

}  // namespace plumb::kernels::microscaled
