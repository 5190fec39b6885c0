// DecodeKvRow's dispatch: the variant of the active ISA (kernels/row_dot.h), else the definition.
#include "plumb/kernels/kv_decode.h"

#include "plumb/kernels/row_dot.h"

namespace plumb::kernels {

void DecodeKvRow(KvDtype dtype, const void* src, int n, float scale, float* dst) {
  if (n <= 0) return;
  switch (ActiveRowDotIsa()) {
#if defined(__x86_64__)
    case RowDotIsa::kAvx2:
    case RowDotIsa::kAvx512:
      avx2::DecodeKvRow(dtype, src, n, scale, dst);
      return;
#endif
#if defined(__aarch64__)
    case RowDotIsa::kNeon:
      neon::DecodeKvRow(dtype, src, n, scale, dst);
      return;
#endif
    default:
      DecodeKv(dtype, src, n, scale, dst);
  }
}

}  // namespace plumb::kernels
