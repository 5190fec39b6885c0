// GGUF rows decoded to FP32 with AVX2 + F16C, for the tiles of the batched GEMMs (ggml_format.cpp's
// decode_rows): DequantizeRow's expressions (formats/gguf_blocks.cpp), 8 elements at a time. Q4_0, Q4_1,
// Q8_0, F16 and BF16 have vector code; the other types run DequantizeRow itself. Every step is exact but
// Q4_1's product and add, which are two instructions, as in the definition (no FMA in the target).
#include "ggml_kernels.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "../simd/avx2_common.h"
#include "ggml_kernel_table.h"
#include "plumb/core/extent.h"
#include "plumb/formats/gguf_blocks.h"

namespace plumb::kernels::ggml::avx2 {
namespace {

using avx2_common::HalfBroadcast;
using avx2_common::Nibbles;

// One row of `blocks` 32-element blocks of `bytes` bytes each: Q4_0 (q − 8)·d, Q4_1 q·d + m (the product
// rounded, then the add), Q8_0 q·d.
constexpr std::size_t kPrefetchAhead = 8192;

template <GgmlType kType>
PLUMB_AVX2 void DecodeBlocks(const std::uint8_t* row, int blocks, float* out) {
  for (int b = 0; b < blocks; ++b, out += 32) {
    // The weights stream from DRAM in short bursts (a few rows, then many FMAs on them), too irregular for
    // the hardware prefetchers: without this, decoding stalled on every row (SmolLM2 Q4_1, 16 rows: decode
    // was a third of the product's time). kPrefetchAhead bytes is several tiles ahead in the same matrix.
    avx2_common::Prefetch(row, static_cast<std::size_t>(b) * (kType == GgmlType::Q4_0   ? 18
                                                              : kType == GgmlType::Q4_1 ? 20
                                                                                        : 34) +
                                   kPrefetchAhead);
    __m256 w[4];
    if constexpr (kType == GgmlType::Q4_0) {
      const std::uint8_t* block = row + 18 * static_cast<std::size_t>(b);
      const __m256 d = HalfBroadcast(block);
      __m256i q[4];
      Nibbles(block + 2, q);
      for (int v = 0; v < 4; ++v) {
        w[v] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q[v], _mm256_set1_epi32(8))), d);
      }
    } else if constexpr (kType == GgmlType::Q4_1) {
      const std::uint8_t* block = row + 20 * static_cast<std::size_t>(b);
      const __m256 d = HalfBroadcast(block);
      const __m256 m = HalfBroadcast(block + 2);
      __m256i q[4];
      Nibbles(block + 4, q);
      for (int v = 0; v < 4; ++v) w[v] = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(q[v]), d), m);
    } else {
      static_assert(kType == GgmlType::Q8_0);
      const std::uint8_t* block = row + 34 * static_cast<std::size_t>(b);
      const __m256 d = HalfBroadcast(block);
      for (int v = 0; v < 4; ++v) {
        const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 2 + 8 * v));
        w[v] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8)), d);
      }
    }
    for (int v = 0; v < 4; ++v) _mm256_storeu_ps(out + 8 * v, w[v]);
  }
}

// F16 rows (any length): F16C's conversion is exact, as F16ToF32 is.
PLUMB_AVX2 void DecodeF16(const std::uint8_t* row, int n, float* out) {
  int c = 0;
  for (; c + 8 <= n; c += 8) {
    _mm256_storeu_ps(out + c,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c))));
  }
  if (c < n) DequantizeRow(GgmlType::F16, row + 2 * c, out + c, n - c);
}

// BF16 rows (any length): each value is its 16 bits moved to the top of a float's, as BF16ToF32's.
PLUMB_AVX2 void DecodeBF16(const std::uint8_t* row, int n, float* out) {
  int c = 0;
  for (; c + 8 <= n; c += 8) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c)));
    _mm256_storeu_ps(out + c, _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)));
  }
  if (c < n) DequantizeRow(GgmlType::BF16, row + 2 * c, out + c, n - c);
}

// Rows [r0, r0 + count) of W, one type's decoder (DecodeBlocks<kType>, DecodeF16 or DecodeBF16) on each.
template <GgmlType kType>
void DecodeTypeRows(const WeightMatrix& W, int r0, int count, float* out) {
  const int k = W.cols;
  for (int i = 0; i < count; ++i) {
    if constexpr (kType == GgmlType::F16) {
      DecodeF16(W.Row(r0 + i), k, out + Extent(i, k));
    } else if constexpr (kType == GgmlType::BF16) {
      DecodeBF16(W.Row(r0 + i), k, out + Extent(i, k));
    } else {
      DecodeBlocks<kType>(W.Row(r0 + i), k / 32, out + Extent(i, k));
    }
  }
}

}  // namespace

// The table's AVX2 column of decoders (AVX-512 runs them too, by the fallback); the other types run
// DequantizeRow itself.
void FillDecodeRows(GgmlKernelTable& table) {
  table.At(GgmlType::Q4_0, Isa::kAvx2).decode_rows = DecodeTypeRows<GgmlType::Q4_0>;
  table.At(GgmlType::Q4_1, Isa::kAvx2).decode_rows = DecodeTypeRows<GgmlType::Q4_1>;
  table.At(GgmlType::Q8_0, Isa::kAvx2).decode_rows = DecodeTypeRows<GgmlType::Q8_0>;
  table.At(GgmlType::F16, Isa::kAvx2).decode_rows = DecodeTypeRows<GgmlType::F16>;
  table.At(GgmlType::BF16, Isa::kAvx2).decode_rows = DecodeTypeRows<GgmlType::BF16>;
}

}  // namespace plumb::kernels::ggml::avx2

#endif  // defined(__x86_64__)
