// The small-m product (small_gemm.h) with AVX2, FMA and F16C: 3 × 3 register blocks (9 accumulators, 3 weight
// vectors and one X vector fill the 16 ymm registers, with one spare for the product of the unfused order).
#include "small_gemm.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "avx2_common.h"
#include "plumb/formats/gguf_blocks.h"
#include "plumb/kernels/packed_dot.h"

namespace plumb::kernels::small_gemm::avx2 {

#define PLUMB_SG_TARGET __attribute__((target("avx2,fma,f16c")))
#define PLUMB_SG_BLOCK_X 3
#define PLUMB_SG_BLOCK_W 3
#include "small_gemm_x86_body.h"

}  // namespace plumb::kernels::small_gemm::avx2

#endif  // __x86_64__
