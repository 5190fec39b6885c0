// The fast family's integer step on x86, shared by every format's int8 kernels (ggml/ggml_int8_*.cpp,
// int4/int4_int8_x86.cpp): acc + p, where int32 lane j of p is Σ u_i·q_i over bytes i = 4j .. 4j + 3 of the
// unsigned weight codes u and x's signed codes q. Internal to src/kernels/; x86-64 only.
//   Avx2: maddubs multiplies u by q and adds adjacent pairs into int16 (saturating: callers keep
//         2·max u·127 < 2^15, so u ≤ 128), madd with ones adds adjacent int16 pairs into int32.
//   Vnni: dpbusd does both in one instruction, with no int16 step.
// Both are the exact integers. Signed codes go in as SignMoved's |w| with w's sign moved onto q.
#pragma once

#if defined(__x86_64__)

#include <immintrin.h>

#define PLUMB_INT8_AVX2 __attribute__((target("avx2,f16c,fma")))
#define PLUMB_INT8_VNNI __attribute__((target("avx2,f16c,fma,avx512f,avx512bw,avx512vl,avx512vnni")))

namespace plumb::kernels::int8_sums {

PLUMB_INT8_AVX2 inline __m256i Avx2(__m256i acc, __m256i u, __m256i q) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, q), _mm256_set1_epi16(1)));
}

PLUMB_INT8_VNNI inline __m256i Vnni(__m256i acc, __m256i u, __m256i q) {
  return _mm256_dpbusd_epi32(acc, u, q);
}

// Avx2(Avx2(0, u1, q1), u2, q2) with one madd: the int16 pairs of both maddubs added first, which needs
// 4·max u·127 < 2^15 (u ≤ 64).
PLUMB_INT8_AVX2 inline __m256i Avx2Pair(__m256i u1, __m256i q1, __m256i u2, __m256i q2) {
  const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(u1, q1), _mm256_maddubs_epi16(u2, q2));
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

PLUMB_INT8_VNNI inline __m256i VnniPair(__m256i u1, __m256i q1, __m256i u2, __m256i q2) {
  return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), u1, q1), u2, q2);
}

// Signed codes w as the unsigned operand: |w|, and q with w's sign (0 where w is 0), the same products.
struct SignMoved {
  __m256i u, q;
};
PLUMB_INT8_AVX2 inline SignMoved MoveSign(__m256i w, __m256i q) {
  return {_mm256_sign_epi8(w, w), _mm256_sign_epi8(q, w)};
}

}  // namespace plumb::kernels::int8_sums

#endif  // defined(__x86_64__)
