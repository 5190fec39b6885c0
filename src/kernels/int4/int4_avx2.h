// Pieces of the INT4 AVX2 kernels (int4_avx2.cpp) that the AVX-512 ones (int4_avx512.cpp) reuse as they
// are: a group's parameters as vectors, 8 groups' parameters loaded together, and the weight of a single
// column. Internal to src/kernels/; x86-64 only; why each matches the definition is in int4_avx2.cpp's
// header comment.
#pragma once

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>

#include "../simd/avx2_common.h"
#include "plumb/core/extent.h"
#include "plumb/formats/dtype.h"
#include "plumb/kernels/weight_matrix.h"

namespace plumb::kernels::int4::avx2_shared {

using avx2_common::ReadU16;
using avx2_common::ReadU32;

// A group's parameters as vectors, and the decoding of 8 columns from their 32-bit word (nibble i is column
// i of the 8, at bits 4i..4i+3). Every step is exact (4-bit codes, 11-bit scales) but the f16-zero scheme's
// subtraction, which is done as the definition does it; so the weights are the definition's to the bit.
template <Int4Scheme S>
struct Int4Group {
  __m256 scale{};   // sym: s·2^-28 (see Decode); else s
  __m256i zero{};   // kAsymmetric
  __m256 zero_f{};  // kAsymmetricF16Zero

  PLUMB_AVX2 __m256 Decode(const std::uint8_t* p) const {
    const __m256i w = _mm256_set1_epi32(static_cast<int>(ReadU32(p)));
    if constexpr (S == Int4Scheme::kSymmetric) {
      // Nibble i to the top of lane i and masked: the two's-complement q·2^28, converted exactly; the 2^-28
      // is in the scale (exact: s ≥ 2^-24), so the product is float(q)·s. (A mask instead of an arithmetic
      // shift back: shifts have fewer ports.)
      const __m256i top = _mm256_sllv_epi32(w, _mm256_setr_epi32(28, 24, 20, 16, 12, 8, 4, 0));
      const __m256i q = _mm256_and_si256(top, _mm256_set1_epi32(static_cast<int>(0xF0000000u)));
      return _mm256_mul_ps(_mm256_cvtepi32_ps(q), scale);
    } else {
      const __m256i q = _mm256_and_si256(_mm256_srlv_epi32(w, _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                                         _mm256_set1_epi32(0xF));
      if constexpr (S == Int4Scheme::kAsymmetric) {
        return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q, zero)), scale);
      } else {
        return _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(q), zero_f), scale);
      }
    }
  }
};

// The parameters of 8 consecutive groups g8 .. g8+7 of one row, converted together (one F16C conversion
// for 8 scales instead of 8), from which each group's vectors are one permute away.
template <Int4Scheme S>
struct Int4Groups8 {
  __m256 scales;
  __m256i zeros;   // kAsymmetric
  __m256 zeros_f;  // kAsymmetricF16Zero

  // sym scales times 2^-28, as Int4Group::Decode wants them.
  PLUMB_AVX2 void Load(const WeightMatrix& W, int r, int g8, int groups, std::size_t zero_row) {
    LoadExact(W, r, g8, groups, zero_row);
    if constexpr (S == Int4Scheme::kSymmetric) scales = _mm256_mul_ps(scales, _mm256_set1_ps(0x1p-28f));
  }

  // The scales and zero points as stored (float(scale_g), and the zeros as int32 or float).
  PLUMB_AVX2 void LoadExact(const WeightMatrix& W, int r, int g8, int groups, std::size_t zero_row) {
    const std::uint16_t* s = W.int4_scales + Extent(r, groups) + g8;
    const std::uint8_t* z = W.int4_zeros + Extent(r, zero_row);
    if (g8 + 8 <= groups) {
      scales = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
      if constexpr (S == Int4Scheme::kAsymmetric) {  // 8 zero nibbles: bytes g8/2 .. g8/2 + 3
        const __m256i w = _mm256_set1_epi32(static_cast<int>(ReadU32(z + g8 / 2)));
        zeros = _mm256_and_si256(_mm256_srlv_epi32(w, _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                                 _mm256_set1_epi32(0xF));
      } else if constexpr (S == Int4Scheme::kAsymmetricF16Zero) {
        zeros_f = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(z + 2 * std::size_t(g8))));
      }
    } else {  // the row's last, partial block of groups: read no further than the arrays go
      alignas(32) float sf[8] = {}, zf[8] = {};
      alignas(32) int zi[8] = {};
      for (int j = 0; g8 + j < groups; ++j) {
        sf[j] = _cvtsh_ss(s[j]);
        if constexpr (S == Int4Scheme::kAsymmetric) zi[j] = static_cast<int>(Int4Code(z, g8 + j));
        if constexpr (S == Int4Scheme::kAsymmetricF16Zero)
          zf[j] = _cvtsh_ss(ReadU16(z + 2 * std::size_t(g8 + j)));
      }
      scales = _mm256_load_ps(sf);
      zeros = _mm256_load_si256(reinterpret_cast<const __m256i*>(zi));
      zeros_f = _mm256_load_ps(zf);
    }
  }

  using Decoder = Int4Group<S>;
  PLUMB_AVX2 Int4Group<S> Group(int j) const {
    const __m256i index = _mm256_set1_epi32(j);
    Int4Group<S> group;
    group.scale = _mm256_permutevar8x32_ps(scales, index);
    if constexpr (S == Int4Scheme::kAsymmetric) group.zero = _mm256_permutevar8x32_epi32(zeros, index);
    if constexpr (S == Int4Scheme::kAsymmetricF16Zero)
      group.zero_f = _mm256_permutevar8x32_ps(zeros_f, index);
    return group;
  }
};

// The definition's weight of column c of row r (formats/int4.h), for the few columns past the last whole
// vector of a row.
inline float Int4Weight(const WeightMatrix& W, int r, int c) {
  const int G = W.int4.group_size, g = c / G;
  const float s = F16ToF32(W.int4_scales[static_cast<std::size_t>(r) * Int4Groups(W.cols, G) + g]);
  const unsigned n = Int4Code(W.Row(r), c);
  const std::uint8_t* z = W.int4_zeros + static_cast<std::size_t>(r) * Int4ZeroRowBytes(W.int4, W.cols);
  switch (W.int4.scheme) {
    case Int4Scheme::kSymmetric:
      return static_cast<float>(static_cast<int>(n ^ 8u) - 8) * s;
    case Int4Scheme::kAsymmetric:
      return static_cast<float>(static_cast<int>(n) - static_cast<int>(Int4Code(z, g))) * s;
    case Int4Scheme::kAsymmetricF16Zero:
      return (static_cast<float>(n) - F16ToF32(ReadU16(z + 2 * static_cast<std::size_t>(g)))) * s;
  }
  return 0.0f;
}

}  // namespace plumb::kernels::int4::avx2_shared

#endif  // __x86_64__
