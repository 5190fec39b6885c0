// The fast family's GGUF row dots with AVX-512 VNNI: ggml_int8.cpp's definition, bit for bit, as the AVX2
// variant (ggml_int8_avx2.cpp) computes it, with VNNI's dpbusd in place of maddubs + madd: one instruction
// multiplies unsigned by signed bytes and adds each 4 adjacent products into an int32 lane, the
// definition's p[b][j] (exact: there is no int16 step to saturate). Vectors stay 256-bit (AVX512VL), like
// every AVX-512 kernel here. A CPU with AVX-512 F/BW/VL but no VNNI (Skylake-X) runs the AVX2 variant.
#include "ggml_kernels.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>

#include "../avx2_common.h"
#include "plumb/core/extent.h"
#include "plumb/kernels/int8_activations.h"

#define PLUMB_AVX512_VNNI __attribute__((target("avx2,f16c,fma,avx512f,avx512bw,avx512vl,avx512vnni")))

namespace plumb::kernels::ggml::avx512 {
namespace {

constexpr int kRows = 4;

template <GgmlType kType>
PLUMB_AVX512_VNNI inline __m256i Partials(__m256i w, __m256i q) {
  if constexpr (Int8LayoutOf(kType).is_unsigned) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), w, q);
  } else {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(w, w), _mm256_sign_epi8(q, w));
  }
}

PLUMB_AVX512_VNNI inline __m256i AddPartials(__m256i acc, __m256i u, __m256i q) {
  return _mm256_dpbusd_epi32(acc, u, q);
}

#define PLUMB_I8_TARGET PLUMB_AVX512_VNNI
#include "int8_dots_x86_body.h"
#undef PLUMB_I8_TARGET

}  // namespace

void Int8RowDots(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y) {
  static const bool vnni = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("fma");
  if (!vnni) return avx2::Int8RowDots(W, row_begin, row_end, x, y);
  RunAnyType(W, row_begin, row_end, x, y);
}

}  // namespace plumb::kernels::ggml::avx512

#endif  // defined(__x86_64__)
