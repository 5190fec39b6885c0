// RowDot with AVX-512 (F, BW, VL): the scalar definition (row_dot.h) for Q4_0 and Q4_1, eight lanes at a
// time as the AVX2 variant, with fewer instructions per weight; the other types are avx2::'s.
//
// A block's 16 possible weights are computed once per block, by DequantizeRow's own expression on the 16
// codes ((q − 8)·d for Q4_0, q·d + m for Q4_1; docs/formats.md "GGUF blocks"), into a table of two vectors;
// each group of 8 weights is then one two-table permute (vpermt2ps, AVX-512VL: the low 4 bits of each index
// lane select one of 16 floats) of the widened code bytes, where AVX2 subtracts, converts and multiplies.
// The products and adds are AVX2's (_mm256_mul_ps then _mm256_add_ps into one 8-lane accumulator, element i
// in lane i mod 8; no FMA) and the lanes are reduced by the definition's expression, so the bits match.
// Vectors are 256-bit: on Zen 4 a 512-bit op takes a 256-bit pipe for two cycles, so width buys nothing here
// that instruction count does not (see int4/int4_avx512.cpp).
#include "plumb/kernels/row_dot.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>

#include "../avx2_common.h"

#include "plumb/core/extent.h"

namespace plumb::kernels::avx512 {
namespace {

constexpr int kRows = 4;

using avx2_common::HalfBroadcast;

// table(n) for the 16 codes n: lo holds n = 0..7, hi n = 8..15.
struct Table16 {
  __m256 lo, hi;
  PLUMB_AVX512 __m256 Lookup(__m256i index) const { return _mm256_permutex2var_ps(lo, index, hi); }
};

// A block's weights from its 16-entry table: elements 0..7, 8..15 are the low nibbles of qs[0..8),
// qs[8..16); elements 16..23, 24..31 their high nibbles. A byte widened to a lane already has its low nibble
// in bits 0-3 (the permute ignores the bits above), and shifted right by 4 its high nibble.
PLUMB_AVX512 inline void LookUpBlock(const Table16& table, const std::uint8_t* qs, __m256 w[4]) {
  const __m256i bytes0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs)));
  const __m256i bytes1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs + 8)));
  w[0] = table.Lookup(bytes0);
  w[1] = table.Lookup(bytes1);
  w[2] = table.Lookup(_mm256_srli_epi32(bytes0, 4));
  w[3] = table.Lookup(_mm256_srli_epi32(bytes1, 4));
}

struct BlockQ4_0 {  // [d f16][qs 16 B]: (q − 8)·d
  static constexpr int kBytes = 18;
  PLUMB_AVX512 static void Decode(const std::uint8_t* b, __m256 w[4]) { LookUpBlock(MakeTable(b), b + 2, w); }
  PLUMB_AVX512 static Table16 MakeTable(const std::uint8_t* b) {
    const __m256 d = HalfBroadcast(b);
    return {_mm256_mul_ps(_mm256_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1), d),
            _mm256_mul_ps(_mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7), d)};
  }
};

struct BlockQ4_1 {  // [d f16][m f16][qs 16 B]: q·d + m
  static constexpr int kBytes = 20;
  PLUMB_AVX512 static void Decode(const std::uint8_t* b, __m256 w[4]) { LookUpBlock(MakeTable(b), b + 4, w); }
  PLUMB_AVX512 static Table16 MakeTable(const std::uint8_t* b) {
    // d and m converted together: [d, m, 0, 0], then each broadcast.
    const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(avx2_common::ReadU32(b))));
    const __m256 d = _mm256_broadcastss_ps(dm);
    const __m256 m = _mm256_permutexvar_ps(_mm256_set1_epi32(1), _mm256_castps128_ps256(dm));
    return {_mm256_add_ps(_mm256_mul_ps(_mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7), d), m),
            _mm256_add_ps(_mm256_mul_ps(_mm256_setr_ps(8, 9, 10, 11, 12, 13, 14, 15), d), m)};
  }
};

#define PLUMB_RD_TARGET PLUMB_AVX512
#include "block_dots_x86_body.h"
#undef PLUMB_RD_TARGET

}  // namespace

void RowDots(GgmlType type, const std::uint8_t* rows, std::size_t row_stride, std::int64_t n_rows,
             const float* x, std::int64_t n, float* y) {
  switch (type) {
    case GgmlType::Q4_0:
      return RunBlocks<BlockQ4_0>(rows, row_stride, n_rows, x, n, y);
    case GgmlType::Q4_1:
      return RunBlocks<BlockQ4_1>(rows, row_stride, n_rows, x, n, y);
    default:
      return avx2::RowDots(type, rows, row_stride, n_rows, x, n, y);
  }
}

float RowDot(GgmlType type, const std::uint8_t* row, const float* x, std::int64_t n) {
  float y = 0.0f;
  RowDots(type, row, 0, 1, x, n, &y);
  return y;
}

}  // namespace plumb::kernels::avx512

#endif  // defined(__x86_64__)
