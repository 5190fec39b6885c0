// The dot product of one stored (GGUF, possibly quantized) weight row with a float32 vector: the inner loop
// of a GEMV over a GGUF tensor, without ever dequantizing the whole row or matrix into memory.
//
// Definition (what every variant returns, bit for bit):
//   RowDot(type, row, x, n) == scalar::Dot(DequantizeRow(type, row, n), x, n)
// i.e. eight lanes, lane j summing the rounded products w[i]·x[i] for i ≡ j (mod 8) in ascending i (mul then
// add, no FMA), then ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)); see kernels/scalar.h. Every block holds a
// multiple of 8 elements, so block b's element t always lands in lane t mod 8 and each block can be
// dequantized just before its products are summed. Layouts: docs/formats.md ("GGUF blocks").
//
// Variants: scalar::RowDot is the definition (plain C++). On x86-64 CPUs with AVX2 and F16C, avx2::RowDot,
// and on aarch64 neon::RowDot, compute the same bits 8 lanes at a time for F32, F16, BF16, Q8_0, Q4_0 and
// Q4_1 (the other types fall back to the scalar code). On x86-64 CPUs that also have AVX-512 F, BW and VL,
// avx512::RowDot computes Q4_0 and Q4_1 with 16-entry lookup tables (one permute per 8 weights) and passes
// the other types to avx2::. RowDot picks the best at run time; PLUMB_ISA=scalar|avx2|avx512|neon in the
// environment, or SetIsa, forces one.
#pragma once

#include <cstddef>
#include <cstdint>

#include "plumb/formats/ggml_types.h"
#include "plumb/kernels/isa.h"

namespace plumb::kernels {

// True for every type DequantizeRow handles (CanDequantize): F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
// Q2_K .. Q6_K. The vectorised ones are listed above; the rest run the scalar definition.
bool HasRowDot(GgmlType type);

// Σ w[i]·x[i] over the n elements of the row stored at `row` (GgmlRowBytes(type, n) bytes, any alignment),
// in the order defined above. x holds n floats. Throws plumb::Error when HasRowDot(type) is false or n is
// negative or not a multiple of the type's block size (F32/F16/BF16 take any n).
float RowDot(GgmlType type, const std::uint8_t* row, const float* x, std::int64_t n);

// y[r] = RowDot(type, rows + r·row_stride, x, n) for r in [0, n_rows), bitwise. The vector variant works on
// several rows at once (independent accumulator chains, x loaded once for them): a GEMV over rows
// [r0, r1) of a GGUF tensor is RowDots(type, data + r0·row_bytes, row_bytes, r1 − r0, x, n, y + r0).
void RowDots(GgmlType type, const std::uint8_t* rows, std::size_t row_stride, std::int64_t n_rows,
             const float* x, std::int64_t n, float* y);

namespace scalar {
// The definition: dequantizes 256 elements at a time into a local buffer and sums them as scalar::Dot.
// Same contract and errors as kernels::RowDot.
float RowDot(GgmlType type, const std::uint8_t* row, const float* x, std::int64_t n);
}  // namespace scalar

#if defined(__x86_64__)
namespace avx2 {
// Requires IsaSupported(Isa::kAvx2). Argument checks are the caller's (kernels::RowDot's);
// types without a vector kernel are passed to scalar::RowDot.
float RowDot(GgmlType type, const std::uint8_t* row, const float* x, std::int64_t n);
void RowDots(GgmlType type, const std::uint8_t* rows, std::size_t row_stride, std::int64_t n_rows,
             const float* x, std::int64_t n, float* y);
}  // namespace avx2

namespace avx512 {
// Requires IsaSupported(Isa::kAvx512). Same contract as the avx2:: variants, to which the types
// without an AVX-512 kernel are passed.
float RowDot(GgmlType type, const std::uint8_t* row, const float* x, std::int64_t n);
void RowDots(GgmlType type, const std::uint8_t* rows, std::size_t row_stride, std::int64_t n_rows,
             const float* x, std::int64_t n, float* y);
}  // namespace avx512
#endif

#if defined(__aarch64__)
namespace neon {
// Requires IsaSupported(Isa::kNeon) (every aarch64 CPU has Advanced SIMD). Same contract as the
// avx2:: variants.
float RowDot(GgmlType type, const std::uint8_t* row, const float* x, std::int64_t n);
void RowDots(GgmlType type, const std::uint8_t* rows, std::size_t row_stride, std::int64_t n_rows,
             const float* x, std::int64_t n, float* y);
}  // namespace neon
#endif

}  // namespace plumb::kernels
