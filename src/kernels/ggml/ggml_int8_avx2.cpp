// The fast family's GGUF row dots with AVX2, FMA and F16C: ggml_int8.cpp's definition, bit for bit.
//
// maddubs multiplies unsigned by signed bytes and adds adjacent pairs into int16, madd with ones adds
// adjacent int16 pairs into int32: 8 lanes, each the sum of 4 products. Unsigned codes (Q4_1, Q5_1, and
// Q4_0's and Q5_0's nibbles with their offset still in) go in as they are; Q8_0's signed ones as |w| with
// w's sign moved onto x (sign_epi8), the same products. No int16 saturates: |x| ≤ 127 and |w| ≤ 128, so a
// pair is at most 2·128·127 = 32512 (and two pairs of codes ≤ 31, which AddPairPartials adds, 15748). Eight
// blocks' lanes reduce by horizontal adds to one vector of the 8 block sums, which converts exactly
// (|s| < 2^24) and goes into the 8 float lanes with the definition's one FMA per block. The loop is
// int8_dots_x86_body.h, shared with the AVX-512 VNNI variant; its int8_gemm is the row dots per x row.
// FillInt8 enters them in the table's AVX2 column (ggml_kernel_table.h).
#include "ggml_kernels.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>

#include "../int8_activations/int8_sums_x86.h"
#include "../simd/avx2_common.h"
#include "ggml_kernel_table.h"
#include "plumb/core/extent.h"
#include "plumb/kernels/int8_activations.h"
#include "plumb/kernels/weight_format.h"

namespace plumb::kernels::ggml::avx2 {
namespace {

constexpr int kRows = 4;

// acc + p[j] for unsigned codes u (int8_sums_x86.h).
PLUMB_INT8_AVX2 inline __m256i AddPartials(__m256i acc, __m256i u, __m256i q) {
  return int8_sums::Avx2(acc, u, q);
}

// The same for two registers of unsigned codes, each at most 31: the int16 pairs of both maddubs are added
// before they widen (each ≤ 2·31·127, two < 2^15), one madd for both.
PLUMB_INT8_AVX2 inline __m256i AddPairPartials(__m256i u1, __m256i q1, __m256i u2, __m256i q2) {
  return int8_sums::Avx2Pair(u1, q1, u2, q2);
}

// Each byte gets the bits' byte i / 8, and OR-ing every bit but i % 8 leaves 0xFF exactly when bit i % 8 is
// set; the and keeps 0x10 of it.
PLUMB_INT8_AVX2 inline __m256i FifthBits(std::uint32_t bits) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0x0000000000000000));
  const __m256i others = _mm256_set1_epi64x(static_cast<long long>(0x7FBFDFEFF7FBFDFEULL));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_or_si256(spread, others), _mm256_set1_epi64x(-1));
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

#define PLUMB_BODY_TARGET PLUMB_INT8_AVX2
#include "int8_dots_x86_body.h"
#undef PLUMB_BODY_TARGET

}  // namespace

void FillInt8(GgmlKernelTable& table) {
  FillInt8Column(table, Isa::kAvx2);
}

}  // namespace plumb::kernels::ggml::avx2

#endif  // defined(__x86_64__)
