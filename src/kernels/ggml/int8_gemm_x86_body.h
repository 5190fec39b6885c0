// The fast family's GGUF int8_gemm for the 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): for every
// x row i and weight row r, bitwise int8_dots_x86_body.h's Dots (ggml_int8.cpp's definition, with no
// definition of its own; kernels/weight_format.h, int8_gemm), in 256-bit vectors. Included after
// int8_dots_x86_body.h, in the same namespace, by ggml_int8_avx2.cpp (the AVX-512 VNNI variant has a 512-bit
// gemm of its own, ggml_int8_avx512.cpp, which says why), which also defines
//   kGemmRows         weight rows per register block (kGemmX = 4 x rows each),
//   kWideUnsigned     whether AddPartials is exact for unsigned codes up to 255 (dpbusd, also in 256-bit
//                     AVX-VNNI; maddubs's int16 pairs are not).
// A block of kGemmRows weight rows and up to 4 x rows walks the blocks once: each weight block's codes, d
// and m are prepared once and serve every x row, and each x block's codes and factors once for every weight
// row. What each (x row, weight row) pair computes is what Dots computes for it:
//   - the integer sums p[b][j] are exact either way. Where Dots moves w's sign onto x (Q4_0, Q5_0, Q8_0),
//     this takes unsigned codes u = w + kBias instead (the nibble itself, or Q8_0's byte ^ 0x80 where
//     kWideUnsigned) and starts the sum from −kBias·σ, σ[j] = Σ q over the lane's 4 elements, computed once
//     per x block for every weight row: the same integer;
//   - f = d_w · d_x is the same one float product (here in every lane of a vector), the lane FMA the same,
//     the minimum's chain fma(m_w, s_x, m_sum) the same per pair (here one lane per x row of a vector), and
//     the end the same ReduceLanes then + m_sum.
#if !defined(PLUMB_I8_TARGET)
#error "define PLUMB_I8_TARGET before including int8_gemm_x86_body.h"
#endif

constexpr int kGemmX = 4;

// log2 of the bias that makes a type's codes unsigned for the gemm (Q4_0 8, Q5_0 16, Q8_0 128 where
// kWideUnsigned); −1 where the codes are used as they are: unsigned already, or Q8_0 with its sign moved.
template <GgmlType kType>
constexpr int kGemmBiasShift = kType == GgmlType::Q4_0                      ? 3
                               : kType == GgmlType::Q5_0                    ? 4
                               : (kType == GgmlType::Q8_0 && kWideUnsigned) ? 7
                                                                            : -1;

// The codes of a block as the gemm multiplies them: w + 2^kGemmBiasShift where that is set, else Codes.
template <GgmlType kType>
PLUMB_I8_TARGET inline __m256i GemmCodes(const std::uint8_t* block) {
  if constexpr (kType == GgmlType::Q8_0 && kGemmBiasShift<kType> >= 0) {
    return _mm256_xor_si256(Codes<kType>(block), _mm256_set1_epi8(static_cast<char>(0x80)));
  } else {
    static_assert(kGemmBiasShift<kType> < 0 || Int8LayoutOf(kType).offset == 1 << kGemmBiasShift<kType>);
    return Codes<kType, true>(block);
  }
}

// Rows r0 .. r0 + RW − 1 against x rows xs[0 .. RX − 1]: Y[i][r] (row stride ldy).
template <GgmlType kType, int RW, int RX>
PLUMB_I8_TARGET void GemmBlock(const WeightMatrix& W, int r0, const Int8Activations* xs, float* Y,
                               std::size_t ldy) {
  constexpr int kBlockBytes = Int8LayoutOf(kType).block_bytes;
  constexpr bool kMin = Int8LayoutOf(kType).has_min;
  constexpr int kShift = kGemmBiasShift<kType>;
  constexpr bool kSignMoved = !Int8LayoutOf(kType).is_unsigned && kShift < 0;  // Q8_0 without VNNI
  const int blocks = W.cols / 32;
  const std::uint8_t* row[RW];
  for (int r = 0; r < RW; ++r) row[r] = W.Row(r0 + r);
  const std::int8_t* xq[RX];
  const float* xd[RX];
  const float* xsum[RX];
  for (int i = 0; i < RX; ++i) {
    xq[i] = xs[i].q.data();
    xd[i] = xs[i].d.data();
    xsum[i] = xs[i].s.data();
  }
  __m256 lane[RW][RX];
  __m128 m_sum[RW];  // lane i: pair (r, x row i)'s chain
  for (int r = 0; r < RW; ++r) {
    for (int i = 0; i < RX; ++i) lane[r][i] = _mm256_setzero_ps();
    m_sum[r] = _mm_setzero_ps();
  }
  for (int b = 0; b < blocks; ++b) {
    __m256i q[RX], init[RX];
    __m256 d_x[RX];
    for (int i = 0; i < RX; ++i) {
      q[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[i] + Extent(b, 32)));
      d_x[i] = _mm256_set1_ps(xd[i][b]);
      init[i] = _mm256_setzero_si256();
      if constexpr (kShift >= 0) {
        const __m256i sigma = AddPartials(_mm256_setzero_si256(), _mm256_set1_epi8(1), q[i]);
        init[i] = _mm256_sub_epi32(init[i], _mm256_slli_epi32(sigma, kShift));
      }
    }
    __m128 s_x = _mm_setzero_ps();
    if constexpr (kMin) {
      alignas(16) float s[4] = {0, 0, 0, 0};
      for (int i = 0; i < RX; ++i) s[i] = xsum[i][b];
      s_x = _mm_load_ps(s);
    }
    for (int r = 0; r < RW; ++r) {
      const std::uint8_t* block = row[r] + Extent(b, kBlockBytes);
      if (b % 2 == 0) avx2_common::Prefetch(block, RW * W.row_bytes);
      const __m256i u = GemmCodes<kType>(block);
      const __m256 d_w = _mm256_set1_ps(_cvtsh_ss(avx2_common::ReadU16(block)));
      for (int i = 0; i < RX; ++i) {
        __m256i p;
        if constexpr (kSignMoved) {
          const int8_sums::SignMoved m = int8_sums::MoveSign(u, q[i]);
          p = AddPartials(init[i], m.u, m.q);
        } else {
          p = AddPartials(init[i], u, q[i]);
        }
        lane[r][i] = _mm256_fmadd_ps(_mm256_mul_ps(d_w, d_x[i]), _mm256_cvtepi32_ps(p), lane[r][i]);
      }
      if constexpr (kMin) {
        const __m128 m_w = _mm_set1_ps(_cvtsh_ss(avx2_common::ReadU16(block + 2)));
        m_sum[r] = _mm_fmadd_ps(m_w, s_x, m_sum[r]);
      }
    }
  }
  for (int r = 0; r < RW; ++r) {
    alignas(16) float m[4];
    _mm_store_ps(m, m_sum[r]);
    for (int i = 0; i < RX; ++i) {
      alignas(32) float l[8];
      _mm256_store_ps(l, lane[r][i]);
      const float dot = avx2_common::ReduceLanes(l);
      Y[Extent(i, ldy) + r0 + r] = kMin ? dot + m[i] : dot;
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

// int8_gemm for a matrix HasInt8 accepts: the block types here, the K-quants their Dots per x row.
void GemmAnyType(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs, int m,
                 float* Y, std::size_t ldy) {
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
    default:
      for (int i = 0; i < m; ++i) RunAnyType(W, row_begin, row_end, xs[i], Y + Extent(i, ldy));
  }
}
