// The fast family's GGUF block dots (ggml_int8.cpp's definition), written once and compiled by
// ggml_int8_avx2.cpp and ggml_int8_avx512.cpp, which differ only in how a block's 32 products become the
// 8 int32 partial sums (maddubs + madd, or VNNI's dpbusd: the same sums, exactly). The including file
// defines PLUMB_I8_TARGET (the function target, so that Partials inlines into the loop) and, in the
// namespace it includes this in, kRows and Partials<kType>(w, q): lane j = Σ w_i·q_i over i = 4j .. 4j + 3
// of the 32 weight codes w (bytes in element order, unsigned where Int8LayoutOf(kType).is_unsigned, signed
// otherwise) and x's codes q.
// R rows at a time share each block's load of x.
#if !defined(PLUMB_I8_TARGET)
#error "define PLUMB_I8_TARGET before including int8_dots_x86_body.h"
#endif

// Byte i = 0xFF where bit i of the 32 bits is set, else 0 (element i's fifth bit in Q5_0 / Q5_1): each
// byte gets the bits' byte i / 8, and OR-ing every bit but i % 8 leaves 0xFF exactly when bit i % 8 is set.
PLUMB_I8_TARGET inline __m256i BitsToBytes(std::uint32_t bits) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0x0000000000000000));
  const __m256i others = _mm256_set1_epi64x(static_cast<long long>(0x7FBFDFEFF7FBFDFEULL));
  return _mm256_cmpeq_epi8(_mm256_or_si256(spread, others), _mm256_set1_epi64x(-1));
}

// The 32 codes of a block as bytes in element order (Q4_0, Q5_0 and Q8_0 signed; Q4_1, Q5_1 unsigned).
template <GgmlType kType>
PLUMB_I8_TARGET inline __m256i Codes(const std::uint8_t* block) {
  if constexpr (kType == GgmlType::Q8_0) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
  } else {
    constexpr Int8Layout kLayout = Int8LayoutOf(kType);
    const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + kLayout.qs));
    const __m128i low = _mm_and_si128(qs, _mm_set1_epi8(0x0F));
    const __m128i high = _mm_and_si128(_mm_srli_epi16(qs, 4), _mm_set1_epi8(0x0F));
    __m256i codes = _mm256_set_m128i(high, low);
    if constexpr (kLayout.five_bits) {
      const __m256i fifth = BitsToBytes(ReadU32(block + kLayout.qs - 4));
      codes = _mm256_or_si256(codes, _mm256_and_si256(fifth, _mm256_set1_epi8(0x10)));
    }
    if constexpr (kLayout.offset != 0) return _mm256_sub_epi8(codes, _mm256_set1_epi8(kLayout.offset));
    return codes;
  }
}

template <GgmlType kType, int R>
PLUMB_I8_TARGET void Dots(const WeightMatrix& W, int r0, const Int8Activations& x, float* y) {
  constexpr int kBlockBytes = Int8LayoutOf(kType).block_bytes;
  constexpr bool kMin = Int8LayoutOf(kType).has_min;
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
      if constexpr (kMin) {
        m_sum[r] = __builtin_fmaf(_cvtsh_ss(avx2_common::ReadU16(block + 2)), x.s[b], m_sum[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    alignas(32) float l[8];
    _mm256_store_ps(l, lane[r]);
    const float dot = avx2_common::ReduceLanes(l);
    y[r0 + r] = kMin ? dot + m_sum[r] : dot;
  }
}

template <GgmlType kType>
void Run(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y) {
  int r = row_begin;
  for (; r + kRows <= row_end; r += kRows) Dots<kType, kRows>(W, r, x, y);
  for (; r < row_end; ++r) Dots<kType, 1>(W, r, x, y);
}

// Rows [row_begin, row_end) of a Q4_0, Q4_1, Q5_0, Q5_1 or Q8_0 matrix.
void RunAnyType(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y) {
  switch (W.type) {
    case GgmlType::Q4_0:
      return Run<GgmlType::Q4_0>(W, row_begin, row_end, x, y);
    case GgmlType::Q4_1:
      return Run<GgmlType::Q4_1>(W, row_begin, row_end, x, y);
    case GgmlType::Q5_0:
      return Run<GgmlType::Q5_0>(W, row_begin, row_end, x, y);
    case GgmlType::Q5_1:
      return Run<GgmlType::Q5_1>(W, row_begin, row_end, x, y);
    default:
      return Run<GgmlType::Q8_0>(W, row_begin, row_end, x, y);
  }
}
