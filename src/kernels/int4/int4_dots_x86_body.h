// The INT4 row dots' loop (int4_format.cpp's definition), written once and compiled by int4_avx2.cpp and
// int4_avx512.cpp, which differ only in how one group's nibbles become its weights. The including
// file defines PLUMB_BODY_TARGET (the function target: the loop must be compiled for the decoder's
// instruction set, or the decoder could not be inlined into it) and, in the namespace it includes this in,
// Int4RowParams<S>: Load(W, r, g8, groups, zero_row) reads the scales (and zero points) of groups
// g8 .. g8 + 7 of row r; Group(j) returns a Decoder for group j whose Decode(p) gives the 8 weights of the 4
// bytes at p, the definition's values (formats/int4.h). R rows at a time share each load of x; the products
// are added to each row's 8 lanes in column order (scalar::Dot's), and Finish adds the tail and reduces.
#if !defined(PLUMB_BODY_TARGET)
#error "define PLUMB_BODY_TARGET before including int4_dots_x86_body.h"
#endif

template <Int4Scheme S, int R>
PLUMB_BODY_TARGET void Int4Dots(const WeightMatrix& W, int r0, const float* x, float* y) {
  const int cols = W.cols;
  const int G = W.int4.group_size;
  const int groups = Int4Groups(cols, G);
  const std::size_t zero_row = Int4ZeroRowBytes(W.int4, cols);
  const int full = cols - cols % 8;
  const std::uint8_t* row[R];
  const std::size_t ahead = avx2_common::PrefetchAhead(R * W.row_bytes);
  __m256 acc[R];
  for (int r = 0; r < R; ++r) {
    row[r] = W.Row(r0 + r);
    acc[r] = _mm256_setzero_ps();
  }
  for (int g8 = 0; g8 * G < full; g8 += 8) {
    Int4RowParams<S> params[R];
    for (int r = 0; r < R; ++r) params[r].Load(W, r0 + r, g8, groups, zero_row);
    for (int j = 0; j < 8 && (g8 + j) * G < full; ++j) {
      typename Int4RowParams<S>::Decoder group[R];
      const int begin = (g8 + j) * G;
      for (int r = 0; r < R; ++r) {
        group[r] = params[r].Group(j);
        Prefetch(row[r], ahead + begin / 2);
      }
      const int end = begin + G < full ? begin + G : full;
      for (int c = begin; c < end; c += 8) {
        const __m256 xv = _mm256_loadu_ps(x + c);
        for (int r = 0; r < R; ++r) {
          acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(group[r].Decode(row[r] + c / 2), xv));
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    y[r0 + r] = Finish(acc[r], full, cols, x, [&](int c) { return Int4Weight(W, r0 + r, c); });
  }
}
