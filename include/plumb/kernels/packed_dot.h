// PackedRowDots: rows of an FP8 or INT4 WeightMatrix (kernels/weight_matrix.h) times a float32 vector, the
// inner loop of a GEMV over a packed matrix, without dequantizing the matrix.
//
// Definition (what every variant returns, bit for bit), for each row r in [row_begin, row_end):
//   kFp8:   y[r] = scale_r · scalar::Dot(Fp8ToF32 of row r's codes, x, cols)
//           (scale_r = W.fp8_scales[r] when fp8_per_row, else W.fp8_scales[0]; one rounded multiply after
//           the dot, as a GPU kernel's epilogue applies a per-channel scale)
//   kInt4:  y[r] = scalar::Dot(DequantizeInt4Row(row r), x, cols)
// scalar::Dot is kernels/scalar.h's: 8 lanes, element i in lane i mod 8, mul then add (no FMA), fixed tree.
// Group sizes are multiples of 8, so every group starts in lane 0 and a kernel can dequantize group by group.
//
// Variants: scalar:: is the definition; avx2:: (x86-64 with AVX2 + F16C), avx512:: (and AVX-512 F, BW, VL:
// INT4 by 16-entry lookup tables, FP8 E4M3 with fewer ops per weight; E5M2 is avx2::'s) and neon::
// (aarch64) compute the same bits. PackedRowDots picks by ActiveIsa() (kernels/row_dot.h).
#pragma once

#include "plumb/kernels/weight_matrix.h"

namespace plumb::kernels {

// y is indexed by absolute row: y[row_begin .. row_end) are written. Throws plumb::Error unless
// W.encoding is kFp8 or kInt4.
void PackedRowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y);

// out[W.cols] = row r as the dot product above sees it: kFp8 the decoded codes, Fp8ToF32 exactly (the scale
// is NOT applied: the definition applies it to the dot), kInt4 DequantizeInt4Row. The tiles of the packed
// GEMM (kernels::Gemm) are made of these rows. Throws plumb::Error as PackedRowDots does. Every variant
// (avx2:: on x86-64, also under kAvx512; aarch64 runs the scalar one) writes the same bits.
void DecodePackedRow(const WeightMatrix& W, int r, float* out);

namespace scalar {
void PackedRowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y);
}  // namespace scalar

#if defined(__x86_64__)
namespace avx2 {
void PackedRowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y);
void DecodePackedRow(const WeightMatrix& W, int r, float* out);  // no argument checks: the caller's
}  // namespace avx2

namespace avx512 {
void PackedRowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y);
}  // namespace avx512
#endif

#if defined(__aarch64__)
namespace neon {
void PackedRowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y);
}  // namespace neon
#endif

}  // namespace plumb::kernels
