// Attention's score and value kernels on AVX-512 (F, BW, VL): the AVX2 ones' arithmetic with twice the lanes
// per instruction, reached only where IsaSupported(Isa::kAvx512) (attention.cpp's dispatch).
//   scores  scalar::Dot is an 8-lane sum, so a 16-lane register holds two positions' lanes side by side
//           ([position 2m | position 2m + 1]); each lane's chain of mul-then-add (no FMA) is Dot's, and the
//           reduction adds the same operands in the same order as Dot's ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)).
//   values  each output element is its own ascending sum, so 16 of them per register change no bit.
// GCC 12 reports the "undefined" pass-through operand of the 512-bit intrinsics (immintrin.h's
// _mm512_undefined_*) as uninitialised when they are inlined into a target-attribute function; the warning
// is about the header's idiom, not this code, so it is off for this file (before the first include of it).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "attention_score.h"
#include "attention_values.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "../simd/avx2_common.h"

namespace plumb::kernels::avx512 {
namespace {

// The dots of eight positions from a[m] = [position 2m | position 2m + 1] (each half Dot's eight lanes), in
// order: element i of the result is position i's ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)).
PLUMB_AVX512 inline __m256 ReduceEightDots(const __m512 (&a)[4]) {
  // 128-bit lanes of a[m]: [2m: l0..3, 2m: l4..7, 2m+1: l0..3, 2m+1: l4..7]. s_j = l_j + l_(j+4), four
  // positions per register: h0 = [p0 s | p1 s | p2 s | p3 s], h1 = the same for p4..p7.
  const __m512 h0 =
      _mm512_add_ps(_mm512_shuffle_f32x4(a[0], a[1], 0x88), _mm512_shuffle_f32x4(a[0], a[1], 0xDD));
  const __m512 h1 =
      _mm512_add_ps(_mm512_shuffle_f32x4(a[2], a[3], 0x88), _mm512_shuffle_f32x4(a[2], a[3], 0xDD));
  // Per 128-bit lane L: [h0 (s0+s2), h0 (s1+s3), h1 (s0+s2), h1 (s1+s3)].
  const __m512 q = _mm512_add_ps(_mm512_shuffle_ps(h0, h1, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_ps(h0, h1, _MM_SHUFFLE(3, 2, 3, 2)));
  // Per lane L: [dot of p_L, dot of p_(L+4), the same again].
  const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(q, q, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(q, q, _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castps512_ps256(_mm512_permutexvar_ps(order, r));
}

// [low | high] in one register (AVX-512F's 64-bit-element insert: the 32-bit one is AVX-512DQ).
PLUMB_AVX512 inline __m512 Halves(__m256 low, __m256 high) {
  return _mm512_castpd_ps(
      _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(low)), _mm256_castps_pd(high), 1));
}

// Up to three query heads' dots with eight positions (rows k + p · position_stride, p < 8), their lanes
// side by side; s[g] receives the eight scores of head g.
template <int G>
PLUMB_AVX512 inline void ScoreEight(const float* const* q, int head_dim, const std::uint8_t* k,
                                    std::size_t position_stride, __m256 scale, float* const* s) {
  __m512 acc[G][4];
  for (auto& head : acc) {
    for (__m512& a : head) a = _mm512_setzero_ps();
  }
  for (int d = 0; d < head_dim; d += 8) {
    __m512 qd[G];
    for (int g = 0; g < G; ++g) qd[g] = Halves(_mm256_loadu_ps(q[g] + d), _mm256_loadu_ps(q[g] + d));
    for (int m = 0; m < 4; ++m) {
      const auto* k0 = reinterpret_cast<const float*>(k + 2 * m * position_stride) + d;
      const auto* k1 = reinterpret_cast<const float*>(k + (2 * m + 1) * position_stride) + d;
      const __m512 kv = Halves(_mm256_loadu_ps(k0), _mm256_loadu_ps(k1));
      for (int g = 0; g < G; ++g) acc[g][m] = _mm512_add_ps(acc[g][m], _mm512_mul_ps(qd[g], kv));
    }
  }
  for (int g = 0; g < G; ++g) _mm256_storeu_ps(s[g], _mm256_mul_ps(ReduceEightDots(acc[g]), scale));
}

// One position's dot, Dot's lanes in one 8-lane register and its reduction.
PLUMB_AVX512 inline float DotOne(const float* q, const float* k, int head_dim) {
  __m256 acc = _mm256_setzero_ps();
  for (int d = 0; d < head_dim; d += 8) {
    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(k + d)));
  }
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));  // l_j + l_j+4
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));  // (l0+l4)+(l2+l6), (l1+l5)+(l3+l7)
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

// out_g[j] += p_g[t0 + i] · v_i[j], 16 columns per register, G heads, `lanes` registers of columns (the
// last masked to `width`): the sums stay in registers for the whole run.
template <int G, int L>
PLUMB_AVX512 inline void AccumulateTile(const float* const* p, int width, int t0, int count,
                                        const std::uint8_t* first, std::size_t stride, float* const* out) {
  __mmask16 mask[L];
  for (int l = 0; l < L; ++l) {
    const int left = width - 16 * l;
    mask[l] = left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1u);
  }
  __m512 acc[G][L];
  for (int g = 0; g < G; ++g) {
    for (int l = 0; l < L; ++l) acc[g][l] = _mm512_maskz_loadu_ps(mask[l], out[g] + 16 * l);
  }
  for (int i = 0; i < count; ++i) {
    const auto* v = reinterpret_cast<const float*>(first + i * stride);
    __m512 vl[L];
    for (int l = 0; l < L; ++l) vl[l] = _mm512_maskz_loadu_ps(mask[l], v + 16 * l);
    for (int g = 0; g < G; ++g) {
      const __m512 pt = _mm512_set1_ps(p[g][t0 + i]);
      for (int l = 0; l < L; ++l) acc[g][l] = _mm512_add_ps(acc[g][l], _mm512_mul_ps(pt, vl[l]));
    }
  }
  for (int g = 0; g < G; ++g) {
    for (int l = 0; l < L; ++l) _mm512_mask_storeu_ps(out[g] + 16 * l, mask[l], acc[g][l]);
  }
}

template <int G>
PLUMB_AVX512 inline void AccumulateHeads(const float* const* p, int width, int t0, int count,
                                         const std::uint8_t* first, std::size_t stride, float* const* out) {
  if (width > 16) {
    AccumulateTile<G, 2>(p, width, t0, count, first, stride, out);
  } else {
    AccumulateTile<G, 1>(p, width, t0, count, first, stride, out);
  }
}

}  // namespace

// The scores of a run (attention_score.h) for a head_dim that is a multiple of 8: eight positions at a time,
// up to three query heads of a KV head at a time sharing each key load.
PLUMB_AVX512 void ScoreRun(const float* q, int n_kv, int group, int head_dim, const KeyRun& run, float scale,
                           float* s, int s_stride) {
  const __m256 scale8 = _mm256_set1_ps(scale);
  int i = 0;
  for (; i + 8 <= run.count; i += 8) {
    for (int c = 0; c < n_kv; ++c) {
      const std::uint8_t* k = run.rows + i * run.position_stride + c * run.head_stride;
      if (run.next) {
        for (int p = 0; p < 8; ++p) {
          PrefetchBytes(run.next + (i + p) * run.position_stride + c * run.head_stride,
                        head_dim * static_cast<int>(sizeof(float)));
        }
      } else if (run.ahead && i + 24 <= run.count) {
        for (int p = 16; p < 24; ++p) {
          PrefetchBytes(k + p * run.position_stride, head_dim * static_cast<int>(sizeof(float)));
        }
      }
      for (int g0 = 0; g0 < group; g0 += 3) {
        const int g_count = group - g0 < 3 ? group - g0 : 3;
        const float* qh[3];
        float* sh[3];
        for (int g = 0; g < g_count; ++g) {
          const int h = c * group + g0 + g;
          qh[g] = q + static_cast<std::int64_t>(h) * head_dim;
          sh[g] = s + static_cast<std::int64_t>(h) * s_stride + i;
        }
        if (g_count == 3) {
          ScoreEight<3>(qh, head_dim, k, run.position_stride, scale8, sh);
        } else if (g_count == 2) {
          ScoreEight<2>(qh, head_dim, k, run.position_stride, scale8, sh);
        } else {
          ScoreEight<1>(qh, head_dim, k, run.position_stride, scale8, sh);
        }
      }
    }
  }
  for (; i < run.count; ++i) {
    for (int c = 0; c < n_kv; ++c) {
      const auto* k =
          reinterpret_cast<const float*>(run.rows + i * run.position_stride + c * run.head_stride);
      for (int h = c * group; h < (c + 1) * group; ++h) {
        s[static_cast<std::int64_t>(h) * s_stride + i] =
            DotOne(q + static_cast<std::int64_t>(h) * head_dim, k, head_dim) * scale;
      }
    }
  }
}

// AccumulateFn (attention_values.h) on AVX-512.
PLUMB_AVX512 void Accumulate(const float* const* p, int g_count, int width, int t0, int count,
                             const std::uint8_t* first, std::size_t stride, float* const* out) {
  if (g_count == 3) {
    AccumulateHeads<3>(p, width, t0, count, first, stride, out);
  } else if (g_count == 2) {
    AccumulateHeads<2>(p, width, t0, count, first, stride, out);
  } else {
    AccumulateHeads<1>(p, width, t0, count, first, stride, out);
  }
}

}  // namespace plumb::kernels::avx512
#endif
