// The key runs attention's score phase reads, and the vector code that scores one
// (src/kernels/attention/attention.cpp, phase A). Internal to src/kernels.
#pragma once

#include <cstddef>
#include <cstdint>

namespace plumb::kernels {

// The scores of one run: s[h · s_stride + i] = Dot(q_h, k_{i, h / group}) · scale for every query head h
// (q: [n_kv · group][head_dim]) and the count positions i of the run, where the FP32 key row of position i
// and KV head c starts at rows + i · position_stride + c · head_stride (bytes).
// next: the next run of a paged (NHD) f32 cache, whose position i (all its KV heads, next_bytes bytes) the
// vector code asks for while it computes position i of this one (nullptr: none, or not that layout).
// ahead: a contiguous (one stream per KV head) f32 cache, whose rows 16 positions on the vector code asks
// for as it goes: the hardware prefetchers alone left each new chunk of the three streams cold.
struct KeyRun {
  const std::uint8_t* rows;
  std::size_t position_stride, head_stride;
  int count;
  const std::uint8_t* next = nullptr;
  int next_bytes = 0;
  bool ahead = false;
};

// Asks for the `bytes` bytes at `at` to be brought into cache. The hardware prefetchers follow a stream
// within a page but not across a jump to another block, so paged runs ask for their next block a position
// (or a KV head of eight positions) at a time: a burst of a whole block's requests measured no faster than
// none. The hint is T1 (to L2): measured ~5% faster than T0 at context 4096 (the requests then leave L1's
// miss buffers to the loads), and NTA twice as slow.
inline void PrefetchBytes(const std::uint8_t* at, int bytes) {
  for (int b = 0; b < bytes; b += 64) __builtin_prefetch(at + b, 0, 2);
}

// The scores of a run, by the variant for ActiveIsa() and head_dim (attention.cpp): AVX-512's or AVX2's
// ScoreRun where head_dim is a multiple of 8, else the CPU's row dots.
using ScoreRunFn = void (*)(const float* q, int n_kv, int group, int head_dim, const KeyRun& run, float scale,
                            float* s, int s_stride);
ScoreRunFn ActiveScoreRun(int head_dim);

#if defined(__x86_64__)
namespace avx2 {
// The scores of one run for a head_dim that is a multiple of 8, computing scalar::Dot's bits eight
// positions at a time (attention_avx2.cpp). Requires IsaSupported(Isa::kAvx2).
void ScoreRun(const float* q, int n_kv, int group, int head_dim, const KeyRun& run, float scale, float* s,
              int s_stride);
}  // namespace avx2
namespace avx512 {
// The same with two positions per 16-lane register (attention_avx512.cpp). Requires
// IsaSupported(Isa::kAvx512).
void ScoreRun(const float* q, int n_kv, int group, int head_dim, const KeyRun& run, float scale, float* s,
              int s_stride);
}  // namespace avx512
#endif

}  // namespace plumb::kernels
