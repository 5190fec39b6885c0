// Pieces of the FP8 AVX2 kernels (fp8_avx2.cpp) that the AVX-512 ones (fp8_avx512.cpp), the fast family's
// FMA ones (fp8_fma_x86.cpp) and the block-scaled FP8 ones (block_fp8/block_fp8_avx2.cpp) reuse as they
// are: the E4M3 NaN-code tracker, a row's tail, reduction and scale, the codes' decoding through FP16, and
// the E4M3 x-scaling check. Internal to src/kernels/; x86-64 only; why each matches the definition is in
// fp8_avx2.cpp's header comment.
#pragma once

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>

#include "../simd/avx2_common.h"
#include "plumb/kernels/weight_matrix.h"

namespace plumb::kernels::fp8::avx2_shared {

using avx2_common::Finish;

// Whether any of the E4M3 codes shown to Add was a NaN (S.1111.111, i.e. 0x7F or 0xFF): 0x7F is the largest
// signed byte and 0xFF the largest unsigned one, so a running signed and unsigned maximum (two ops per 32
// codes) tells, where a compare needs three (or, compare, or).
struct E4M3NanTracker {
  __m256i max_signed, max_unsigned;

  PLUMB_AVX2 void Reset() {
    max_signed = _mm256_set1_epi8(-128);
    max_unsigned = _mm256_setzero_si256();
  }
  PLUMB_AVX2 void Add(const std::uint8_t* p) { Add(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  PLUMB_AVX2 void Add(__m256i codes) {
    max_signed = _mm256_max_epi8(max_signed, codes);
    max_unsigned = _mm256_max_epu8(max_unsigned, codes);
  }
  PLUMB_AVX2 bool Any() const {
    const __m256i nan =
        _mm256_or_si256(_mm256_cmpeq_epi8(max_signed, _mm256_set1_epi8(0x7F)),
                        _mm256_cmpeq_epi8(max_unsigned, _mm256_set1_epi8(static_cast<char>(0xFF))));
    return !_mm256_testz_si256(nan, nan);
  }
};

// y[r] of an FP8 row whose columns [0, full32) are summed in acc: up to three more whole vectors, then the
// tail, through the decode table (exact values, NaNs included); NaN when an E4M3 NaN code was met in
// [0, full32); then the definition's scale.
PLUMB_AVX2 inline float Fp8Finish(const WeightMatrix& W, Fp8Format format, int r, __m256 acc, int full32,
                                  bool has_nan, const float* x) {
  const float* table = Fp8DecodeTable(format);
  const std::uint8_t* codes = W.Row(r);
  const int cols = W.cols;
  const int full = cols - cols % 8;
  for (int c = full32; c < full; c += 8) {
    alignas(32) float w[8];
    for (int j = 0; j < 8; ++j) w[j] = table[codes[c + j]];
    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_load_ps(w), _mm256_loadu_ps(x + c)));
  }
  float dot = Finish(acc, full, cols, x, [&](int c) { return table[codes[c]]; });
  if (has_nan) dot = table[0x7F];  // NaN, as the definition gives
  return W.fp8_scales[W.fp8_per_row ? r : 0] * dot;
}

// 16 codes at p as FP16 bits, codes 0-7 in lo and 8-15 in hi: E5M2 code << 8; E4M3 the value · 2^-8,
// with its NaN codes (S.1111.111) read as the finite 1.875 (kernels that see them must note them apart:
// E4M3NanTracker).
struct Halves {
  __m128i lo, hi;
};
template <Fp8Format F>
PLUMB_AVX2 inline Halves Fp8ToHalf(const std::uint8_t* p) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if constexpr (F == Fp8Format::kE5M2) {
    return {_mm_unpacklo_epi8(_mm_setzero_si128(), bytes), _mm_unpackhi_epi8(_mm_setzero_si128(), bytes)};
  } else {
    // Sign-extended and shifted: S.S.EEEE.MMM.0000000; clearing bit 14 leaves S.0EEEE.MMM0000000.
    const __m256i s = _mm256_slli_epi16(_mm256_cvtepi8_epi16(bytes), 7);
    const __m256i half = _mm256_and_si256(s, _mm256_set1_epi16(static_cast<short>(0xBF80)));
    return {_mm256_castsi256_si128(half), _mm256_extracti128_si256(half, 1)};
  }
}

// The 16 codes at p as their exact values (Fp8ToF32's, NaNs included) in w[0] (codes 0-7) and w[1]:
// E5M2 converted as it is; E4M3 its value · 2^-8 times 2^8 (exact), the NaN codes (read as 1.875 · 2^-8,
// which becomes 480, a value no E4M3 code has) turned back into NaN.
template <Fp8Format F>
PLUMB_AVX2 inline void Fp8Exact16(const std::uint8_t* p, __m256 w[2]) {
  const Halves half = Fp8ToHalf<F>(p);
  w[0] = _mm256_cvtph_ps(half.lo);
  w[1] = _mm256_cvtph_ps(half.hi);
  if constexpr (F == Fp8Format::kE4M3) {
    const __m256 nan_value = _mm256_set1_ps(480.0f);
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    for (int v = 0; v < 2; ++v) {
      w[v] = _mm256_mul_ps(w[v], _mm256_set1_ps(256.0f));
      w[v] = _mm256_or_ps(w[v], _mm256_cmp_ps(_mm256_and_ps(w[v], abs_mask), nan_value, _CMP_EQ_OQ));
    }
  }
}

// True when 2^8·x[i] is exact for every i: no finite element of magnitude 2^120 or more.
PLUMB_AVX2 inline bool CanScaleX(const float* x, int n) {
  const __m256 limit = _mm256_set1_ps(0x1p120f);
  const __m256 inf = _mm256_set1_ps(__builtin_inff());
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 bad = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask);
    bad = _mm256_or_ps(bad,
                       _mm256_and_ps(_mm256_cmp_ps(a, limit, _CMP_GE_OQ), _mm256_cmp_ps(a, inf, _CMP_LT_OQ)));
  }
  bool ok = _mm256_movemask_ps(bad) == 0;
  for (; i < n; ++i) {
    const float a = __builtin_fabsf(x[i]);
    ok = ok && !(a >= 0x1p120f && a < __builtin_inff());
  }
  return ok;
}

}  // namespace plumb::kernels::fp8::avx2_shared

#endif  // __x86_64__
