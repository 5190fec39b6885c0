// The fast family's INT4 int8_gemm: for every x row i and weight row r, bitwise int4_int8_x86_body.h's Dots
// (int4_int8.cpp's definition; int8_gemm has none of its own, kernels/weight_format.h). Included after
// int4_int8_x86_body.h, in the same namespace, by int4_int8_x86.cpp for AVX2 and for VNNI; the including
// namespace defines kGemmRows (weight rows per register block; kGemmX = 4 x rows each).
// A block of kGemmRows weight rows and up to 4 x rows walks the blocks once: each weight block's nibbles and
// each group's factors are prepared once for every x row, each x block's codes once for every weight row.
// Per pair it computes what Dots computes:
//   - the integer sums p[b][j], exact either way. sym: Σ (u − 8)·q from −8·σ, as Dots. asym: where Dots
//     moves the sign of c = nibble − z onto x, this sums z·(−q) then nibble·q (both unsigned by signed
//     bytes, −q exact as |q| ≤ 127): the same integer, without a sign step per pair. f16-zero: the nibbles;
//   - f = s_g · d_x the same one float product (in every lane of a vector), the lane FMA the same, the
//     f16-zero chain fma(s·z, s_x, z_sum) the same per pair (one lane per x row), the end the same.
#if !defined(PLUMB_BODY_TARGET)
#error "define PLUMB_BODY_TARGET before including int4_int8_gemm_x86_body.h"
#endif

constexpr int kGemmX = 4;

// Rows r0 .. r0 + RW − 1 against x rows xs[0 .. RX − 1]: Y[i][r] (row stride ldy).
template <Int4Scheme S, int RW, int RX>
PLUMB_BODY_TARGET void GemmBlock(const WeightMatrix& W, int r0, const Int8Activations* xs, float* Y,
                                 std::size_t ldy) {
  const int G = W.int4.group_size;
  const int groups = Int4Groups(W.cols, G);
  const int blocks = W.cols / 32;
  const std::size_t zero_row = Int4ZeroRowBytes(W.int4, W.cols);
  const std::uint8_t* codes[RW];
  const std::size_t ahead = avx2_common::PrefetchAhead(RW * W.row_bytes);
  const std::uint16_t* scales[RW];
  const std::uint8_t* zeros[RW];
  __m256 lane[RW][RX];
  __m128 z_sum[RW];  // asym-f16zero; lane i: pair (r, x row i)'s chain
  for (int r = 0; r < RW; ++r) {
    codes[r] = W.Row(r0 + r);
    scales[r] = W.int4_scales + Extent(r0 + r, groups);
    zeros[r] = W.int4_zeros == nullptr ? nullptr : W.int4_zeros + Extent(r0 + r, zero_row);
    for (int i = 0; i < RX; ++i) lane[r][i] = _mm256_setzero_ps();
    z_sum[r] = _mm_setzero_ps();
  }
  for (int g = 0; g < groups; ++g) {
    __m256 s[RW];
    __m256i zero[RW];  // asym: the zero nibble in every byte
    __m128 sz[RW];     // asym-f16zero: s·z
    for (int r = 0; r < RW; ++r) {
      const float s_g = _cvtsh_ss(scales[r][g]);
      s[r] = _mm256_set1_ps(s_g);
      if constexpr (S == Int4Scheme::kAsymmetric) {
        zero[r] = _mm256_set1_epi8(static_cast<char>(Int4Code(zeros[r], g)));
      } else if constexpr (S == Int4Scheme::kAsymmetricF16Zero) {
        sz[r] = _mm_set1_ps(s_g * _cvtsh_ss(avx2_common::ReadU16(zeros[r] + Extent(g, 2))));
      }
    }
    const int b_end = (g + 1) * G / 32 < blocks ? (g + 1) * G / 32 : blocks;
    for (int b = g * G / 32; b < b_end; ++b) {
      __m256i q[RX], init[RX];
      __m256 d_x[RX];
      for (int i = 0; i < RX; ++i) {
        q[i] = EvenThenOdd(xs[i].q.data() + Extent(b, 32));
        d_x[i] = _mm256_set1_ps(xs[i].d[b]);
        init[i] = _mm256_setzero_si256();
        if constexpr (S == Int4Scheme::kSymmetric) {
          init[i] = _mm256_sub_epi32(init[i],
                                     _mm256_slli_epi32(AddPartials(init[i], _mm256_set1_epi8(1), q[i]), 3));
        } else if constexpr (S == Int4Scheme::kAsymmetric) {
          init[i] = _mm256_sub_epi8(_mm256_setzero_si256(), q[i]);  // −q, for the zero's term
        }
      }
      __m128 s_x = _mm_setzero_ps();
      if constexpr (S == Int4Scheme::kAsymmetricF16Zero) {
        alignas(16) float sums[4] = {0, 0, 0, 0};
        for (int i = 0; i < RX; ++i) sums[i] = xs[i].s[b];
        s_x = _mm_load_ps(sums);
      }
      for (int r = 0; r < RW; ++r) {
        const std::uint8_t* block = codes[r] + Extent(b, 16);
        if (b % 4 == 0) avx2_common::Prefetch(block, ahead);
        __m256i u = Nibbles(block);
        if constexpr (S == Int4Scheme::kSymmetric) u = _mm256_xor_si256(u, _mm256_set1_epi8(8));
        for (int i = 0; i < RX; ++i) {
          __m256i p;
          if constexpr (S == Int4Scheme::kAsymmetric) {
            p = AddPartials(AddPartials(_mm256_setzero_si256(), zero[r], init[i]), u, q[i]);
          } else {
            p = AddPartials(init[i], u, q[i]);
          }
          lane[r][i] = _mm256_fmadd_ps(_mm256_mul_ps(s[r], d_x[i]), _mm256_cvtepi32_ps(p), lane[r][i]);
        }
        if constexpr (S == Int4Scheme::kAsymmetricF16Zero) z_sum[r] = _mm_fmadd_ps(sz[r], s_x, z_sum[r]);
      }
    }
  }
  for (int r = 0; r < RW; ++r) {
    alignas(16) float z[4];
    _mm_store_ps(z, z_sum[r]);
    for (int i = 0; i < RX; ++i) {
      alignas(32) float l[8];
      _mm256_store_ps(l, lane[r][i]);
      const float dot = avx2_common::ReduceLanes(l);
      Y[Extent(i, ldy) + r0 + r] = S == Int4Scheme::kAsymmetricF16Zero ? dot - z[i] : dot;
    }
  }
}

// GemmBlock as Int8GemmTiling's block kernel.
template <Int4Scheme S>
struct Int4GemmBlock {
  template <int RW, int RX>
  static void Run(const WeightMatrix& W, int r0, const Int8Activations* xs, float* Y, std::size_t ldy) {
    GemmBlock<S, RW, RX>(W, r0, xs, Y, ldy);
  }
};

// int8_gemm for an INT4 matrix with whole 32-column blocks.
inline void GemmAnyScheme(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs, int m,
                          float* Y, std::size_t ldy) {
  WithScheme(W.int4.scheme, [&](auto scheme) {
    constexpr Int4Scheme S = decltype(scheme)::value;
    Int8GemmTiling<Int4GemmBlock<S>, kGemmRows, kGemmX>::Run(W, row_begin, row_end, xs, m, Y, ldy);
  });
}
