// The INT4 row dots with AVX-512 (F, BW, VL): the definition (int4_format.cpp), eight lanes at a time, like
// the AVX2 variant (int4_avx2.cpp), with fewer instructions per weight.
//
// The vectors are 256-bit: on Zen 4 a 512-bit op occupies a 256-bit pipe for two cycles, and the definition
// (8 lanes, column i in lane i mod 8, each product rounded and then added in column order) would make a
// 16-wide product cost an extract and two adds anyway. What AVX-512 brings is instructions: VL's two-table
// permute (vpermt2ps) looks up 16 floats by the low 4 bits of each index lane, and 32 registers hold the
// tables of several rows.
//
// Each group's 16 possible weights are computed once, by the definition's own expression on the 16 codes
// (formats/int4.h: float(q)·s, float(q − z)·s, (float(q) − z)·s), into a table of two vectors. 8 columns
// then cost a broadcast load of their 32-bit word, one variable shift (lane i holds nibble i in bits 0-3;
// the bits above are ignored by the permute), the permute, the product with x and the add: 4 vector ops
// where AVX2 needs 6-7 (shift, and, convert, subtract, scale, product, add). float(q − z) is computed as
// float(q) − float(z): both are exact small integers, so the two are the same float. The products, adds,
// tail and reduction are AVX2's (int4_dots_x86_body.h), so the bits are the definition's.
#include "int4_kernels.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>

#include "../simd/avx2_common.h"
#include "int4_avx2.h"

namespace plumb::kernels::int4::avx512 {
namespace {

using avx2_common::Finish;
using avx2_common::Prefetch;
using avx2_common::ReadU32;
using avx2_shared::Int4Groups8;
using avx2_shared::Int4Weight;

// Rows computed together: one row's adds are a single dependency chain, so rows in flight keep the adders
// busy; each row holds a two-vector table, and 32 registers leave room for more than AVX2's four.
constexpr int kRows = 4;

// table(n) for the 16 codes n: lo holds n = 0..7, hi n = 8..15.
struct Table16 {
  __m256 lo, hi;

  // The weights of the 8 columns whose codes are the 8 nibbles of the 32-bit word at p.
  PLUMB_AVX512 __m256 Decode(const std::uint8_t* p) const {
    const __m256i word = _mm256_set1_epi32(static_cast<int>(ReadU32(p)));
    const __m256i index = _mm256_srlv_epi32(word, _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    return _mm256_permutex2var_ps(lo, index, hi);
  }
};

// The float scales and zero points of 8 consecutive groups of one row, kept in memory so that each group's
// value reaches a vector as a broadcast load, not a permute (one op fewer per group and row).
template <Int4Scheme S>
struct Int4Params8 {
  alignas(32) float scale[8];
  alignas(32) float zero[8];  // float(z): kAsymmetric's nibble, exactly, or kAsymmetricF16Zero's FP16

  PLUMB_AVX512 void Load(const WeightMatrix& W, int r, int g8, int groups, std::size_t zero_row) {
    Int4Groups8<S> params;
    params.LoadExact(W, r, g8, groups, zero_row);
    _mm256_store_ps(scale, params.scales);
    if constexpr (S == Int4Scheme::kAsymmetric) _mm256_store_ps(zero, _mm256_cvtepi32_ps(params.zeros));
    if constexpr (S == Int4Scheme::kAsymmetricF16Zero) _mm256_store_ps(zero, params.zeros_f);
  }

  // Group j (0..7) as the definition's 16 weights (formats/int4.h), by its own expressions.
  using Decoder = Table16;
  PLUMB_AVX512 Table16 Group(int j) const {
    const __m256 s = _mm256_set1_ps(scale[j]);
    if constexpr (S == Int4Scheme::kSymmetric) {
      // q = the nibble as two's complement: n = 0..7 is q = n, n = 8..15 is q = n − 16.
      return {_mm256_mul_ps(_mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7), s),
              _mm256_mul_ps(_mm256_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1), s)};
    } else {
      // kAsymmetric: float(n) − float(z) == float(n − z), both exact small integers.
      const __m256 z = _mm256_set1_ps(zero[j]);
      return {_mm256_mul_ps(_mm256_sub_ps(_mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7), z), s),
              _mm256_mul_ps(_mm256_sub_ps(_mm256_setr_ps(8, 9, 10, 11, 12, 13, 14, 15), z), s)};
    }
  }
};

template <Int4Scheme S>
using Int4RowParams = Int4Params8<S>;  // int4_dots_x86_body.h
#define PLUMB_BODY_TARGET PLUMB_AVX512
#include "int4_dots_x86_body.h"
#undef PLUMB_BODY_TARGET

template <Int4Scheme S>
void Run(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  avx2_common::RunRowBlocks<kRows>(Int4Dots<S, kRows>, Int4Dots<S, 1>, W, row_begin, row_end, x, y);
}

}  // namespace

void RowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  WithScheme(W.int4.scheme, [&](auto s) { Run<decltype(s)::value>(W, row_begin, row_end, x, y); });
}

}  // namespace plumb::kernels::int4::avx512

#endif  // defined(__x86_64__)
