// QuantizeActivations' whole blocks with AVX2: scalar::QuantizeBlock's bits (kernels/int8_activations.h's
// definition), 32 elements in four vectors.
//
// Why the bits are the same: |x| and the maximum are exact, and max_ps equals fmax on finite values (a block
// holding an inf or NaN is found first, by its all-ones exponent, and given the definition's NaN d and s and
// zero codes); d = amax / 127 and 1 / d are the same scalar divisions; x · (1 / d) is one rounded product
// per element, as in the scalar loop. std::round (half away from zero) is rebuilt exactly: t = the product
// truncated toward zero, f = product − t (exact: both lie within one binade's integer grid), and t ± 1 where
// |f| ≥ 0.5. The codes are integers of magnitude ≤ 127, so their float sum is exact in any order and the
// conversions and saturating packs change nothing.
#include "int8_activations_blocks.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include "../simd/avx2_common.h"

namespace plumb::kernels::avx2 {
namespace {

PLUMB_AVX2 inline float HorizontalMax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

PLUMB_AVX2 inline float HorizontalSum(__m256 v) {
  __m128 m = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_add_ps(m, _mm_movehl_ps(m, m));
  m = _mm_add_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// round(v), half away from zero, for |v| < 2^23.
PLUMB_AVX2 inline __m256 RoundHalfAway(__m256 v) {
  const __m256 sign = _mm256_and_ps(v, _mm256_set1_ps(-0.0f));
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 f = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_sub_ps(v, t));
  const __m256 step = _mm256_and_ps(_mm256_cmp_ps(f, _mm256_set1_ps(0.5f), _CMP_GE_OQ),
                                    _mm256_or_ps(sign, _mm256_set1_ps(1.0f)));
  return _mm256_add_ps(t, step);
}

PLUMB_AVX2 void Blocks(const float* x, int blocks, std::int8_t* q, float* d, float* s, std::int32_t* sums) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256i exponent = _mm256_set1_epi32(0x7F800000);
  for (int b = 0; b < blocks; ++b) {
    const float* xb = x + 32 * b;
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    __m256i special = _mm256_setzero_si256();  // lanes whose exponent is all ones: inf or NaN
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm256_loadu_ps(xb + 8 * j);
      amax = _mm256_max_ps(amax, _mm256_and_ps(v[j], abs_mask));
      const __m256i e = _mm256_and_si256(_mm256_castps_si256(v[j]), exponent);
      special = _mm256_or_si256(special, _mm256_cmpeq_epi32(e, exponent));
    }
    std::int8_t* qb = q + 32 * b;
    if (!_mm256_testz_si256(special, special)) {
      scalar::QuantizeBlock(xb, 32, qb, d + b, s + b, sums + b);  // the definition's NaN block
      continue;
    }
    const float scale = HorizontalMax(amax) / 127.0f;
    const __m256 inverse = _mm256_set1_ps(scale != 0.0f ? 1.0f / scale : 0.0f);
    __m256 sum = _mm256_setzero_ps();
    __m256i codes[4];
    for (int j = 0; j < 4; ++j) {
      const __m256 r = RoundHalfAway(_mm256_mul_ps(v[j], inverse));
      sum = _mm256_add_ps(sum, r);
      codes[j] = _mm256_cvttps_epi32(r);
    }
    // Packs work within 128-bit halves: the 32 bytes come out in 4-byte groups a0 b0 c0 d0 a1 b1 c1 d1 (a, b,
    // c, d the four vectors, 0 and 1 their halves); the permute puts them back in element order.
    const __m256i bytes =
        _mm256_packs_epi16(_mm256_packs_epi32(codes[0], codes[1]), _mm256_packs_epi32(codes[2], codes[3]));
    const __m256i ordered = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qb), ordered);
    d[b] = scale;
    const float total = HorizontalSum(sum);  // an integer of magnitude ≤ 32·127: exact
    s[b] = scale * total;
    sums[b] = static_cast<std::int32_t>(total);
  }
}

}  // namespace

int QuantizeBlocks(const float* x, int blocks, std::int8_t* q, float* d, float* s, std::int32_t* sums) {
  Blocks(x, blocks, q, d, s, sums);
  return blocks;
}

}  // namespace plumb::kernels::avx2

#endif  // defined(__x86_64__)
