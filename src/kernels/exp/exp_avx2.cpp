// The Exp-based ops with AVX2 and FMA (exp_kernels.h): eight floats per step, as two registers of four
// doubles; the table of 2^(i/32) read by a gather.
#include "exp_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

#include "exp_constants.h"
#include "plumb/kernels/scalar.h"

#define PLUMB_EXP_AVX2 __attribute__((target("avx2,f16c,fma")))

namespace plumb::kernels::avx2 {
namespace {

using namespace exp_constants;

// scalar::Exp's polynomial path on four lanes, the same operations in the same order.
PLUMB_EXP_AVX2 inline __m256d ExpLanes(__m256d x) {
  const __m256d inv_ln2n = _mm256_set1_pd(kInvLn2N);
  const __m256d shift = _mm256_set1_pd(kShift);
  const __m256d shifted = _mm256_fmadd_pd(inv_ln2n, x, shift);
  const __m256i k = _mm256_castpd_si256(shifted);
  const __m256d kd = _mm256_sub_pd(shifted, shift);
  const __m256d r = _mm256_fmsub_pd(inv_ln2n, x, kd);
  const __m256i index = _mm256_and_si256(k, _mm256_set1_epi64x(31));
  const __m256i t = _mm256_add_epi64(
      _mm256_i64gather_epi64(reinterpret_cast<const long long*>(kTable), index, 8), _mm256_slli_epi64(k, 47));
  const __m256d z = _mm256_fmadd_pd(_mm256_set1_pd(kC0), r, _mm256_set1_pd(kC1));
  const __m256d r2 = _mm256_mul_pd(r, r);
  const __m256d y = _mm256_fmadd_pd(r, _mm256_set1_pd(kC2), _mm256_set1_pd(1.0));
  return _mm256_mul_pd(_mm256_fmadd_pd(z, r2, y), _mm256_castsi256_pd(t));
}

// Exp of eight floats none of which is large (exp_constants::IsLarge).
PLUMB_EXP_AVX2 inline __m256 Exp8(__m256 x) {
  const __m128 low = _mm256_cvtpd_ps(ExpLanes(_mm256_cvtps_pd(_mm256_castps256_ps128(x))));
  const __m128 high = _mm256_cvtpd_ps(ExpLanes(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1))));
  return _mm256_insertf128_ps(_mm256_castps128_ps256(low), high, 1);
}

PLUMB_EXP_AVX2 inline bool AnyLarge(__m256 x) {
  const __m256i top =
      _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(x), 20), _mm256_set1_epi32(0x7ff));
  return _mm256_movemask_epi8(_mm256_cmpgt_epi32(top, _mm256_set1_epi32(static_cast<int>(kLargeTop)))) != 0;
}

}  // namespace

PLUMB_EXP_AVX2 void ExpMinus(float* x, int n, float shift) {
  const __m256 s = _mm256_set1_ps(shift);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_sub_ps(_mm256_loadu_ps(x + i), s);
    if (AnyLarge(v)) {
      for (int j = i; j < i + 8; ++j) x[j] = scalar::Exp(x[j] - shift);
    } else {
      _mm256_storeu_ps(x + i, Exp8(v));
    }
  }
  for (; i < n; ++i) x[i] = scalar::Exp(x[i] - shift);
}

namespace {

// out = g / (1 + Exp(Argument(g))) · up, eight at a time; a step with a large argument, and the tail, go
// through Scalar (the definition). Argument and Scalar are function objects, since a lambda would not
// inherit this file's target attribute.
template <class Argument, void (*Scalar)(const float*, const float*, float*, int)>
PLUMB_EXP_AVX2 inline void GateByExp(const float* gate, const float* up, float* out, int n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 argument = Argument{}(g);
    if (AnyLarge(argument)) {
      Scalar(gate + i, up + i, out + i, 8);
      continue;
    }
    const __m256 act = _mm256_div_ps(g, _mm256_add_ps(one, Exp8(argument)));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(act, _mm256_loadu_ps(up + i)));
  }
  Scalar(gate + i, up + i, out + i, n - i);
}

struct MinusGate {  // −g, as the scalar negation (the sign bit flipped)
  PLUMB_EXP_AVX2 __m256 operator()(__m256 g) const {
    return _mm256_xor_ps(g, _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u))));
  }
};

struct GeluArgument {  // −2√(2/π) · (g + 0.044715 · ((g · g) · g)), scalar::GeluTanhGlu's roundings
  PLUMB_EXP_AVX2 __m256 operator()(__m256 g) const {
    const __m256 cube = _mm256_mul_ps(_mm256_mul_ps(g, g), g);
    const __m256 s = _mm256_add_ps(g, _mm256_mul_ps(_mm256_set1_ps(scalar::kGeluCubic), cube));
    return _mm256_mul_ps(_mm256_set1_ps(scalar::kMinusTwoSqrtTwoOverPi), s);
  }
};

}  // namespace

PLUMB_EXP_AVX2 void SwiGlu(const float* gate, const float* up, float* out, int n) {
  GateByExp<MinusGate, scalar::SwiGlu>(gate, up, out, n);
}

PLUMB_EXP_AVX2 void GeluTanhGlu(const float* gate, const float* up, float* out, int n) {
  GateByExp<GeluArgument, scalar::GeluTanhGlu>(gate, up, out, n);
}

}  // namespace plumb::kernels::avx2

#endif
