// The FP8 format's kernels, one namespace per ISA (internal to src/kernels/; fp8_format.cpp registers them
// in kFp8Format). Each computes fp8_format.cpp's definition bit for bit; the contracts are
// kernels/weight_format.h's row_dots and decode_rows.
#pragma once

#include "plumb/kernels/weight_matrix.h"

namespace plumb::kernels::fp8 {

namespace scalar {
void RowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y);
void DecodeRows(const WeightMatrix& W, int r0, int count, float* out);
// The fast family's definition (fp8_format.cpp): scale_r · FmaDot(row r's values, x), kernels/simd/fma_dot.h.
void FmaRowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y);
}  // namespace scalar

#if defined(__x86_64__)
namespace avx2 {  // AVX2 + F16C
void RowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y);
void DecodeRows(const WeightMatrix& W, int r0, int count, float* out);
// AVX2 + F16C + FMA (all part of kAvx2): the fast family's definition.
void FmaRowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y);
}  // namespace avx2
namespace avx512 {  // E4M3 with GFNI; E5M2, or a CPU without GFNI, runs avx2::
void RowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y);
}  // namespace avx512
#endif

#if defined(__aarch64__)
namespace neon {
void RowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y);
void FmaRowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y);
}  // namespace neon
#endif

}  // namespace plumb::kernels::fp8
