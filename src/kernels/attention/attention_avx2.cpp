// Attention's score phase on AVX2 (src/kernels/attention/attention_score.h): scalar::Dot's bits, eight
// positions at a time. Compiled for every x86-64 build with a target attribute; run only where the CPU has
// AVX2.
#include "attention_score.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "../simd/avx2_common.h"

namespace plumb::kernels::avx2 {
namespace {

// scalar::Dot's reduction of eight 8-lane accumulators at once: a[p] holds the lanes of position p's dot,
// and the result holds dot p in element p, each ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)): the additions of the
// one-at-a-time reduction, on the same operands in the same order, arranged by shuffles (three adds and a
// few permutes for eight dots instead of three adds and three shuffles for each).
PLUMB_AVX2 inline __m256 ReduceEightDots(const __m256 (&a)[8]) {
  __m256 half[4];  // half[p]: [l_j + l_(j+4) of position p | the same of position p + 4], j = 0..3
  for (int p = 0; p < 4; ++p) {
    half[p] = _mm256_add_ps(_mm256_permute2f128_ps(a[p], a[p + 4], 0x20),
                            _mm256_permute2f128_ps(a[p], a[p + 4], 0x31));
  }
  // Per 128-bit half: [(x0+x2), (x1+x3)] of two positions side by side.
  const __m256 quarter01 = _mm256_add_ps(_mm256_shuffle_ps(half[0], half[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                         _mm256_shuffle_ps(half[0], half[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m256 quarter23 = _mm256_add_ps(_mm256_shuffle_ps(half[2], half[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                         _mm256_shuffle_ps(half[2], half[3], _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm256_add_ps(_mm256_shuffle_ps(quarter01, quarter23, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm256_shuffle_ps(quarter01, quarter23, _MM_SHUFFLE(3, 1, 3, 1)));
}

}  // namespace

// The scores of a run (attention_score.h) for a head_dim that is a multiple of 8, eight positions at a time:
// for each KV head of those positions and each query head sharing it, eight dots side by side (eight
// independent chains of adds, where one dot's chain would leave the adders waiting), reduced together by
// ReduceEightDots. A paged block is read front to back (a call per head and run cost as much as the dots with
// 16-position blocks); the next block (run.next) or the rows ahead (run.ahead) are requested one KV head of
// eight positions at a time, spread between the dots: all eight positions' requests at once measured 8%
// slower over a paged cache at context 4096, the miss queue full while the dots waited. One 8-lane
// accumulator is scalar::Dot's lanes; mul and add stay separate (no FMA), so the bits are Dot's. A run's last
// count mod 8 positions are dotted one at a time with the same arithmetic.
PLUMB_AVX2 void ScoreRun(const float* q, int n_kv, int group, int head_dim, const KeyRun& run, float scale,
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
      for (int h = c * group; h < (c + 1) * group; ++h) {
        const float* qh = q + static_cast<std::int64_t>(h) * head_dim;
        __m256 acc[8];
        for (__m256& a : acc) a = _mm256_setzero_ps();
        for (int d = 0; d < head_dim; d += 8) {
          const __m256 qd = _mm256_loadu_ps(qh + d);
          for (int p = 0; p < 8; ++p) {
            const auto* kp = reinterpret_cast<const float*>(k + p * run.position_stride) + d;
            acc[p] = _mm256_add_ps(acc[p], _mm256_mul_ps(qd, _mm256_loadu_ps(kp)));
          }
        }
        _mm256_storeu_ps(s + static_cast<std::int64_t>(h) * s_stride + i,
                         _mm256_mul_ps(ReduceEightDots(acc), scale8));
      }
    }
  }
  for (; i < run.count; ++i) {
    for (int c = 0; c < n_kv; ++c) {
      const auto* k =
          reinterpret_cast<const float*>(run.rows + i * run.position_stride + c * run.head_stride);
      for (int h = c * group; h < (c + 1) * group; ++h) {
        const float* qh = q + static_cast<std::int64_t>(h) * head_dim;
        __m256 acc = _mm256_setzero_ps();
        for (int d = 0; d < head_dim; d += 8) {
          acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(qh + d), _mm256_loadu_ps(k + d)));
        }
        const __m128 s4 =
            _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));  // l_j + l_j+4
        const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));  // (l0+l4)+(l2+l6), (l1+l5)+(l3+l7)
        const float dot = _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
        s[static_cast<std::int64_t>(h) * s_stride + i] = dot * scale;
      }
    }
  }
}

}  // namespace plumb::kernels::avx2
#endif
