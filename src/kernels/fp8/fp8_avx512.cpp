// The FP8 E4M3 row dots with AVX-512 (F, BW, VL) and GFNI: the definition (fp8_format.cpp), eight lanes at
// a time, like the AVX2 variant (fp8_avx2.cpp), but with fewer instructions per weight.
//
// AVX2 makes each code's FP16 S.0EEEE.MMM0000000 (the value · 2^-8) by sign-extending the bytes to 16 bits,
// shifting and masking, 16 codes at a time, and then extracting the upper 8. Here two GF(2) affine byte
// maps (vgf2p8affineqb: each output bit the parity of chosen input bits, i.e. any bit permutation) make the
// high bytes S0EEEEMM and the low bytes M0000000 of 32 codes, and two byte interleaves pair them into FP16:
// 6 ops per 32 codes instead of 8; NaN codes are noted as AVX2 does (E4M3NanTracker). The rest (the 2^8 on
// x, the F16C conversion, tail, reduction and scale) is AVX2's, so the bits are the definition's: the
// vectors are 256-bit, and each product and add is _mm256_mul_ps then _mm256_add_ps (no FMA, the build has
// -ffp-contract=off and the target leaves "fma" out).
//
// E5M2 (already a shift from FP16) and CPUs without GFNI (Skylake-X has AVX-512 without it) run AVX2's.
#include "fp8_kernels.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>

#include "../simd/avx2_common.h"
#include "fp8_avx2.h"
#include "plumb/kernels/isa.h"

namespace plumb::kernels::fp8::avx512 {
namespace {

using avx2_shared::CanScaleX;

// Rows computed together: one row's adds are a single dependency chain, so rows in flight keep the adders
// busy.
constexpr int kRows = 4;

#define PLUMB_AVX512_GFNI __attribute__((target("avx2,f16c,avx512f,avx512bw,avx512vl,gfni")))

// vgf2p8affineqb's matrix: byte 7 − i of the qword selects the input bits whose parity is output bit i.
// High byte of the FP16: bit 7 = code bit 7 (S), bit 6 = 0, bits 5..0 = code bits 6..1 (EEEE, MM).
constexpr long long kHighByte = 0x0204081020400080;
// Low byte: bit 7 = code bit 0 (the last M), bits 6..0 = 0.
constexpr long long kLowByte = 0x0000000000000001;

// The 32 codes at p as weights, for fp8_dots_x86_body.h: E4M3 only, as FP16 by two byte maps.
template <Fp8Format F>
PLUMB_AVX512_GFNI inline void Fp8Weights32(const std::uint8_t* p, avx2_shared::E4M3NanTracker& nan,
                                           __m256 w[4]) {
  static_assert(F == Fp8Format::kE4M3, "E5M2 runs the AVX2 kernel");
  const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  nan.Add(codes);
  const __m256i hi = _mm256_gf2p8affine_epi64_epi8(codes, _mm256_set1_epi64x(kHighByte), 0);
  const __m256i lo = _mm256_gf2p8affine_epi64_epi8(codes, _mm256_set1_epi64x(kLowByte), 0);
  // Interleaves work within 128-bit halves: h0 holds codes 0-7 and 16-23, h1 codes 8-15 and 24-31.
  const __m256i h0 = _mm256_unpacklo_epi8(lo, hi), h1 = _mm256_unpackhi_epi8(lo, hi);
  w[0] = _mm256_cvtph_ps(_mm256_castsi256_si128(h0));
  w[1] = _mm256_cvtph_ps(_mm256_castsi256_si128(h1));
  w[2] = _mm256_cvtph_ps(_mm256_extracti128_si256(h0, 1));
  w[3] = _mm256_cvtph_ps(_mm256_extracti128_si256(h1, 1));
}

#define PLUMB_BODY_TARGET PLUMB_AVX512_GFNI
#include "fp8_dots_x86_body.h"
#undef PLUMB_BODY_TARGET

template <bool kScaleX>
void RunE4M3(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  avx2_common::RunRowBlocks<kRows>(Fp8Dots<Fp8Format::kE4M3, kScaleX, kRows>,
                                   Fp8Dots<Fp8Format::kE4M3, kScaleX, 1>, W, row_begin, row_end, x, y);
}

}  // namespace

void RowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  if (W.fp8_format != Fp8Format::kE4M3 || !HasGfni()) return avx2::RowDots(W, row_begin, row_end, x, y);
  if (CanScaleX(x, W.cols)) return RunE4M3<true>(W, row_begin, row_end, x, y);
  return RunE4M3<false>(W, row_begin, row_end, x, y);
}

}  // namespace plumb::kernels::fp8::avx512

#endif  // defined(__x86_64__)
