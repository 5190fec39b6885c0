// The fast family's INT4 row dots' loop (int4_int8.cpp's definition), written once and compiled twice by
// int4_int8_x86.cpp: for AVX2 + FMA and for AVX-512 VNNI, which differ only in AddPartials(acc, u, q): acc
// plus, in int32 lane j, the products of the unsigned bytes u and the signed bytes q at 4j .. 4j + 3
// (int8_sums_x86.h). The including file defines PLUMB_BODY_TARGET (the function target, so that AddPartials
// inlines into the loop) and AddPartials, in the namespace it includes this in.
#if !defined(PLUMB_BODY_TARGET)
#error "define PLUMB_BODY_TARGET before including int4_int8_x86_body.h"
#endif

// x's 32 codes of block b in the order of a block's nibbles: the even columns, then the odd ones.
PLUMB_BODY_TARGET inline __m256i EvenThenOdd(const std::int8_t* q) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
  // Within each 16-byte half: its 8 even bytes, then its 8 odd ones; then the quarters (even 0-15, odd
  // 0-15, even 16-31, odd 16-31) reordered to even 0-15, even 16-31, odd 0-15, odd 16-31.
  const __m256i halves =
      _mm256_shuffle_epi8(v, _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4,
                                              6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
  return _mm256_permute4x64_epi64(halves, 0xD8);
}

// A block's 32 nibbles (16 bytes at p): the low ones in bytes 0-15, the high ones in bytes 16-31.
PLUMB_BODY_TARGET inline __m256i Nibbles(const std::uint8_t* p) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(bytes, 4), bytes);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

template <Int4Scheme S, int R>
PLUMB_BODY_TARGET void Dots(const WeightMatrix& W, int r0, const Int8Activations& x, float* y) {
  const int G = W.int4.group_size;
  const int groups = Int4Groups(W.cols, G);
  const int blocks = W.cols / 32;
  const std::size_t zero_row = Int4ZeroRowBytes(W.int4, W.cols);
  const std::uint8_t* codes[R];
  const std::size_t ahead = avx2_common::PrefetchAhead(R * W.row_bytes);
  const std::uint16_t* scales[R];
  const std::uint8_t* zeros[R];
  __m256 lane[R];
  float z_sum[R];
  for (int r = 0; r < R; ++r) {
    codes[r] = W.Row(r0 + r);
    scales[r] = W.int4_scales + Extent(r0 + r, groups);
    zeros[r] = W.int4_zeros == nullptr ? nullptr : W.int4_zeros + Extent(r0 + r, zero_row);
    lane[r] = _mm256_setzero_ps();
    z_sum[r] = 0.0f;
  }
  for (int g = 0; g < groups; ++g) {
    float s[R];
    __m256i zero[R];  // asym: the zero nibble in every byte
    float sz[R];      // asym-f16zero: s·z
    for (int r = 0; r < R; ++r) {
      s[r] = _cvtsh_ss(scales[r][g]);
      if constexpr (S == Int4Scheme::kAsymmetric) {
        zero[r] = _mm256_set1_epi8(static_cast<char>(Int4Code(zeros[r], g)));
      } else if constexpr (S == Int4Scheme::kAsymmetricF16Zero) {
        sz[r] = s[r] * _cvtsh_ss(avx2_common::ReadU16(zeros[r] + Extent(g, 2)));
      }
    }
    const int b_end = (g + 1) * G / 32 < blocks ? (g + 1) * G / 32 : blocks;
    for (int b = g * G / 32; b < b_end; ++b) {
      const __m256i q = EvenThenOdd(x.q.data() + Extent(b, 32));
      const float d_x = x.d[b];
      __m256i init = _mm256_setzero_si256();
      if constexpr (S == Int4Scheme::kSymmetric) {
        // −8·Σ q per lane: u = c + 8 overcounts each lane by 8 times its four codes of x.
        init = _mm256_sub_epi32(init, _mm256_slli_epi32(AddPartials(init, _mm256_set1_epi8(1), q), 3));
      }
      for (int r = 0; r < R; ++r) {
        const std::uint8_t* block = codes[r] + Extent(b, 16);
        if (b % 4 == 0) avx2_common::Prefetch(block, ahead);
        const __m256i nibbles = Nibbles(block);
        __m256i p;
        if constexpr (S == Int4Scheme::kSymmetric) {
          p = AddPartials(init, _mm256_xor_si256(nibbles, _mm256_set1_epi8(8)), q);
        } else if constexpr (S == Int4Scheme::kAsymmetric) {
          const int8_sums::SignMoved m = int8_sums::MoveSign(_mm256_sub_epi8(nibbles, zero[r]), q);
          p = AddPartials(init, m.u, m.q);
        } else {
          p = AddPartials(init, nibbles, q);
        }
        lane[r] = _mm256_fmadd_ps(_mm256_set1_ps(s[r] * d_x), _mm256_cvtepi32_ps(p), lane[r]);
        if constexpr (S == Int4Scheme::kAsymmetricF16Zero) z_sum[r] = __builtin_fmaf(sz[r], x.s[b], z_sum[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    alignas(32) float l[8];
    _mm256_store_ps(l, lane[r]);
    const float dot = avx2_common::ReduceLanes(l);
    y[r0 + r] = S == Int4Scheme::kAsymmetricF16Zero ? dot - z_sum[r] : dot;
  }
}

// Rows [row_begin, row_end) of an INT4 matrix with whole 32-column blocks.
inline void RunAnyScheme(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x,
                         float* y) {
  WithScheme(W.int4.scheme, [&](auto scheme) {
    constexpr Int4Scheme S = decltype(scheme)::value;
    int r = row_begin;
    for (; r + kRows <= row_end; r += kRows) Dots<S, kRows>(W, r, x, y);
    for (; r < row_end; ++r) Dots<S, 1>(W, r, x, y);
  });
}
