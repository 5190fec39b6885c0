// The fast family's F32, F16 and BF16 rows with AVX2 + F16C + FMA: kernels/simd/fma_dot.h's definition
// through fma_dots_x86.h's loop (which says why the bits match), with each format's exact decoder: F32 loaded
// as it is, F16 converted by F16C (exact; it differs from F16ToF32 only in quieting a signalling NaN's
// payload), BF16 widened into the top half of an FP32.
#include "ggml_kernels.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "../simd/fma_dots_x86.h"
#include "ggml_kernel_table.h"
#include "plumb/formats/dtype.h"

namespace plumb::kernels::ggml::avx2 {
namespace {

struct F32 : fma_x86::PlainDecoder {
  static constexpr std::size_t kBytesPer32 = 128;
  PLUMB_FMA static inline void Load32(const std::uint8_t* row, int c, __m256 w[4], State&) {
    const float* p = reinterpret_cast<const float*>(row) + c;
    for (int v = 0; v < 4; ++v) w[v] = _mm256_loadu_ps(p + 8 * v);
  }
  static float At(const std::uint8_t* row, int c) {
    float value;
    std::memcpy(&value, row + 4 * static_cast<std::size_t>(c), sizeof(value));
    return value;
  }
};

struct F16 : fma_x86::PlainDecoder {
  static constexpr std::size_t kBytesPer32 = 64;
  PLUMB_FMA static inline void Load32(const std::uint8_t* row, int c, __m256 w[4], State&) {
    const std::uint8_t* p = row + 2 * static_cast<std::size_t>(c);
    for (int v = 0; v < 4; ++v)
      w[v] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * v)));
  }
  static float At(const std::uint8_t* row, int c) {
    return F16ToF32(ReadU16(row + 2 * static_cast<std::size_t>(c)));
  }
};

struct BF16 : fma_x86::PlainDecoder {
  static constexpr std::size_t kBytesPer32 = 64;
  PLUMB_FMA static inline void Load32(const std::uint8_t* row, int c, __m256 w[4], State&) {
    const std::uint8_t* p = row + 2 * static_cast<std::size_t>(c);
    for (int v = 0; v < 4; ++v) {
      const __m256i wide =
          _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * v)));
      w[v] = _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
    }
  }
  static float At(const std::uint8_t* row, int c) {
    return BF16ToF32(ReadU16(row + 2 * static_cast<std::size_t>(c)));
  }
};

}  // namespace

// The table's AVX2 column of FMA row dots (AVX-512 runs them too, by the fallback).
void FillFma(GgmlKernelTable& table) {
  table.At(GgmlType::F32, Isa::kAvx2).fma_row_dots = fma_x86::FmaRowDots<F32>;
  table.At(GgmlType::F16, Isa::kAvx2).fma_row_dots = fma_x86::FmaRowDots<F16>;
  table.At(GgmlType::BF16, Isa::kAvx2).fma_row_dots = fma_x86::FmaRowDots<BF16>;
}

}  // namespace plumb::kernels::ggml::avx2

#endif  // defined(__x86_64__)
