// The FP8 row dots' loop (fp8_format.cpp's definition), written once and compiled by fp8_avx2.cpp and
// fp8_avx512.cpp, which differ only in how 32 codes become their weights. The including file defines
// PLUMB_BODY_TARGET (the function target: the loop must be compiled for the decoder's instruction set, or the
// decoder could not be inlined into it) and, in the namespace it includes this in,
// Fp8Weights32<F>(p, nan, w): the 32 codes at p as four vectors of weights in column order (E5M2 their
// values; E4M3 their values · 2^-8, its NaN codes read as finite and noted in `nan`).
//
// kScaleX: E4M3 with x pre-multiplied by 2^8 (exact when CanScaleX says so: h·(2^8·x) and (2^8·h)·x are the
// same real number); otherwise E4M3 weights are multiplied by 2^8 themselves. E5M2 ignores it.
//
// E4M3 NaN codes: the definition's dot of a row holding one is NaN whatever x is (NaN · x is NaN, and a NaN
// lane makes the sum NaN). So the vector loop decodes them as finite values, notes per row whether it met
// one (E4M3NanTracker, cheaper than patching each decoded weight), and the row's result is then NaN.
// Columns past the last multiple of 32 go through the decode table, which has the NaNs (Fp8Finish).
//
// R rows at a time share each load of x; the products are added to each row's 8 lanes in column order
// (scalar::Dot's), and Fp8Finish adds the tail, reduces and applies the scale.
#if !defined(PLUMB_BODY_TARGET)
#error "define PLUMB_BODY_TARGET before including fp8_dots_x86_body.h"
#endif

template <Fp8Format F, bool kScaleX, int R>
PLUMB_BODY_TARGET void Fp8Dots(const WeightMatrix& W, int r0, const float* x, float* y) {
  constexpr bool kE4M3 = F == Fp8Format::kE4M3;
  const int cols = W.cols;
  const __m256 two8 = _mm256_set1_ps(256.0f);
  const std::uint8_t* row[R];
  const std::size_t ahead = avx2_common::PrefetchAhead(R * W.row_bytes);
  __m256 acc[R];
  avx2_shared::E4M3NanTracker nan[R];
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
      if constexpr (kE4M3 && kScaleX) xv[v] = _mm256_mul_ps(xv[v], two8);
    }
    for (int r = 0; r < R; ++r) {
      if (c % 64 == 0) avx2_common::Prefetch(row[r], ahead + c);
      __m256 w[4];
      Fp8Weights32<F>(row[r] + c, nan[r], w);
      for (int v = 0; v < 4; ++v) {
        if constexpr (kE4M3 && !kScaleX) w[v] = _mm256_mul_ps(w[v], two8);
        acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(w[v], xv[v]));
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    const bool has_nan = kE4M3 && nan[r].Any();
    y[r0 + r] = avx2_shared::Fp8Finish(W, F, r0 + r, acc[r], full32, has_nan, x);
  }
}
