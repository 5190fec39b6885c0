// The fast family's GGUF row dots with AVX-512 VNNI: ggml_int8.cpp's definition, bit for bit, as the AVX2
// variant (ggml_int8_avx2.cpp) computes it, with VNNI's dpbusd in place of maddubs + madd: one instruction
// multiplies unsigned by signed bytes and adds each 4 adjacent products into an int32 lane, the
// definition's p[b][j] (exact: there is no int16 step to saturate). Its row dots keep to 256-bit vectors
// (AVX512VL), like every other AVX-512 kernel here. A CPU with AVX-512 F/BW/VL but no VNNI (Skylake-X) runs
// the AVX2 variant.
//
// Its int8_gemm (kernels/weight_format.h: for every x row, bitwise Int8RowDots, which is its whole
// definition) for Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 uses 512-bit vectors; the K-quants run Int8RowDots per x
// row.
//
// Why 512 bits here when every other AVX-512 kernel keeps to 256: a pair's float work per block (the
// definition's f = d_w·d_x, int32 → float, one FMA into 8 lanes) is fixed by the definition and was most of
// the 256-bit gemm's time (int8_gemm_x86_body.h, still the AVX2 one): SmolLM2's projections ran no faster
// than small_gemm's decoded FP32 tiles. A zmm register holds two pairs' 8 lanes, the same weight block
// against two x rows (lanes 0-7: x row i, lanes 8-15: x row i + 1), so each instruction does both pairs'
// step. On a CPU with two 512-bit FMA ports that halves the time per pair; on one that splits a 512-bit op
// into two 256-bit ones (Zen 4) it costs what 256 bits cost.
//
// Per pair, what Dots computes, in each 8-lane half:
//   - p[b][j] exact: dpbusd of unsigned codes u = w + kBias (Q4_0 the nibble, Q5_0 the 5-bit code, Q8_0
//     the byte ^ 0x80: ≤ 255, exact in dpbusd, which has no int16 step) starting from −kBias·σ, σ[j] = Σ q
//     over lane j's 4 elements (once per x block for every weight row); Q4_1's and Q5_1's codes as they are;
//   - f = d_w · d_x one float product per lane, the lane FMA, then ReduceLanes of the half, and for Q4_1,
//     Q5_1 + m_sum, whose chain fma(m_w, s_x, m_sum) is kept one lane per x row of a ymm register.
#include "ggml_kernels.h"

#if defined(__x86_64__)

// GCC 12's 512-bit intrinsics start their results from _mm512_undefined_*(), which its -Wmaybe-uninitialized
// then reports wherever they inline (GCC bug 105593, fixed in 13): silenced for this header alone.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif

#include <cstdint>

#include "../avx2_common.h"
#include "../int8_gemm_tiling.h"
#include "../int8_sums_x86.h"
#include "plumb/core/extent.h"
#include "plumb/kernels/int8_activations.h"
#include "plumb/kernels/weight_format.h"

namespace plumb::kernels::ggml::avx512 {
namespace {

constexpr int kRows = 4;

// acc + p[j] for unsigned codes u (int8_sums_x86.h).
PLUMB_INT8_VNNI inline __m256i AddPartials(__m256i acc, __m256i u, __m256i q) {
  return int8_sums::Vnni(acc, u, q);
}

#define PLUMB_I8_TARGET PLUMB_INT8_VNNI
#include "int8_dots_x86_body.h"
#undef PLUMB_I8_TARGET

constexpr int kGemmRows = 4;  // weight rows per register block
constexpr int kGemmX = 8;     // x rows per register block: four zmm pairs

// log2 of the bias that makes a type's codes unsigned (Q4_0 8, Q5_0 16, Q8_0 128); −1 for Q4_1, Q5_1.
template <GgmlType kType>
constexpr int kBiasShift = kType == GgmlType::Q4_0   ? 3
                           : kType == GgmlType::Q5_0 ? 4
                           : kType == GgmlType::Q8_0 ? 7
                                                     : -1;

// The 32 unsigned codes w + 2^kBiasShift of a block, in both 256-bit halves.
template <GgmlType kType>
PLUMB_INT8_VNNI inline __m512i UnsignedCodes(const std::uint8_t* block) {
  __m256i u;
  if constexpr (kType == GgmlType::Q8_0) {
    u = _mm256_xor_si256(Codes<kType>(block), _mm256_set1_epi8(static_cast<char>(0x80)));
  } else {
    static_assert(kBiasShift<kType> < 0 || Int8LayoutOf(kType).offset == 1 << kBiasShift<kType>);
    u = Codes<kType, true>(block);
  }
  return _mm512_broadcast_i64x4(u);
}

// Rows r0 .. r0 + RW − 1 against x rows xs[0 .. RX − 1]: Y[i][r] (row stride ldy). With RX odd, the last
// pair's upper half repeats its lower x row and is not stored.
template <GgmlType kType, int RW, int RX>
PLUMB_INT8_VNNI void GemmBlock(const WeightMatrix& W, int r0, const Int8Activations* xs, float* Y,
                               std::size_t ldy) {
  constexpr int kPairs = (RX + 1) / 2;
  constexpr int kBlockBytes = Int8LayoutOf(kType).block_bytes;
  constexpr bool kMin = Int8LayoutOf(kType).has_min;
  constexpr int kShift = kBiasShift<kType>;
  const int blocks = W.cols / 32;
  const std::uint8_t* row[RW];
  for (int r = 0; r < RW; ++r) row[r] = W.Row(r0 + r);
  const Int8Activations* x[2 * kPairs];  // the x row of each half
  for (int h = 0; h < 2 * kPairs; ++h) x[h] = &xs[h < RX ? h : RX - 1];
  __m512 lane[RW][kPairs];
  __m256 m_sum[RW];  // lane i: pair (r, x row i)'s chain
  for (int r = 0; r < RW; ++r) {
    for (int p = 0; p < kPairs; ++p) lane[r][p] = _mm512_setzero_ps();
    m_sum[r] = _mm256_setzero_ps();
  }
  for (int b = 0; b < blocks; ++b) {
    __m512i q[kPairs], init[kPairs];
    __m512 d_x[kPairs];
    for (int p = 0; p < kPairs; ++p) {
      const Int8Activations& lo = *x[2 * p];
      const Int8Activations& hi = *x[2 * p + 1];
      q[p] = _mm512_inserti64x4(
          _mm512_castsi256_si512(
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo.q.data() + Extent(b, 32)))),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi.q.data() + Extent(b, 32))), 1);
      d_x[p] = _mm512_castpd_ps(
          _mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(_mm256_set1_ps(lo.d[b]))),
                             _mm256_castps_pd(_mm256_set1_ps(hi.d[b])), 1));
      init[p] = _mm512_setzero_si512();
      if constexpr (kShift >= 0) {
        const __m512i sigma = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), q[p]);
        init[p] = _mm512_sub_epi32(init[p], _mm512_slli_epi32(sigma, kShift));
      }
    }
    __m256 s_x = _mm256_setzero_ps();
    if constexpr (kMin) {
      alignas(32) float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int i = 0; i < RX; ++i) s[i] = xs[i].s[b];
      s_x = _mm256_load_ps(s);
    }
    for (int r = 0; r < RW; ++r) {
      const std::uint8_t* block = row[r] + Extent(b, kBlockBytes);
      if (b % 2 == 0) avx2_common::Prefetch(block, RW * W.row_bytes);
      const __m512i u = UnsignedCodes<kType>(block);
      const __m512 d_w = _mm512_set1_ps(_cvtsh_ss(avx2_common::ReadU16(block)));
      for (int p = 0; p < kPairs; ++p) {
        const __m512i sums = _mm512_dpbusd_epi32(init[p], u, q[p]);
        lane[r][p] = _mm512_fmadd_ps(_mm512_mul_ps(d_w, d_x[p]), _mm512_cvtepi32_ps(sums), lane[r][p]);
      }
      if constexpr (kMin) {
        m_sum[r] = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(avx2_common::ReadU16(block + 2))), s_x, m_sum[r]);
      }
    }
  }
  for (int r = 0; r < RW; ++r) {
    alignas(32) float m[8];
    _mm256_store_ps(m, m_sum[r]);
    for (int p = 0; p < kPairs; ++p) {
      alignas(64) float l[16];
      _mm512_store_ps(l, lane[r][p]);
      for (int h = 0; h < 2 && 2 * p + h < RX; ++h) {
        const int i = 2 * p + h;
        const float dot = avx2_common::ReduceLanes(l + 8 * h);
        Y[Extent(i, ldy) + r0 + r] = kMin ? dot + m[i] : dot;
      }
    }
  }
}

// GemmBlock as Int8GemmTiling's block kernel.
template <GgmlType kType>
struct GgmlGemmBlock {
  template <int RW, int RX>
  static void Run(const WeightMatrix& W, int r0, const Int8Activations* xs, float* Y, std::size_t ldy) {
    GemmBlock<kType, RW, RX>(W, r0, xs, Y, ldy);
  }
};

template <GgmlType kType>
void Gemm(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs, int m, float* Y,
          std::size_t ldy) {
  Int8GemmTiling<GgmlGemmBlock<kType>, kGemmRows, kGemmX>::Run(W, row_begin, row_end, xs, m, Y, ldy);
}

}  // namespace

void Int8RowDots(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y) {
  static const bool vnni = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("fma");
  if (!vnni) return avx2::Int8RowDots(W, row_begin, row_end, x, y);
  RunAnyType(W, row_begin, row_end, x, y);
}

void Int8Gemm(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs, int m, float* Y,
              std::size_t ldy) {
  static const bool vnni = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("fma");
  if (!vnni) return avx2::Int8Gemm(W, row_begin, row_end, xs, m, Y, ldy);
  switch (W.type) {
    case GgmlType::Q4_0:
      return Gemm<GgmlType::Q4_0>(W, row_begin, row_end, xs, m, Y, ldy);
    case GgmlType::Q4_1:
      return Gemm<GgmlType::Q4_1>(W, row_begin, row_end, xs, m, Y, ldy);
    case GgmlType::Q5_0:
      return Gemm<GgmlType::Q5_0>(W, row_begin, row_end, xs, m, Y, ldy);
    case GgmlType::Q5_1:
      return Gemm<GgmlType::Q5_1>(W, row_begin, row_end, xs, m, Y, ldy);
    case GgmlType::Q8_0:
      return Gemm<GgmlType::Q8_0>(W, row_begin, row_end, xs, m, Y, ldy);
    default:  // the K-quants
      for (int i = 0; i < m; ++i) Int8RowDots(W, row_begin, row_end, xs[i], Y + Extent(i, ldy));
  }
}

}  // namespace plumb::kernels::ggml::avx512

#endif  // defined(__x86_64__)
