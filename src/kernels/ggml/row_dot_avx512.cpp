// RowDot with AVX-512 (F, BW, VL): the scalar definition (row_dot.h) for Q4_0, Q4_1 and Q8_0, eight lanes
// at a time as the AVX2 variant, with fewer instructions per weight; the other types are avx2::'s.
//
// A block's 16 possible weights are computed once per block, by DequantizeRow's own expression on the 16
// codes ((q − 8)·d for Q4_0, q·d + m for Q4_1; docs/formats.md "GGUF blocks"), into a table of two vectors;
// each group of 8 weights is then one two-table permute (vpermt2ps, AVX-512VL: the low 4 bits of each index
// lane select one of 16 floats) of the widened code bytes, where AVX2 subtracts, converts and multiplies.
// The products and adds are AVX2's (_mm256_mul_ps then _mm256_add_ps into one 8-lane accumulator, element i
// in lane i mod 8; no FMA) and the lanes are reduced by the definition's expression, so the bits match.
// Q4_0's and Q4_1's vectors are 256-bit: on Zen 4 a 512-bit op takes a 256-bit pipe for two cycles, so width
// buys nothing there that instruction count does not (see int4/int4_avx512.cpp). Q8_0's conversions and
// multiplies are 512-bit: they halve its instruction count on every AVX-512 CPU (Q8_0Dots).
#include "plumb/kernels/row_dot.h"

#if defined(__x86_64__)

#include "../simd/avx512_intrinsics.h"

#include <cstdint>

#include "../simd/avx2_common.h"
#include "ggml_kernel_table.h"

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

#define PLUMB_BODY_TARGET PLUMB_AVX512
#include "block_dots_x86_body.h"
#undef PLUMB_BODY_TARGET

// Q8_0 ([d f16][qs 32 × int8]: q·d) with 512-bit vectors, where AVX2 converts, scales and multiplies 8 at a
// time: each weight d·q and each product w·x is rounded once, as the definition rounds it, 16 lanes at a
// time, and the products are then added to the 8-lane accumulator half by half (elements 0-7, then 8-15,
// 16-23, 24-31), the same adds in the same order as BlockDots. The conversions and multiplies were most of
// AVX2's loop; on Zen 5 a 512-bit op costs what a 256-bit one does (docs/performance.md, "An AVX-512
// host").
PLUMB_AVX512 inline __m256 HighHalf(__m512 v) {
  return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

template <int R>
PLUMB_AVX512 void Q8_0Dots(const std::uint8_t* rows, std::size_t stride, const float* x, std::int64_t n,
                           float* y) {
  constexpr int kBytes = 34;
  __m256 acc[R];
  const std::size_t ahead = avx2_common::PrefetchAhead(R * stride);
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  const std::int64_t n_blocks = n / 32;
  for (std::int64_t b = 0; b < n_blocks; ++b) {
    const __m512 x0 = _mm512_loadu_ps(x + b * 32);
    const __m512 x1 = _mm512_loadu_ps(x + b * 32 + 16);
    for (int r = 0; r < R; ++r) {
      avx2_common::Prefetch(rows, ahead + r * stride + b * kBytes);  // every block: no line skipped
      const std::uint8_t* block = rows + r * stride + b * kBytes;
      const __m512 d = _mm512_set1_ps(_cvtsh_ss(avx2_common::ReadU16(block)));
      const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
      const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 18));
      const __m512 p0 = _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0)), d), x0);
      const __m512 p1 = _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1)), d), x1);
      acc[r] = _mm256_add_ps(acc[r], _mm512_castps512_ps256(p0));
      acc[r] = _mm256_add_ps(acc[r], HighHalf(p0));
      acc[r] = _mm256_add_ps(acc[r], _mm512_castps512_ps256(p1));
      acc[r] = _mm256_add_ps(acc[r], HighHalf(p1));
    }
  }
  for (int r = 0; r < R; ++r) {
    alignas(32) float lane[8];
    _mm256_store_ps(lane, acc[r]);
    y[r] = avx2_common::ReduceLanes(lane);
  }
}

void RunQ8_0(const std::uint8_t* rows, std::size_t stride, std::int64_t n_rows, const float* x,
             std::int64_t n, float* y) {
  std::int64_t r = 0;
  // 8 rows at a time: the rows' add chains side by side, and 8 streams from DRAM (14336 x 4096, 1 thread:
  // 16.6 GB/s with AVX2's kernel, 18-20 with this one over 4 rows, 21.6 over 8).
  for (; r + 8 <= n_rows; r += 8) Q8_0Dots<8>(rows + Extent(r, stride), stride, x, n, y + r);
  for (; r + kRows <= n_rows; r += kRows) Q8_0Dots<kRows>(rows + Extent(r, stride), stride, x, n, y + r);
  for (; r < n_rows; ++r) Q8_0Dots<1>(rows + Extent(r, stride), stride, x, n, y + r);
}

}  // namespace
}  // namespace plumb::kernels::avx512

namespace plumb::kernels::ggml::avx512 {

// AVX-512's column of row dots; the other types run AVX2's (the table's fallback).
void FillRowDots(GgmlKernelTable& table) {
  namespace k = kernels::avx512;  // the kernels above
  table.At(GgmlType::Q4_0, Isa::kAvx512).row_dots = OneTypeRowDots<k::RunBlocks<k::BlockQ4_0>>;
  table.At(GgmlType::Q4_1, Isa::kAvx512).row_dots = OneTypeRowDots<k::RunBlocks<k::BlockQ4_1>>;
  table.At(GgmlType::Q8_0, Isa::kAvx512).row_dots = OneTypeRowDots<k::RunQ8_0>;
}

}  // namespace plumb::kernels::ggml::avx512

#endif  // defined(__x86_64__)
