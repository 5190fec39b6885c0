// PackedRowDots with AVX-512 (F, BW, VL): the scalar definition (kernels/packed_dot.h), eight lanes at a
// time, like the AVX2 variant, but with fewer instructions per weight.
//
// The vectors are 256-bit: on Zen 4 a 512-bit op occupies a 256-bit pipe for two cycles, and the definition
// (8 lanes, column i in lane i mod 8, each product rounded and then added in column order) would make a
// 16-wide product cost an extract and two adds anyway. What AVX-512 brings is instructions: VL's two-table
// permute (vpermt2ps) looks up 16 floats by the low 4 bits of each index lane, and 32 registers hold the
// tables of several rows.
//
// INT4: each group's 16 possible weights are computed once, by the definition's own expression on the
// 16 codes (formats/int4.h: float(q)·s, float(q − z)·s, (float(q) − z)·s), into a table of two vectors.
// 8 columns then cost a broadcast load of their 32-bit word, one variable shift (lane i holds nibble i in
// bits 0-3; the bits above are ignored by the permute), the permute, the product with x and the add: 4
// vector ops where AVX2 needs 6-7 (shift, and, convert, subtract, scale, product, add). float(q − z) is
// computed as float(q) − float(z): both are exact small integers, so the two are the same float.
//
// FP8 E4M3 (when the CPU also has GFNI): AVX2 makes each code's FP16 S.0EEEE.MMM0000000 (the value · 2^-8,
// packed_dot_avx2.cpp) by sign-extending the bytes to 16 bits, shifting and masking, 16 codes at a time, and
// then extracting the upper 8. Here two GF(2) affine byte maps (vgf2p8affineqb: each output bit the parity of
// chosen input bits, i.e. any bit permutation) make the high bytes S0EEEEMM and the low bytes M0000000 of 32
// codes, and two byte interleaves pair them into FP16: 6 ops per 32 codes instead of 8; NaN codes are noted
// as AVX2 does (E4M3NanTracker). The rest (the 2^8 on x, the F16C conversion, tail) is AVX2's.
//
// The bits therefore match: the weights are the definition's, and the products and adds are AVX2's
// (_mm256_mul_ps then _mm256_add_ps; no FMA, the build has -ffp-contract=off and the target leaves "fma"
// out), with the same tail and reduction (packed_dot_avx2.h).
#include "plumb/kernels/packed_dot.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "avx2_common.h"
#include "packed_dot_avx2.h"

namespace plumb::kernels::avx512 {
namespace {

using avx2_common::Prefetch;
using avx2_packed::CanScaleX;
using avx2_packed::Finish;
using avx2_packed::Int4Groups8;
using avx2_packed::Int4Weight;
using avx2_packed::ReadU32;

// Rows computed together: one row's adds are a single dependency chain, so rows in flight keep the adders
// busy; each row holds a two-vector table, and 32 registers leave room for more than AVX2's four.
constexpr int kRows = 4;

// ---- INT4 -------------------------------------------------------------------------------------------

// table(n) for the 16 codes n: lo holds n = 0..7, hi n = 8..15.
struct Table16 {
  __m256 lo, hi;

  // The weights of the 8 columns whose codes are the 8 nibbles of the 32-bit word at p.
  PLUMB_AVX512 __m256 Decode(const std::uint8_t* p) const {
    const __m256i word = _mm256_set1_epi32(static_cast<int>(ReadU32(p)));
    const __m256i index = _mm256_srlv_epi32(word, _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    return _mm256_permutex2var_ps(lo, index, hi);
  }
};

// The float scales and zero points of 8 consecutive groups of one row, kept in memory so that each group's
// value reaches a vector as a broadcast load, not a permute (one op fewer per group and row).
template <Int4Scheme S>
struct Int4Params8 {
  alignas(32) float scale[8];
  alignas(32) float zero[8];  // float(z): kAsymmetric's nibble, exactly, or kAsymmetricF16Zero's FP16

  PLUMB_AVX512 void Load(const WeightMatrix& W, int r, int g8, int groups, std::size_t zero_row) {
    Int4Groups8<S> params;
    params.LoadExact(W, r, g8, groups, zero_row);
    _mm256_store_ps(scale, params.scales);
    if constexpr (S == Int4Scheme::kAsymmetric) _mm256_store_ps(zero, _mm256_cvtepi32_ps(params.zeros));
    if constexpr (S == Int4Scheme::kAsymmetricF16Zero) _mm256_store_ps(zero, params.zeros_f);
  }

  // Group j (0..7) as the definition's 16 weights (formats/int4.h), by its own expressions.
  using Decoder = Table16;
  PLUMB_AVX512 Table16 Group(int j) const {
    const __m256 s = _mm256_set1_ps(scale[j]);
    if constexpr (S == Int4Scheme::kSymmetric) {
      // q = the nibble as two's complement: n = 0..7 is q = n, n = 8..15 is q = n − 16.
      return {_mm256_mul_ps(_mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7), s),
              _mm256_mul_ps(_mm256_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1), s)};
    } else {
      // kAsymmetric: float(n) − float(z) == float(n − z), both exact small integers.
      const __m256 z = _mm256_set1_ps(zero[j]);
      return {_mm256_mul_ps(_mm256_sub_ps(_mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7), z), s),
              _mm256_mul_ps(_mm256_sub_ps(_mm256_setr_ps(8, 9, 10, 11, 12, 13, 14, 15), z), s)};
    }
  }
};

template <Int4Scheme S>
using Int4RowParams = Int4Params8<S>;  // packed_dot_int4_body.h
#define PLUMB_PD_TARGET PLUMB_AVX512
#include "packed_dot_int4_body.h"
#undef PLUMB_PD_TARGET

// ---- FP8 E4M3 ---------------------------------------------------------------------------------------

#define PLUMB_AVX512_GFNI __attribute__((target("avx2,f16c,avx512f,avx512bw,avx512vl,gfni")))

// GFNI is not part of the kAvx512 requirement (Skylake-X has AVX-512 without it); asked once.
bool HasGfni() {
  static const bool has = __builtin_cpu_supports("gfni");
  return has;
}

// vgf2p8affineqb's matrix: byte 7 − i of the qword selects the input bits whose parity is output bit i.
// High byte of the FP16: bit 7 = code bit 7 (S), bit 6 = 0, bits 5..0 = code bits 6..1 (EEEE, MM).
constexpr long long kHighByte = 0x0204081020400080;
// Low byte: bit 7 = code bit 0 (the last M), bits 6..0 = 0.
constexpr long long kLowByte = 0x0000000000000001;

// kScaleX: x pre-multiplied by 2^8 (exact; see CanScaleX), else the weights are.
template <bool kScaleX, int R>
PLUMB_AVX512_GFNI void E4M3Dots(const WeightMatrix& W, int r0, const float* x, float* y) {
  const int cols = W.cols;
  const __m256 two8 = _mm256_set1_ps(256.0f);
  const __m256i high = _mm256_set1_epi64x(kHighByte), low = _mm256_set1_epi64x(kLowByte);
  const std::uint8_t* row[R];
  __m256 acc[R];
  avx2_packed::E4M3NanTracker nan[R];
  for (int r = 0; r < R; ++r) {
    row[r] = W.Row(r0 + r);
    acc[r] = _mm256_setzero_ps();
    nan[r].Reset();
  }
  const int full32 = cols - cols % 32;
  for (int c = 0; c < full32; c += 32) {
    __m256 xv[4];
    for (int v = 0; v < 4; ++v) {
      xv[v] = _mm256_loadu_ps(x + c + 8 * v);
      if constexpr (kScaleX) xv[v] = _mm256_mul_ps(xv[v], two8);
    }
    for (int r = 0; r < R; ++r) {
      if (c % 64 == 0) Prefetch(row[r], R * W.row_bytes + c);
      const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row[r] + c));
      nan[r].Add(codes);
      const __m256i hi = _mm256_gf2p8affine_epi64_epi8(codes, high, 0);
      const __m256i lo = _mm256_gf2p8affine_epi64_epi8(codes, low, 0);
      // Interleaves work within 128-bit halves: h0 holds codes 0-7 and 16-23, h1 codes 8-15 and 24-31.
      const __m256i h0 = _mm256_unpacklo_epi8(lo, hi), h1 = _mm256_unpackhi_epi8(lo, hi);
      __m256 w[4] = {_mm256_cvtph_ps(_mm256_castsi256_si128(h0)), _mm256_cvtph_ps(_mm256_castsi256_si128(h1)),
                     _mm256_cvtph_ps(_mm256_extracti128_si256(h0, 1)),
                     _mm256_cvtph_ps(_mm256_extracti128_si256(h1, 1))};
      for (int v = 0; v < 4; ++v) {
        if constexpr (!kScaleX) w[v] = _mm256_mul_ps(w[v], two8);
        acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(w[v], xv[v]));
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    y[r0 + r] = avx2_packed::Fp8Finish(W, Fp8Format::kE4M3, r0 + r, acc[r], full32, nan[r].Any(), x);
  }
}

// ---- dispatch ---------------------------------------------------------------------------------------

using RowsFn = void (*)(const WeightMatrix&, int, const float*, float*);

// Rows in groups of kRows, then one at a time.
void RunRows(RowsFn group, RowsFn single, const WeightMatrix& W, int row_begin, int row_end, const float* x,
             float* y) {
  int r = row_begin;
  for (; r + kRows <= row_end; r += kRows) group(W, r, x, y);
  for (; r < row_end; ++r) single(W, r, x, y);
}

template <Int4Scheme S>
void RunInt4(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  RunRows(Int4Dots<S, kRows>, Int4Dots<S, 1>, W, row_begin, row_end, x, y);
}

template <bool kScaleX>
void RunE4M3(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  RunRows(E4M3Dots<kScaleX, kRows>, E4M3Dots<kScaleX, 1>, W, row_begin, row_end, x, y);
}

}  // namespace

void PackedRowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  if (row_end <= row_begin) return;
  if (W.encoding == WeightEncoding::kFp8 && W.fp8_format == Fp8Format::kE4M3 && HasGfni()) {
    if (CanScaleX(x, W.cols)) return RunE4M3<true>(W, row_begin, row_end, x, y);
    return RunE4M3<false>(W, row_begin, row_end, x, y);
  }
  if (W.encoding == WeightEncoding::kInt4) {
    switch (W.int4.scheme) {
      case Int4Scheme::kSymmetric:
        return RunInt4<Int4Scheme::kSymmetric>(W, row_begin, row_end, x, y);
      case Int4Scheme::kAsymmetric:
        return RunInt4<Int4Scheme::kAsymmetric>(W, row_begin, row_end, x, y);
      case Int4Scheme::kAsymmetricF16Zero:
        return RunInt4<Int4Scheme::kAsymmetricF16Zero>(W, row_begin, row_end, x, y);
    }
  }
  avx2::PackedRowDots(W, row_begin, row_end, x, y);
}

}  // namespace plumb::kernels::avx512

#endif  // defined(__x86_64__)
