// The fast family's FP8 rows with AVX2 + F16C + FMA: fp8_format.cpp's FMA definition through
// fma_dots_x86.h's loop (which says why the bits match). Two ways to the weights:
//   Exact<F>: each code's exact value (Fp8Exact16, fp8_avx2.h), NaNs included, x as it is. E5M2 always (its
//             codes are FP16's top byte, so the value costs nothing), E4M3 when x cannot be scaled.
//   E4M3ScaledX: the code's value · 2^-8 as F16C gives it, against 2^8·x: the same real product, so the
//             same fused sum, whenever 2^8·x is exact (CanScaleX: no finite |x| ≥ 2^120). That spares a
//             multiply and a NaN patch per 8 weights, as the exact family's E4M3 kernel does; the NaN codes
//             (read as finite) are noted per row by E4M3NanTracker instead, and such a row's dot is NaN, as
//             the definition's is (a NaN weight makes its lane's chain NaN whatever x is).
#include "fp8_kernels.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>

#include "../simd/fma_dots_x86.h"
#include "fp8_avx2.h"

namespace plumb::kernels::fp8::avx2 {
namespace {

float RowScale(const WeightMatrix& W, int r) {
  return W.fp8_scales[W.fp8_per_row ? r : 0];
}

template <Fp8Format F>
struct Exact : fma_x86::PlainDecoder {
  static constexpr std::size_t kBytesPer32 = 32;
  PLUMB_FMA static inline void Load32(const std::uint8_t* row, int c, __m256 w[4], State&) {
    avx2_shared::Fp8Exact16<F>(row + c, w);
    avx2_shared::Fp8Exact16<F>(row + c + 16, w + 2);
  }
  static float At(const std::uint8_t* row, int c) { return Fp8DecodeTable(F)[row[c]]; }
  static float Finish(const WeightMatrix& W, int r, float dot, const State&) { return RowScale(W, r) * dot; }
};

struct E4M3ScaledX {
  using State = avx2_shared::E4M3NanTracker;
  static constexpr std::size_t kBytesPer32 = 32;
  PLUMB_FMA static inline __m256 X(const float* p) {
    return _mm256_mul_ps(_mm256_loadu_ps(p), _mm256_set1_ps(256.0f));
  }
  PLUMB_FMA static void Start(State& nan) { nan.Reset(); }
  PLUMB_FMA static inline void Load32(const std::uint8_t* row, int c, __m256 w[4], State& nan) {
    nan.Add(row + c);
    for (int h = 0; h < 2; ++h) {
      const avx2_shared::Halves half = avx2_shared::Fp8ToHalf<Fp8Format::kE4M3>(row + c + 16 * h);
      w[2 * h] = _mm256_cvtph_ps(half.lo);
      w[2 * h + 1] = _mm256_cvtph_ps(half.hi);
    }
  }
  static float At(const std::uint8_t* row, int c) { return Fp8DecodeTable(Fp8Format::kE4M3)[row[c]]; }
  PLUMB_FMA static float Finish(const WeightMatrix& W, int r, float dot, const State& nan) {
    return RowScale(W, r) * (nan.Any() ? Fp8DecodeTable(Fp8Format::kE4M3)[0x7F] : dot);
  }
};

}  // namespace

void FmaRowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  if (W.fp8_format == Fp8Format::kE5M2) {
    return fma_x86::FmaRowDots<Exact<Fp8Format::kE5M2>>(W, row_begin, row_end, x, y);
  }
  if (avx2_shared::CanScaleX(x, W.cols)) return fma_x86::FmaRowDots<E4M3ScaledX>(W, row_begin, row_end, x, y);
  return fma_x86::FmaRowDots<Exact<Fp8Format::kE4M3>>(W, row_begin, row_end, x, y);
}

}  // namespace plumb::kernels::fp8::avx2

#endif  // defined(__x86_64__)
