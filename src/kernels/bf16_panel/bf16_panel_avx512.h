// What the AMX tiles (bf16_panel_amx.cpp) share with the AVX512-BF16 panels (bf16_panel_avx512.cpp).
// Internal to src/kernels/; x86-64 only.
#pragma once

#if defined(__x86_64__)

#include "../simd/avx512_intrinsics.h"

namespace plumb::kernels::bf16 {

#define PLUMB_TRANSPOSE_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))

// r[j] becomes column j of the 16 × 16 matrix of words whose row j was r[j].
PLUMB_TRANSPOSE_TARGET void Transpose16(__m512i* r);

}  // namespace plumb::kernels::bf16

#endif
