// DecodeKvRow's dispatch: the variant of the active ISA (kernels/row_dot.h), else the definition.
#include "plumb/kernels/kv_decode.h"

#include "plumb/kernels/row_dot.h"

namespace plumb::kernels {

DecodeKvRowFn ActiveDecodeKvRow() {
  switch (ActiveIsa()) {
#if defined(__x86_64__)
    case Isa::kAvx2:
      return avx2::DecodeKvRow;
    case Isa::kAvx512:
      return avx512::DecodeKvRow;
#endif
#if defined(__aarch64__)
    case Isa::kNeon:
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
