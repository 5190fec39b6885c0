// The fast family's float row dots with AVX2 + FMA (fma_dot.h's definition), written once for every float
// weight format: ggml/float_fma_x86.cpp (F32, F16, BF16) and fp8/fp8_fma_x86.cpp instantiate FmaRowDots with
// their decoder. Internal to src/kernels/; x86-64 only.
//
// Why the bits match the definition: a row's 32 lanes are four __m256 accumulators (columns c + 0..7,
// c + 8..15, c + 16..23, c + 24..31 of each 32-column step, c a multiple of 32, so column i is in lane
// i mod 32); each step is one _mm256_fmadd_ps (fused, one rounding); the row's last cols mod 32 columns are
// decoded into a zeroed 32-float buffer and dotted with x's tail in another, which is the definition's zero
// padding done as one more vector step; the reduction adds the accumulators 0 + 2 and 1 + 3 (lanes j and
// j + 16), then those two (j and j + 8), then the upper 128 bits onto the lower (j + 4), then j + 2 and j +
// 1, the definition's halving. The decoders' values are exact, as the definition's are.
#pragma once

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>

#include "avx2_common.h"
#include "fma_dot.h"
#include "plumb/kernels/weight_matrix.h"

// F16C for the FP16 and FP8 decoders, FMA for the sums. Reached only where IsaSupported(kAvx2), which
// includes FMA (kernels/isa.h).
#define PLUMB_FMA __attribute__((target("avx2,f16c,fma")))

namespace plumb::kernels::fma_x86 {

// lane[0] of the definition's halving reduction of the 32 lanes held in acc[0..4).
PLUMB_FMA inline float Reduce(const __m256 acc[4]) {
  const __m256 s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3]));
  const __m128 q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  const __m128 d = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(d, _mm_shuffle_ps(d, d, 1)));
}

// Rows [r0, r0 + R) of W: y[r] = FmaDot(row r, x) finished by the decoder (FP8's row scale). Decoder (a
// struct of static members, force-inlined into this target) gives:
//   X(p)                      8 elements of x as the products want them: loaded, or times an exact factor
//                             (2^8 for FP8 E4M3) that Load32's weights carry the inverse of
//   Load32(row, c, w[4], s)   the weights of columns [c, c + 32) of the row stored at `row`, such that each
//                             product w·X(x) is the same real number as the definition's weight times x
//                             (so the fused sum rounds the same); s is the row's State, which may note what
//                             the weights cannot carry (FP8 E4M3's NaN codes)
//   At(row, c)                the exact weight of column c (the tail, dotted with x itself)
//   Start(s)                  a row's State before its first column
//   Finish(W, r, dot, s)      y[r] from the row's finished dot (the NaN noted in s; the row scale)
//   kBytesPer32               the bytes 32 columns take (for the prefetch)
// R rows share each load of x; each row has its own four chains.
template <class Decoder, int R>
PLUMB_FMA void FmaRows(const WeightMatrix& W, int r0, const float* x, float* y) {
  const int cols = W.cols;
  const int full = cols - cols % kFmaLanes;
  const std::uint8_t* row[R];
  const std::size_t ahead = avx2_common::PrefetchAhead(R * W.row_bytes);
  typename Decoder::State state[R];
  __m256 acc[R][4];
  for (int r = 0; r < R; ++r) {
    row[r] = W.Row(r0 + r);
    Decoder::Start(state[r]);
    for (int v = 0; v < 4; ++v) acc[r][v] = _mm256_setzero_ps();
  }
  for (int c = 0; c < full; c += kFmaLanes) {
    __m256 xv[4];
    for (int v = 0; v < 4; ++v) xv[v] = Decoder::X(x + c + 8 * v);
    for (int r = 0; r < R; ++r) {
      // The rows the next pass reads, at this column (avx2_common::Prefetch says why).
      const std::size_t at = ahead + static_cast<std::size_t>(c / kFmaLanes) * Decoder::kBytesPer32;
      for (std::size_t o = 0; o < Decoder::kBytesPer32; o += 64) avx2_common::Prefetch(row[r], at + o);
      __m256 w[4];
      Decoder::Load32(row[r], c, w, state[r]);
      for (int v = 0; v < 4; ++v) acc[r][v] = _mm256_fmadd_ps(w[v], xv[v], acc[r][v]);
    }
  }
  if (full < cols) {  // the definition's zero padding, as one more step
    alignas(32) float xt[kFmaLanes] = {};
    for (int c = full; c < cols; ++c) xt[c - full] = x[c];
    for (int r = 0; r < R; ++r) {
      alignas(32) float wt[kFmaLanes] = {};
      for (int c = full; c < cols; ++c) wt[c - full] = Decoder::At(row[r], c);
      for (int v = 0; v < 4; ++v) {
        acc[r][v] = _mm256_fmadd_ps(_mm256_load_ps(wt + 8 * v), _mm256_load_ps(xt + 8 * v), acc[r][v]);
      }
    }
  }
  for (int r = 0; r < R; ++r) y[r0 + r] = Decoder::Finish(W, r0 + r, Reduce(acc[r]), state[r]);
}

// The Decoder members of a format whose weights are their values: x as it is, no state, the dot as it is.
struct PlainDecoder {
  struct State {};
  PLUMB_FMA static inline __m256 X(const float* p) { return _mm256_loadu_ps(p); }
  static void Start(State&) {}
  static float Finish(const WeightMatrix&, int, float dot, const State&) { return dot; }
};

// Rows [row_begin, row_end) of W, four at a time, then one at a time.
template <class Decoder>
PLUMB_FMA void FmaRowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  constexpr int kRows = 4;
  int r = row_begin;
  for (; r + kRows <= row_end; r += kRows) FmaRows<Decoder, kRows>(W, r, x, y);
  for (; r < row_end; ++r) FmaRows<Decoder, 1>(W, r, x, y);
}

}  // namespace plumb::kernels::fma_x86

#endif  // defined(__x86_64__)
