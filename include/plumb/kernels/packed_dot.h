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
// The kernels are the FP8 and INT4 formats' (kernels/weight_format.h; src/kernels/fp8/, src/kernels/int4/):
// scalar:: is the definition; AVX2 + F16C, AVX-512 F, BW, VL (INT4 by 16-entry lookup tables, FP8 E4M3
// with GFNI byte maps) and NEON variants compute the same bits. PackedRowDots runs ActiveIsa()'s.
#pragma once

#include "plumb/kernels/weight_matrix.h"

namespace plumb::kernels {

// y is indexed by absolute row: y[row_begin .. row_end) are written. Throws plumb::Error unless W is an
// FP8 or INT4 matrix, or for rows outside it.
void PackedRowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y);

// out[W.cols] = row r as the dot product above sees it: kFp8 the decoded codes, Fp8ToF32 exactly (the scale
// is NOT applied: the definition applies it to the dot), kInt4 DequantizeInt4Row. The tiles of the packed
// GEMM (kernels::Gemm) are made of these rows. Throws plumb::Error as PackedRowDots does. Every variant
// (AVX2 on x86-64, also under kAvx512; aarch64 runs the scalar one) writes the same bits.
void DecodePackedRow(const WeightMatrix& W, int r, float* out);

namespace scalar {
void PackedRowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y);
}  // namespace scalar

}  // namespace plumb::kernels
