// The fast family's GGUF row dots with AVX2, FMA and F16C: ggml_int8.cpp's definition, bit for bit.
//
// Per 32-element block and row: the 32 weight codes in element order in one register (4-bit blocks: the 16
// low nibbles in bytes 0-15, the high ones in bytes 16-31), x's 32 int8 codes in another; maddubs multiplies
// unsigned by signed bytes and adds adjacent pairs into int16, madd with ones adds adjacent int16 pairs into
// int32: lane j = Σ of the products of elements 4j .. 4j + 3, the definition's p[b][j]. Q4_1's codes are
// unsigned already; Q4_0's and Q8_0's signed ones go in as |w| with w's sign moved onto x (sign_epi8), the
// same products. No int16 saturates: |x| ≤ 127 and |w| ≤ 128, so a pair is at most 2·128·127 = 32512. The
// int32 lanes convert exactly (|p| < 2^24) and the FMA into the 8 float lanes is the definition's.
// R rows at a time share each block's load of x.
#include "ggml_kernels.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>

#include "../avx2_common.h"
#include "plumb/core/extent.h"
#include "plumb/kernels/int8_activations.h"

#define PLUMB_AVX2_FMA __attribute__((target("avx2,f16c,fma")))

namespace plumb::kernels::ggml::avx2 {
namespace {

constexpr int kRows = 4;

// The 32 codes of a block as bytes in element order, and whether they are signed.
template <GgmlType kType>
PLUMB_AVX2_FMA inline __m256i Codes(const std::uint8_t* block) {
  if constexpr (kType == GgmlType::Q8_0) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
  } else {
    const __m128i qs =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + (kType == GgmlType::Q4_1 ? 4 : 2)));
    const __m128i low = _mm_and_si128(qs, _mm_set1_epi8(0x0F));
    const __m128i high = _mm_and_si128(_mm_srli_epi16(qs, 4), _mm_set1_epi8(0x0F));
    const __m256i codes = _mm256_set_m128i(high, low);
    if constexpr (kType == GgmlType::Q4_0) return _mm256_sub_epi8(codes, _mm256_set1_epi8(8));
    return codes;
  }
}

// p[j], j = 0..7, as int32 lanes: the products of elements 4j .. 4j + 3 summed.
template <GgmlType kType>
PLUMB_AVX2_FMA inline __m256i Partials(__m256i w, __m256i q) {
  __m256i pairs;
  if constexpr (kType == GgmlType::Q4_1) {
    pairs = _mm256_maddubs_epi16(w, q);
  } else {
    pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(q, w));
  }
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

template <GgmlType kType, int R>
PLUMB_AVX2_FMA void Dots(const WeightMatrix& W, int r0, const Int8Activations& x, float* y) {
  constexpr int kBlockBytes = kType == GgmlType::Q4_0 ? 18 : kType == GgmlType::Q4_1 ? 20 : 34;
  const int blocks = W.cols / 32;
  const std::uint8_t* row[R];
  __m256 lane[R];
  float m_sum[R];
  for (int r = 0; r < R; ++r) {
    row[r] = W.Row(r0 + r);
    lane[r] = _mm256_setzero_ps();
    m_sum[r] = 0.0f;
  }
  for (int b = 0; b < blocks; ++b) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q.data() + Extent(b, 32)));
    const float d_x = x.d[b];
    for (int r = 0; r < R; ++r) {
      const std::uint8_t* block = row[r] + Extent(b, kBlockBytes);
      if (b % 2 == 0) avx2_common::Prefetch(block, R * W.row_bytes);
      const float f = _cvtsh_ss(avx2_common::ReadU16(block)) * d_x;
      const __m256 p = _mm256_cvtepi32_ps(Partials<kType>(Codes<kType>(block), q));
      lane[r] = _mm256_fmadd_ps(_mm256_set1_ps(f), p, lane[r]);
      if constexpr (kType == GgmlType::Q4_1) {
        m_sum[r] = __builtin_fmaf(_cvtsh_ss(avx2_common::ReadU16(block + 2)), x.s[b], m_sum[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    alignas(32) float l[8];
    _mm256_store_ps(l, lane[r]);
    const float dot = avx2_common::ReduceLanes(l);
    y[r0 + r] = kType == GgmlType::Q4_1 ? dot + m_sum[r] : dot;
  }
}

template <GgmlType kType>
void Run(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y) {
  int r = row_begin;
  for (; r + kRows <= row_end; r += kRows) Dots<kType, kRows>(W, r, x, y);
  for (; r < row_end; ++r) Dots<kType, 1>(W, r, x, y);
}

}  // namespace

void Int8RowDots(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y) {
  static const bool fma = __builtin_cpu_supports("fma");
  if (!fma) return scalar::Int8RowDots(W, row_begin, row_end, x, y);
  switch (W.type) {
    case GgmlType::Q4_0:
      return Run<GgmlType::Q4_0>(W, row_begin, row_end, x, y);
    case GgmlType::Q4_1:
      return Run<GgmlType::Q4_1>(W, row_begin, row_end, x, y);
    default:
      return Run<GgmlType::Q8_0>(W, row_begin, row_end, x, y);
  }
}

}  // namespace plumb::kernels::ggml::avx2

#endif  // defined(__x86_64__)
