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
#include "../int8_sums_x86.h"
#include "plumb/core/extent.h"
#include "plumb/kernels/int8_activations.h"

namespace plumb::kernels::ggml::avx512 {
namespace {

constexpr int kRows = 4;

// acc + p[j] for unsigned codes u (int8_sums_x86.h).
PLUMB_INT8_VNNI inline __m256i AddPartials(__m256i acc, __m256i u, __m256i q) {
  return int8_sums::Vnni(acc, u, q);
}

#define PLUMB_I8_TARGET PLUMB_INT8_VNNI
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
