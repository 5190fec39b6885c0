// DecodeKvRow with AVX2 and F16C, eight elements at a time (kernels/kv_decode.h gives the definition).
//
// How each dtype becomes the definition's bits (docs/formats.md, "FP16 (IEEE binary16)", "BF16", "FP8"):
//   f16       vcvtph2ps, except NaN lanes: the instruction sets the quiet bit of a signalling NaN, the
//             definition (F16ToF32) keeps the payload as it is: sign | exponent all ones | mantissa << 13.
//   bf16      the 16 bits moved to the top of the word.
//   fp8-e5m2  an E5M2 code is the top byte of the FP16 with the same value, so code << 8 goes through
//             vcvtph2ps; NaN lanes become ±0x7FC00000 (Fp8ToF32's quiet NaN of the code's sign).
//   fp8-e4m3  sixteen at a time as FP16 values 2^-8 times theirs (E4M3AsF16: three integer operations
//             and a NaN patch per sixteen), through vcvtph2ps, then one multiply by 2^8 · scale: the exact
//             value times the scale, rounded once, as DecodeKv rounds it. Where 2^8 · scale would not be
//             exact (|scale| > 2^119) and for the last n mod 16 elements, E4M3Lanes builds the FP32 value
//             from the bits: the exponent rebased by an integer add, a subnormal code as int-to-float(m) ·
//             2^-9. Neither route makes an FP32 subnormal, so denormals-are-zero cannot change a bit
//             (vcvtph2ps converts FP16 subnormals whatever MXCSR says; the tests run under DAZ too).
// FP8 values are multiplied by the scale, one FP32 multiply as DecodeKv does. A tail of n mod 8 elements
// goes to DecodeKv itself.
#include "plumb/kernels/kv_decode.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>

#include "../simd/avx2_common.h"

namespace plumb::kernels::avx2 {
namespace {

// The definition's FP32 values of eight FP16 codes.
PLUMB_AVX2 __m256 F16Lanes(__m128i codes) {
  const __m256 converted = _mm256_cvtph_ps(codes);
  const __m256i x = _mm256_cvtepu16_epi32(codes);
  const __m256i magnitude = _mm256_and_si256(x, _mm256_set1_epi32(0x7FFF));
  const __m256i nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7C00));
  const __m256i kept =
      _mm256_or_si256(_mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x8000)), 16),
                                      _mm256_set1_epi32(0x7F800000)),
                      _mm256_slli_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x3FF)), 13));
  return _mm256_blendv_ps(converted, _mm256_castsi256_ps(kept), _mm256_castsi256_ps(nan));
}

// ±0x7FC00000 where `nan`, `value` elsewhere; the sign is bit 7 of the FP8 code in `codes`' 32-bit lanes.
PLUMB_AVX2 __m256 Fp8Nan(__m256 value, __m256i codes, __m256i nan) {
  const __m256i quiet = _mm256_or_si256(
      _mm256_slli_epi32(_mm256_and_si256(codes, _mm256_set1_epi32(0x80)), 24), _mm256_set1_epi32(0x7FC00000));
  return _mm256_blendv_ps(value, _mm256_castsi256_ps(quiet), _mm256_castsi256_ps(nan));
}

// The definition's FP32 values (before the scale) of eight E5M2 codes (bytes).
PLUMB_AVX2 __m256 E5M2Lanes(__m128i bytes) {
  const __m256 converted = _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(bytes), 8));
  const __m256i x = _mm256_cvtepu8_epi32(bytes);
  const __m256i nan =
      _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7F)), _mm256_set1_epi32(0x7C));
  return Fp8Nan(converted, x, nan);
}

// The same for E4M3 codes: S.EEEE.MMM, bias 7.
PLUMB_AVX2 __m256 E4M3Lanes(__m128i bytes) {
  const __m256i x = _mm256_cvtepu8_epi32(bytes);
  const __m256i em = _mm256_and_si256(x, _mm256_set1_epi32(0x7F));
  // Normal: exponent and mantissa shifted into FP32's fields (3 mantissa bits at the top), bias 7 -> 127.
  const __m256i normal = _mm256_add_epi32(_mm256_slli_epi32(em, 20), _mm256_set1_epi32((127 - 7) << 23));
  // Subnormal (em < 8, em is the mantissa): m · 2^(1 − 7 − 3).
  const __m256 subnormal = _mm256_mul_ps(_mm256_cvtepi32_ps(em), _mm256_set1_ps(0x1p-9f));
  const __m256i is_subnormal = _mm256_cmpgt_epi32(_mm256_set1_epi32(8), em);
  const __m256 magnitude =
      _mm256_blendv_ps(_mm256_castsi256_ps(normal), subnormal, _mm256_castsi256_ps(is_subnormal));
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x80)), 24);
  const __m256 value = _mm256_or_ps(magnitude, _mm256_castsi256_ps(sign));
  return Fp8Nan(value, x, _mm256_cmpeq_epi32(em, _mm256_set1_epi32(0x7F)));
}

// Sixteen E4M3 codes as FP16 values 2^-8 times theirs, exactly: E4M3's exponent field (bias 7) placed in
// FP16's (bias 15) and its 3 mantissa bits at the top of FP16's 10, so a normal code keeps its exponent field
// and a subnormal code (E = 0) becomes the FP16 subnormal of the same mantissa; NaN codes (S.1111.111)
// become FP16's quiet NaN 0x7E00 of their sign, which vcvtph2ps turns into Fp8ToF32's ±0x7FC00000.
PLUMB_AVX2 __m256i E4M3AsF16(__m128i bytes) {
  const __m256i shifted = _mm256_slli_epi16(_mm256_cvtepu8_epi16(bytes), 7);  // S at bit 14, E.M at 13..7
  // Adding bit 14 to itself moves S to bit 15.
  __m256i half = _mm256_add_epi16(shifted, _mm256_and_si256(shifted, _mm256_set1_epi16(0x4000)));
  const __m256i nan =
      _mm256_cmpeq_epi16(_mm256_and_si256(half, _mm256_set1_epi16(0x7FFF)), _mm256_set1_epi16(0x3F80));
  return _mm256_xor_si256(half, _mm256_and_si256(nan, _mm256_set1_epi16(0x3F80 ^ 0x7E00)));
}

}  // namespace

PLUMB_AVX2 void DecodeKvRow(KvDtype dtype, const void* src, int n, float scale, float* dst) {
  const auto* in = static_cast<const std::uint8_t*>(src);
  const int whole = dtype == KvDtype::kF32 ? 0 : n / 8 * 8;  // f32: all of it to DecodeKv's memcpy
  switch (dtype) {
    case KvDtype::kF32:
      break;
    case KvDtype::kF16:
      for (int i = 0; i < whole; i += 8) {
        const __m128i codes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i));
        _mm256_storeu_ps(dst + i, F16Lanes(codes));
      }
      break;
    case KvDtype::kBF16:
      for (int i = 0; i < whole; i += 8) {
        const __m128i codes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(codes), 16)));
      }
      break;
    case KvDtype::kFp8E4M3:
    case KvDtype::kFp8E5M2: {
      const __m256 scale8 = _mm256_set1_ps(scale);
      const bool e4m3 = dtype == KvDtype::kFp8E4M3;
      int i = 0;
      // E4M3, sixteen at a time through FP16 (E4M3AsF16), the factor 2^8 folded into the scale: the exact
      // value · scale rounded once, as the definition, wherever 2^8 · scale is exact (|scale| <= 2^119).
      // About half the instructions of E4M3Lanes, which the FP8 cache's decode was bound by.
      const float magnitude = scale < 0 ? -scale : scale;
      if (e4m3 && magnitude <= 0x1p119f) {
        const __m256 rescaled = _mm256_set1_ps(scale * 0x1p8f);
        for (; i + 16 <= whole; i += 16) {
          const __m256i halves = E4M3AsF16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
          _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(halves)), rescaled));
          _mm256_storeu_ps(dst + i + 8,
                           _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(halves, 1)), rescaled));
        }
      }
      for (; i < whole; i += 8) {
        const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + i));
        _mm256_storeu_ps(dst + i, _mm256_mul_ps(e4m3 ? E4M3Lanes(bytes) : E5M2Lanes(bytes), scale8));
      }
      break;
    }
  }
  if (whole == n) return;
  DecodeKv(dtype, in + whole * static_cast<int>(KvDtypeBytes(dtype)), n - whole, scale, dst + whole);
}

}  // namespace plumb::kernels::avx2

#endif
