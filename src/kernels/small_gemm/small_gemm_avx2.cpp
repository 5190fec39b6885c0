// The small-m product (small_gemm.h) with AVX2, FMA and F16C: 2 × 4 register blocks (8 accumulators, 4 weight
// vectors, one X vector and the product of the unfused order fit the 16 ymm registers; the 8 accumulators
// are reduced together).
#include "small_gemm.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "../simd/avx2_common.h"

namespace plumb::kernels::small_gemm::avx2 {

#define PLUMB_BODY_TARGET __attribute__((target("avx2,fma,f16c")))
#define PLUMB_BODY_BLOCK_X 2
#define PLUMB_BODY_BLOCK_W 4
#include "small_gemm_x86_body.h"
#undef PLUMB_BODY_BLOCK_W
#undef PLUMB_BODY_BLOCK_X
#undef PLUMB_BODY_TARGET

}  // namespace plumb::kernels::small_gemm::avx2

#endif  // __x86_64__
