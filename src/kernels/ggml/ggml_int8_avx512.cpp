// The fast family's GGUF row dots with AVX-512 VNNI: ggml_int8.cpp's definition, bit for bit, as the AVX2
// variant (ggml_int8_avx2.cpp) computes it, with VNNI's dpbusd in place of maddubs + madd: one instruction
// multiplies unsigned by signed bytes and adds each 4 adjacent products into an int32 lane (exact: there is
// no int16 step to saturate). Its row dots keep to 256-bit vectors (AVX512VL), like every other AVX-512
// kernel here. A CPU with AVX-512 F/BW/VL but no VNNI (Skylake-X) runs the AVX2 variant. Its int8_gemm
// (kernels/weight_format.h) is the row dots per x row over chunks of weight rows (int8_dots_x86_body.h).
#include "ggml_kernels.h"

#if defined(__x86_64__)

#include "../simd/avx512_intrinsics.h"

#include <cstdint>

#include "../int8_activations/int8_sums_x86.h"
#include "../simd/avx2_common.h"
#include "ggml_kernel_table.h"
#include "plumb/core/extent.h"
#include "plumb/kernels/int8_activations.h"
#include "plumb/kernels/isa.h"
#include "plumb/kernels/weight_format.h"

namespace plumb::kernels::ggml::avx512 {
namespace {

constexpr int kRows = 4;

// acc + p[j] for unsigned codes u (int8_sums_x86.h).
PLUMB_INT8_VNNI inline __m256i AddPartials(__m256i acc, __m256i u, __m256i q) {
  return int8_sums::Vnni(acc, u, q);
}

PLUMB_INT8_VNNI inline __m256i AddPairPartials(__m256i u1, __m256i q1, __m256i u2, __m256i q2) {
  return int8_sums::VnniPair(u1, q1, u2, q2);
}

// The 32 bits as a byte mask (AVX-512BW/VL), 0x10 where set: one instruction where AVX2 takes four.
PLUMB_INT8_VNNI inline __m256i FifthBits(std::uint32_t bits) {
  return _mm256_maskz_mov_epi8(static_cast<__mmask32>(bits), _mm256_set1_epi8(0x10));
}

#define PLUMB_BODY_TARGET PLUMB_INT8_VNNI
#include "int8_dots_x86_body.h"
#undef PLUMB_BODY_TARGET

}  // namespace

// VNNI is beyond the kAvx512 level (Skylake-X has AVX-512 without it): found once, when the table is built.
// Without it the column stays empty and AVX-512 runs AVX2's kernels, by the table's fallback.
void FillInt8(GgmlKernelTable& table) {
  if (HasAvx512Vnni()) FillInt8Column(table, Isa::kAvx512);
}

}  // namespace plumb::kernels::ggml::avx512

#endif  // defined(__x86_64__)
