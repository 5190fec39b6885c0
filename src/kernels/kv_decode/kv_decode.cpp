// DecodeKvRow's dispatch: the variant of the active ISA (kernels/row_dot.h), else the definition.
#include "plumb/kernels/kv_decode.h"

#include <cstdint>

#include "plumb/core/extent.h"
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

namespace {

// DecodeKvRowsFn from a row variant: one call of it per row.
template <DecodeKvRowFn kRow>
void RowByRow(KvDtype dtype, const void* src, std::size_t src_stride, int count, int n, float scale,
              float* dst) {
  const auto* bytes = static_cast<const std::uint8_t*>(src);
  for (int i = 0; i < count; ++i) kRow(dtype, bytes + i * src_stride, n, scale, dst + Extent(i, n));
}

}  // namespace

DecodeKvRowsFn ActiveDecodeKvRows() {
  switch (ActiveIsa()) {
#if defined(__x86_64__)
    case Isa::kAvx2:
      return RowByRow<avx2::DecodeKvRow>;
    case Isa::kAvx512:
      return avx512::DecodeKvRows;
#endif
#if defined(__aarch64__)
    case Isa::kNeon:
      return RowByRow<neon::DecodeKvRow>;
#endif
    default:
      return RowByRow<DecodeKv>;
  }
}

void DecodeKvRow(KvDtype dtype, const void* src, int n, float scale, float* dst) {
  if (n > 0) ActiveDecodeKvRow()(dtype, src, n, scale, dst);
}

}  // namespace plumb::kernels
