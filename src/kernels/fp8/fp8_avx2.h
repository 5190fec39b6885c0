// Pieces of the FP8 AVX2 kernels (fp8_avx2.cpp) that the AVX-512 ones (fp8_avx512.cpp) reuse as they
// are: the E4M3 NaN-code tracker, a row's tail, reduction and scale, and the E4M3 x-scaling check. Internal
// to src/kernels/; x86-64 only; why each matches the definition is in fp8_avx2.cpp's header comment.
#pragma once

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>

#include "../avx2_common.h"
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
