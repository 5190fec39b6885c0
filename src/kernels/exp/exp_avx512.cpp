// The Exp-based ops with AVX-512 (exp_kernels.h): sixteen floats per step, as two registers of eight
// doubles; the table of 2^(i/32) held in four registers and read by two-source permutes.
// GCC 12 reports the "undefined" pass-through operand of the 512-bit intrinsics (immintrin.h's
// _mm512_undefined_*) as uninitialised when they are inlined into a target-attribute function; the warning
// is about the header's idiom, not this code, so it is off for this file (before the first include of it).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "exp_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

#include "exp_constants.h"
#include "plumb/kernels/scalar.h"

#define PLUMB_EXP512 __attribute__((target("avx2,f16c,fma,avx512f,avx512bw,avx512vl")))

namespace plumb::kernels::avx512 {
namespace {

using namespace exp_constants;

// scalar::Exp's polynomial path on eight lanes, the same operations in the same order.
PLUMB_EXP512 inline __m512d ExpLanes(__m512d x) {
  const __m512d inv_ln2n = _mm512_set1_pd(kInvLn2N);
  const __m512d shift = _mm512_set1_pd(kShift);
  const __m512d shifted = _mm512_fmadd_pd(inv_ln2n, x, shift);
  const __m512i k = _mm512_castpd_si512(shifted);
  const __m512d kd = _mm512_sub_pd(shifted, shift);
  const __m512d r = _mm512_fmsub_pd(inv_ln2n, x, kd);
  // kTable[k mod 32]: a permute reads bits 0..3 of k (bit 3 choosing its second source), bit 4 the pair.
  const __m512i low =
      _mm512_permutex2var_epi64(_mm512_loadu_si512(kTable), k, _mm512_loadu_si512(kTable + 8));
  const __m512i high =
      _mm512_permutex2var_epi64(_mm512_loadu_si512(kTable + 16), k, _mm512_loadu_si512(kTable + 24));
  const __mmask8 upper = _mm512_test_epi64_mask(k, _mm512_set1_epi64(16));
  const __m512i t = _mm512_add_epi64(_mm512_mask_blend_epi64(upper, low, high), _mm512_slli_epi64(k, 47));
  const __m512d z = _mm512_fmadd_pd(_mm512_set1_pd(kC0), r, _mm512_set1_pd(kC1));
  const __m512d r2 = _mm512_mul_pd(r, r);
  const __m512d y = _mm512_fmadd_pd(r, _mm512_set1_pd(kC2), _mm512_set1_pd(1.0));
  return _mm512_mul_pd(_mm512_fmadd_pd(z, r2, y), _mm512_castsi512_pd(t));
}

// Exp of sixteen floats none of which is large (exp_constants::IsLarge).
PLUMB_EXP512 inline __m512 Exp16(__m512 x) {
  const __m256 low = _mm512_cvtpd_ps(ExpLanes(_mm512_cvtps_pd(_mm512_castps512_ps256(x))));
  const __m256 high = _mm512_cvtpd_ps(
      ExpLanes(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)))));
  return _mm512_castpd_ps(
      _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(low)), _mm256_castps_pd(high), 1));
}

PLUMB_EXP512 inline bool AnyLarge(__m512 x) {
  const __m512i top =
      _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(x), 20), _mm512_set1_epi32(0x7ff));
  return _mm512_cmpgt_epi32_mask(top, _mm512_set1_epi32(static_cast<int>(kLargeTop))) != 0;
}

}  // namespace

PLUMB_EXP512 void ExpMinus(float* x, int n, float shift) {
  const __m512 s = _mm512_set1_ps(shift);
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_sub_ps(_mm512_loadu_ps(x + i), s);
    if (AnyLarge(v)) {
      for (int j = i; j < i + 16; ++j) x[j] = scalar::Exp(x[j] - shift);
    } else {
      _mm512_storeu_ps(x + i, Exp16(v));
    }
  }
  for (; i < n; ++i) x[i] = scalar::Exp(x[i] - shift);
}

namespace {

// out = g / (1 + Exp(Argument(g))) · up, sixteen at a time; a step with a large argument, and the tail, go
// through Scalar (the definition). As exp_avx2.cpp's GateByExp.
template <class Argument, void (*Scalar)(const float*, const float*, float*, int)>
PLUMB_EXP512 inline void GateByExp(const float* gate, const float* up, float* out, int n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    const __m512 argument = Argument{}(g);
    if (AnyLarge(argument)) {
      Scalar(gate + i, up + i, out + i, 16);
      continue;
    }
    const __m512 act = _mm512_div_ps(g, _mm512_add_ps(one, Exp16(argument)));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(act, _mm512_loadu_ps(up + i)));
  }
  Scalar(gate + i, up + i, out + i, n - i);
}

struct MinusGate {  // −g, as the scalar negation (the sign bit flipped)
  PLUMB_EXP512 __m512 operator()(__m512 g) const {
    const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(g), sign));
  }
};

struct GeluArgument {  // −2√(2/π) · (g + 0.044715 · ((g · g) · g)), scalar::GeluTanhGlu's roundings
  PLUMB_EXP512 __m512 operator()(__m512 g) const {
    const __m512 cube = _mm512_mul_ps(_mm512_mul_ps(g, g), g);
    const __m512 s = _mm512_add_ps(g, _mm512_mul_ps(_mm512_set1_ps(scalar::kGeluCubic), cube));
    return _mm512_mul_ps(_mm512_set1_ps(scalar::kMinusTwoSqrtTwoOverPi), s);
  }
};

}  // namespace

PLUMB_EXP512 void SwiGlu(const float* gate, const float* up, float* out, int n) {
  GateByExp<MinusGate, scalar::SwiGlu>(gate, up, out, n);
}

PLUMB_EXP512 void GeluTanhGlu(const float* gate, const float* up, float* out, int n) {
  GateByExp<GeluArgument, scalar::GeluTanhGlu>(gate, up, out, n);
}

}  // namespace plumb::kernels::avx512

#endif
