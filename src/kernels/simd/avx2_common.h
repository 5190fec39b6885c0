// Building blocks shared by the AVX2 kernels (ggml/, fp8/, int4/ *_avx2.cpp, small_gemm, kv_decode,
// attention) and the AVX-512 ones (*_avx512.cpp). Internal to src/kernels/; x86-64 only. The build is
// baseline x86-64, so every function that uses AVX2 or F16C carries PLUMB_AVX2 (AVX-512: PLUMB_AVX512) and is
// reached only after the run-time check (IsaSupported).
#pragma once

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>

#include "bytes.h"

#define PLUMB_AVX2 __attribute__((target("avx2,f16c")))
// The AVX-512 kernels (*_avx512.cpp) use 256-bit vectors with AVX-512VL's
// instructions (two-table permutes, 32 registers) and call the AVX2 building blocks, so their target is a
// superset of PLUMB_AVX2's; reached only when IsaSupported(kAvx512).
#define PLUMB_AVX512 __attribute__((target("avx2,f16c,avx512f,avx512bw,avx512vl")))

namespace plumb::kernels::avx2_common {

// The kernels walk several rows of a few KiB side by side; each row is prefetched at the same column of the
// row the next pass reads, since the hardware prefetchers stop at page boundaries and a new row would start
// on DRAM latency. One thread, FP8 E5M2 at 14336 x 4096: 9.2 GB/s with no prefetch, 9.5 with one 1 KiB
// ahead in the same row, 14.5 with this one (15.9 with W in cache). A prefetch past the matrix never
// faults; the address is computed as an integer because a pointer past the end of the matrix would be
// undefined. A kernel prefetches at steps of at most 64 bytes along a row, so that no cache line is left to
// a demand miss: at 68-byte steps (every other Q8_0 block) Gemma 3 270M's exact Q8_0 head read 7.4 GB/s,
// 24 of a token's 28 ms, and 3.2x faster at 34-byte ones.
inline void Prefetch(const std::uint8_t* base, std::size_t offset) {
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<std::uintptr_t>(base) + offset), _MM_HINT_T0);
}

// How far ahead a kernel that walks `group_bytes` of rows at a time (R rows × row bytes) prefetches: the
// next group's when that is far enough ahead to cover DRAM's latency, else the first group at least
// kPrefetchAheadBytes ahead. One group of 4 short rows (Llama-3.2-1B's 2048-wide Q4_K rows, 4.6 KiB) is
// read in about DRAM's latency, so data prefetched for it arrived late: the 1B Q4_K_M decode's Q4_K
// projections read 17-21 GB/s where the same kernel reads 30 from cache, 20-25 % faster with two groups
// (docs/performance.md, "An AVX-512 host").
constexpr std::size_t kPrefetchAheadBytes = 8192;
inline std::size_t PrefetchAhead(std::size_t group_bytes) {
  if (group_bytes == 0) return 0;
  return (kPrefetchAheadBytes + group_bytes - 1) / group_bytes * group_bytes;
}

using kernels::ReadU16;  // bytes.h
using kernels::ReadU32;

// The FP16 at p (a block's scale or minimum), in all 8 lanes: a broadcast and one conversion.
PLUMB_AVX2 inline __m256 HalfBroadcast(const std::uint8_t* p) {
  return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(ReadU16(p))));
}

// The 32 4-bit codes of a Q4 block (qs[0..16)) as 4 × 8 int32 in element order: elements 0..7 and 8..15 are
// the low nibbles of bytes 0..7 and 8..15, elements 16..23 and 24..31 their high nibbles (docs/formats.md,
// "GGUF blocks"). Each byte is widened once (the widening is a shuffle, and shuffles share one port) and
// split into its two nibbles by an and and a shift.
PLUMB_AVX2 inline void Nibbles(const std::uint8_t* qs, __m256i q[4]) {
  const __m256i bytes0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs)));
  const __m256i bytes1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs + 8)));
  const __m256i mask = _mm256_set1_epi32(0x0F);
  q[0] = _mm256_and_si256(bytes0, mask);
  q[1] = _mm256_and_si256(bytes1, mask);
  q[2] = _mm256_srli_epi32(bytes0, 4);
  q[3] = _mm256_srli_epi32(bytes1, 4);
}

// scalar::Dot's reduction tree over its eight lanes (kernels/scalar.h).
inline float ReduceLanes(const float* lane) {
  return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

// The eight lanes of acc, plus columns [full, cols) of the row added lane by lane (w(c) gives the weight),
// reduced: scalar::Dot's tail and reduction.
template <class Weight>
PLUMB_AVX2 float Finish(__m256 acc, int full, int cols, const float* x, Weight w) {
  alignas(32) float lane[8];
  _mm256_store_ps(lane, acc);
  for (int c = full; c < cols; ++c) lane[c - full] += w(c) * x[c];
  return ReduceLanes(lane);
}

// Rows [row_begin, row_end) of W: blocks of kRows rows computed together by `block` (independent
// accumulator chains, x loaded once for them: one row's adds form a single dependency chain, which the
// definition fixes), then the rest one at a time by `single`. Each writes y[r] for the rows it is given.
template <int kRows, class Matrix>
void RunRowBlocks(void (*block)(const Matrix&, int, const float*, float*),
                  void (*single)(const Matrix&, int, const float*, float*), const Matrix& W, int row_begin,
                  int row_end, const float* x, float* y) {
  int r = row_begin;
  for (; r + kRows <= row_end; r += kRows) block(W, r, x, y);
  for (; r < row_end; ++r) single(W, r, x, y);
}

}  // namespace plumb::kernels::avx2_common

#endif  // __x86_64__
