// The INT4 format's kernels, one namespace per ISA (internal to src/kernels/; int4_format.cpp registers
// them in kInt4Format). Each computes int4_format.cpp's definition bit for bit; the contracts are
// kernels/weight_format.h's row_dots and decode_rows.
#pragma once

#include <cstddef>
#include <type_traits>

#include "plumb/kernels/weight_matrix.h"

namespace plumb::kernels {
struct Int8Activations;
}  // namespace plumb::kernels

namespace plumb::kernels::int4 {

// The fast family (int4_int8.cpp, which states its definition): every scheme and group size, for rows whose
// columns are whole 32-element blocks.
bool HasInt8(const WeightMatrix& W);
inline constexpr const char* kInt8Covers = "packed INT4 (every scheme and group size)";

// fn(std::integral_constant<Int4Scheme, S>{}) for S = scheme: how the vector kernels, templates on the
// scheme, are picked at run time.
template <class Fn>
decltype(auto) WithScheme(Int4Scheme scheme, Fn fn) {
  switch (scheme) {
    case Int4Scheme::kSymmetric:
      return fn(std::integral_constant<Int4Scheme, Int4Scheme::kSymmetric>{});
    case Int4Scheme::kAsymmetric:
      return fn(std::integral_constant<Int4Scheme, Int4Scheme::kAsymmetric>{});
    case Int4Scheme::kAsymmetricF16Zero:
      break;
  }
  return fn(std::integral_constant<Int4Scheme, Int4Scheme::kAsymmetricF16Zero>{});
}

namespace scalar {
void RowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y);
void DecodeRows(const WeightMatrix& W, int r0, int count, float* out);
void Int8RowDots(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y);
}  // namespace scalar

#if defined(__x86_64__)
namespace avx2 {  // AVX2 + F16C
void RowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y);
void DecodeRows(const WeightMatrix& W, int r0, int count, float* out);
// AVX2 + FMA (both part of kAvx2): the fast family's definition.
void Int8RowDots(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y);
// Its int8_gemm (kernels/weight_format.h): Int8RowDots for each x row, bitwise.
void Int8Gemm(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs, int m, float* Y,
              std::size_t ldy);
}  // namespace avx2
namespace avx512 {  // AVX-512 F, BW, VL: 16-entry lookup tables
void RowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y);
// AVX-512 VNNI (avx2:: on a CPU without it, HasAvx512Vnni): the fast family's definition.
void Int8RowDots(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y);
// Its int8_gemm (kernels/weight_format.h): Int8RowDots for each x row, bitwise.
void Int8Gemm(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs, int m, float* Y,
              std::size_t ldy);
}  // namespace avx512
#endif

#if defined(__aarch64__)
namespace neon {
void RowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y);
// The fast family's definition, with sdot where the CPU has dotprod (int8_sums::HasDotprod).
void Int8RowDots(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y);
// The same with sdot (only where the CPU has dotprod) or without it on any CPU, so that tests run both.
void Int8RowDotsPath(bool sdot, const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x,
                     float* y);
}  // namespace neon
#endif

}  // namespace plumb::kernels::int4
