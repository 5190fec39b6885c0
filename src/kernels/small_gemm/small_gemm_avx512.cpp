// The small-m product (small_gemm.h) compiled for AVX-512VL: the AVX2 code with 32 ymm registers, so 4 × 4
// register blocks (16 accumulators and 4 weight vectors; each loaded X vector serves 4 weight rows and each
// weight vector 4 X rows, against 3 and 3 with AVX2).
#include "small_gemm.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "../simd/avx2_common.h"

namespace plumb::kernels::small_gemm::avx512 {

#define PLUMB_BODY_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))
#define PLUMB_BODY_BLOCK_X 4
#define PLUMB_BODY_BLOCK_W 4
#include "small_gemm_x86_body.h"
#undef PLUMB_BODY_BLOCK_W
#undef PLUMB_BODY_BLOCK_X
#undef PLUMB_BODY_TARGET

}  // namespace plumb::kernels::small_gemm::avx512

#endif  // __x86_64__
