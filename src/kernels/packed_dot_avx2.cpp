// PackedRowDots with AVX2 + F16C (provisional: the scalar definition until the vector kernel lands).
#include "plumb/kernels/packed_dot.h"

#if defined(__x86_64__)

namespace plumb::kernels::avx2 {

void PackedRowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  scalar::PackedRowDots(W, row_begin, row_end, x, y);
}

}  // namespace plumb::kernels::avx2

#endif  // defined(__x86_64__)
