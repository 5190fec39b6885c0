// DecodeKvRow's dispatch: the variant of the active ISA (kernels/row_dot.h), else the definition.
#include "plumb/kernels/kv_decode.h"

#include "plumb/kernels/row_dot.h"

namespace plumb::kernels {

DecodeKvRowFn ActiveDecodeKvRow() {
  switch (ActiveRowDotIsa()) {
#if defined(__x86_64__)
    case RowDotIsa::kAvx2:
    case RowDotIsa::kAvx512:
      return avx2::DecodeKvRow;
#endif
#if defined(__aarch64__)
    case RowDotIsa::kNeon:
      return neon::DecodeKvRow;
#endif
    default:
      return DecodeKv;
  }
}

void DecodeKvRow(KvDtype dtype, const void* src, int n, float scale, float* dst) {
  if (n > 0) ActiveDecodeKvRow()(dtype, src, n, scale, dst);
}

}  // namespace plumb::kernels
