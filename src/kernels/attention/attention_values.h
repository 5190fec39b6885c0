// Attention's value sums, out_g[j] += p_g[t] · v_t[j] (src/kernels/attention/attention.cpp, phase C, and
// attention_by_head.cpp): shared by both ways the kernel splits its work. Internal to src/kernels.
#pragma once

#include <cstddef>
#include <cstdint>

namespace plumb::kernels {

// Output elements summed together in registers: 128 B, an adjacent-line pair.
inline constexpr int kValueDims = 32;
// Query heads accumulated together (12 of the 16 AVX2 registers for kValueDims columns).
inline constexpr int kHeadTile = 3;

// out_g[j] += p_g[t0 + i] · v_i[j] for g < g_count (<= kHeadTile) query heads, j < width (<= kValueDims)
// output elements, i < count positions of one run whose FP32 rows start at `first` and lie `stride` bytes
// apart. Each element is its own sum in ascending t (no FMA), so every variant gives the scalar loop's bits.
using AccumulateFn = void (*)(const float* const* p, int g_count, int width, int t0, int count,
                              const std::uint8_t* first, std::size_t stride, float* const* out);
// The variant for ActiveIsa(): AVX-512's, else AVX2 code wherever the row dots may use it.
AccumulateFn ActiveAccumulate();

#if defined(__x86_64__)
namespace avx512 {
// AccumulateFn with 16 columns per register (attention_avx512.cpp). Requires IsaSupported(Isa::kAvx512).
void Accumulate(const float* const* p, int g_count, int width, int t0, int count, const std::uint8_t* first,
                std::size_t stride, float* const* out);
}  // namespace avx512
#endif

}  // namespace plumb::kernels
