// RowDot with AVX2 + F16C: the scalar definition (row_dot.h), eight lanes at a time.
//
// Why the bits match the definition: one __m256 accumulator holds the eight lanes, element i of the row in
// lane i mod 8 (a block's t-th group of eight is one vector); each step is _mm256_mul_ps then _mm256_add_ps,
// rounded like the scalar w·x then lane += (no FMA: the target below leaves "fma" out and the build has
// -ffp-contract=off); the weights are made with the same float operations as DequantizeRow (docs/formats.md
// "GGUF blocks"); the eight lanes are then reduced by the scalar expression itself. F16C's conversions are
// exact; they differ from F16ToF32 only in quieting a signalling NaN, which the following multiply would
// quiet anyway, giving the same bits.
//
// Several rows are computed together (kRows accumulators): one row's adds form a single dependency chain
// (the definition fixes it), so interleaving rows is what keeps the adder busy.
#include "plumb/kernels/row_dot.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "../simd/avx2_common.h"
#include "ggml_kernel_table.h"
#include "plumb/core/extent.h"
#include "plumb/formats/dtype.h"

namespace plumb::kernels::avx2 {
namespace {

constexpr int kRows = 4;

using avx2_common::Nibbles;
using avx2_common::Prefetch;
using avx2_common::ReadU16;
using avx2_common::ReduceLanes;

PLUMB_AVX2 inline __m256 HalfScale(const std::uint8_t* p) {
  return _mm256_set1_ps(_cvtsh_ss(ReadU16(p)));
}

// ---- plain types: Load8 converts 8 stored elements, LoadOne one (the tail of a row) ---------------------

struct PlainF32 {
  static constexpr int kBytes = 4;
  PLUMB_AVX2 static __m256 Load8(const std::uint8_t* p) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  }
  static float LoadOne(const std::uint8_t* p) {
    float value;
    std::memcpy(&value, p, sizeof value);
    return value;
  }
};

struct PlainF16 {
  static constexpr int kBytes = 2;
  PLUMB_AVX2 static __m256 Load8(const std::uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static float LoadOne(const std::uint8_t* p) { return F16ToF32(ReadU16(p)); }
};

struct PlainBF16 {
  static constexpr int kBytes = 2;
  PLUMB_AVX2 static __m256 Load8(const std::uint8_t* p) {
    const __m256i widened = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(widened, 16));
  }
  static float LoadOne(const std::uint8_t* p) { return BF16ToF32(ReadU16(p)); }
};

template <class Plain, int R>
PLUMB_AVX2 void PlainDots(const std::uint8_t* rows, std::size_t stride, const float* x, std::int64_t n,
                          float* y) {
  __m256 acc[R];
  const std::size_t ahead = avx2_common::PrefetchAhead(R * stride);
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  const std::int64_t full = n - n % 8;
  for (std::int64_t i = 0; i < full; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i);
    for (int r = 0; r < R; ++r) {
      if ((i * Plain::kBytes) % 64 == 0) Prefetch(rows, ahead + r * stride + i * Plain::kBytes);
      const __m256 w = Plain::Load8(rows + r * stride + i * Plain::kBytes);
      acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(w, xv));
    }
  }
  for (int r = 0; r < R; ++r) {
    alignas(32) float lane[8];
    _mm256_store_ps(lane, acc[r]);
    // The last n − full elements go to lanes 0.., as in scalar::Dot's tail loop.
    for (std::int64_t i = full; i < n; ++i) {
      lane[i - full] += Plain::LoadOne(rows + r * stride + i * Plain::kBytes) * x[i];
    }
    y[r] = ReduceLanes(lane);
  }
}

// ---- 32-element blocks: Decode writes the block's 4 vectors of weights (block_dots_x86_body.h) ---------

struct BlockQ4_0 {  // [d f16][qs 16 B]: (q − 8)·d
  static constexpr int kBytes = 18;
  PLUMB_AVX2 static void Decode(const std::uint8_t* b, __m256 w[4]) {
    const __m256 d = HalfScale(b);
    __m256i q[4];
    Nibbles(b + 2, q);
    const __m256i eight = _mm256_set1_epi32(8);
    for (int v = 0; v < 4; ++v) w[v] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q[v], eight)), d);
  }
};

struct BlockQ4_1 {  // [d f16][m f16][qs 16 B]: q·d + m
  static constexpr int kBytes = 20;
  PLUMB_AVX2 static void Decode(const std::uint8_t* b, __m256 w[4]) {
    const __m256 d = HalfScale(b);
    const __m256 m = HalfScale(b + 2);
    __m256i q[4];
    Nibbles(b + 4, q);
    for (int v = 0; v < 4; ++v) w[v] = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(q[v]), d), m);
  }
};

struct BlockQ8_0 {  // [d f16][qs 32 × int8]: q·d
  static constexpr int kBytes = 34;
  PLUMB_AVX2 static void Decode(const std::uint8_t* b, __m256 w[4]) {
    const __m256 d = HalfScale(b);
    for (int v = 0; v < 4; ++v) {
      const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 2 + 8 * v));
      w[v] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8)), d);
    }
  }
};

#define PLUMB_BODY_TARGET PLUMB_AVX2
#include "block_dots_x86_body.h"
#undef PLUMB_BODY_TARGET

// Rows in groups of kRows, then one at a time.
template <void (*Group)(const std::uint8_t*, std::size_t, const float*, std::int64_t, float*),
          void (*Single)(const std::uint8_t*, std::size_t, const float*, std::int64_t, float*)>
void RunRows(const std::uint8_t* rows, std::size_t stride, std::int64_t n_rows, const float* x,
             std::int64_t n, float* y) {
  std::int64_t r = 0;
  for (; r + kRows <= n_rows; r += kRows) Group(rows + Extent(r, stride), stride, x, n, y + r);
  for (; r < n_rows; ++r) Single(rows + Extent(r, stride), stride, x, n, y + r);
}

template <class Plain>
void RunPlain(const std::uint8_t* rows, std::size_t stride, std::int64_t n_rows, const float* x,
              std::int64_t n, float* y) {
  RunRows<PlainDots<Plain, kRows>, PlainDots<Plain, 1>>(rows, stride, n_rows, x, n, y);
}

}  // namespace
}  // namespace plumb::kernels::avx2

namespace plumb::kernels::ggml::avx2 {

// AVX2's column of row dots; the other types run the definition (the table's fallback).
void FillRowDots(GgmlKernelTable& table) {
  namespace k = kernels::avx2;  // the kernels above
  table.At(GgmlType::F32, Isa::kAvx2).row_dots = OneTypeRowDots<k::RunPlain<k::PlainF32>>;
  table.At(GgmlType::F16, Isa::kAvx2).row_dots = OneTypeRowDots<k::RunPlain<k::PlainF16>>;
  table.At(GgmlType::BF16, Isa::kAvx2).row_dots = OneTypeRowDots<k::RunPlain<k::PlainBF16>>;
  table.At(GgmlType::Q4_0, Isa::kAvx2).row_dots = OneTypeRowDots<k::RunBlocks<k::BlockQ4_0>>;
  table.At(GgmlType::Q4_1, Isa::kAvx2).row_dots = OneTypeRowDots<k::RunBlocks<k::BlockQ4_1>>;
  table.At(GgmlType::Q8_0, Isa::kAvx2).row_dots = OneTypeRowDots<k::RunBlocks<k::BlockQ8_0>>;
}

}  // namespace plumb::kernels::ggml::avx2

#endif  // defined(__x86_64__)
