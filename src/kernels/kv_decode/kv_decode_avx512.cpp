// DecodeKvRow with AVX-512 (F, BW, VL): f16 sixteen and fp8-e4m3 thirty-two elements per step, the AVX2
// variant's arithmetic (kv_decode_avx2.cpp) on wider registers; the other dtypes, scales beyond 2^119 and
// the last elements go to the AVX2 variant. Attention decodes every key and value of an f16 or FP8 cache
// through this, a row of head_dim elements at a time.
//   f16       vcvtph2ps, and where a lane holds a NaN (rare: one test per sixteen) the definition's bits
//             sign | 0x7F800000 | mantissa << 13 in its place (the instruction quiets a signalling NaN).
//   fp8-e4m3  as FP16 values 2^-8 times theirs: the code sign-extended to 16 bits, shifted left by 7
//             (sign at bits 15 and 14, E.M at 13..7) and bit 14 cleared; NaN codes (S.1111.111) become
//             FP16's quiet NaN 0x7E00 of their sign. Then vcvtph2ps and one multiply by 2^8 · scale: the
//             exact value times the scale rounded once, as DecodeKv (exact 2^8 · scale: |scale| <= 2^119).
// GCC 12 reports the "undefined" pass-through operand of the 512-bit intrinsics (immintrin.h's
// _mm512_undefined_*) as uninitialised when they are inlined into a target-attribute function; the warning
// is about the header's idiom, not this code, so it is off for this file (before the first include of it).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "plumb/kernels/kv_decode.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>

#include "../simd/avx2_common.h"

namespace plumb::kernels::avx512 {

namespace {

// The E4M3 conversion of 32 codes at `in` into 32 floats at `out` (the header comment's steps); rescaled =
// 2^8 · scale.
PLUMB_AVX512 inline void E4M3ThirtyTwo(const std::uint8_t* in, __m512 rescaled, float* out) {
  const __m512i wide = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in)));
  __m512i half = _mm512_and_si512(_mm512_slli_epi16(wide, 7), _mm512_set1_epi16(static_cast<short>(0xBF80)));
  const __mmask32 nan =
      _mm512_cmpeq_epi16_mask(_mm512_and_si512(half, _mm512_set1_epi16(0x7FFF)), _mm512_set1_epi16(0x3F80));
  if (nan != 0) {
    half = _mm512_mask_mov_epi16(
        half, nan, _mm512_xor_si512(half, _mm512_set1_epi16(static_cast<short>(0x3F80 ^ 0x7E00))));
  }
  _mm512_storeu_ps(out, _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(half)), rescaled));
  _mm512_storeu_ps(out + 16, _mm512_mul_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(half, 1)), rescaled));
}

// The f16 conversion of 16 codes at `in` into 16 floats at `out`.
PLUMB_AVX512 inline void F16Sixteen(const std::uint8_t* in, float* out) {
  const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in));
  __m512 value = _mm512_cvtph_ps(codes);
  const __m512i x = _mm512_cvtepu16_epi32(codes);
  const __mmask16 nan =
      _mm512_cmpgt_epi32_mask(_mm512_and_si512(x, _mm512_set1_epi32(0x7FFF)), _mm512_set1_epi32(0x7C00));
  if (nan != 0) {
    const __m512i kept =
        _mm512_or_si512(_mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(x, _mm512_set1_epi32(0x8000)), 16),
                                        _mm512_set1_epi32(0x7F800000)),
                        _mm512_slli_epi32(_mm512_and_si512(x, _mm512_set1_epi32(0x3FF)), 13));
    value = _mm512_mask_mov_ps(value, nan, _mm512_castsi512_ps(kept));
  }
  _mm512_storeu_ps(out, value);
}

// Whether E4M3 may take E4M3ThirtyTwo at this scale: 2^8 · scale exact (|scale| <= 2^119).
bool E4M3Rescalable(float scale) {
  return (scale < 0 ? -scale : scale) <= 0x1p119f;
}

}  // namespace

PLUMB_AVX512 void DecodeKvRow(KvDtype dtype, const void* src, int n, float scale, float* dst) {
  const auto* in = static_cast<const std::uint8_t*>(src);
  int i = 0;
  if (dtype == KvDtype::kFp8E4M3 && E4M3Rescalable(scale)) {
    const __m512 rescaled = _mm512_set1_ps(scale * 0x1p8f);
    for (; i + 32 <= n; i += 32) E4M3ThirtyTwo(in + i, rescaled, dst + i);
  } else if (dtype == KvDtype::kF16) {
    for (; i + 16 <= n; i += 16) F16Sixteen(in + 2 * i, dst + i);
  }
  if (i < n) {
    avx2::DecodeKvRow(dtype, in + i * static_cast<int>(KvDtypeBytes(dtype)), n - i, scale, dst + i);
  }
}

PLUMB_AVX512 void DecodeKvRows(KvDtype dtype, const void* src, std::size_t src_stride, int count, int n,
                               float scale, float* dst) {
  const auto* rows = static_cast<const std::uint8_t*>(src);
  if (dtype == KvDtype::kFp8E4M3 && n % 32 == 0 && E4M3Rescalable(scale)) {
    const __m512 rescaled = _mm512_set1_ps(scale * 0x1p8f);
    for (int r = 0; r < count; ++r, rows += src_stride, dst += n) {
      for (int i = 0; i < n; i += 32) E4M3ThirtyTwo(rows + i, rescaled, dst + i);
    }
  } else if (dtype == KvDtype::kF16 && n % 16 == 0) {
    for (int r = 0; r < count; ++r, rows += src_stride, dst += n) {
      for (int i = 0; i < n; i += 16) F16Sixteen(rows + 2 * i, dst + i);
    }
  } else {
    for (int r = 0; r < count; ++r, rows += src_stride, dst += n) DecodeKvRow(dtype, rows, n, scale, dst);
  }
}

}  // namespace plumb::kernels::avx512

#endif
