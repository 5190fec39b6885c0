// The fast family's F32, F16 and BF16 rows: the definition (kernels/simd/fma_dot.h) in plain C++. Each weight
// is its exact FP32 value (docs/formats.md "F16, BF16"); the variants (float_fma_x86.cpp, float_fma_neon.cpp)
// compute the same bits.
#include <cstdint>

#include "../simd/fma_dot.h"
#include "ggml_kernels.h"
#include "plumb/formats/gguf_blocks.h"

namespace plumb::kernels::ggml {

bool HasFmaType(GgmlType type) {
  return type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16;
}

bool HasFma(const WeightMatrix& W) {
  return HasFmaType(W.type);
}

namespace scalar {

void FmaRowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  for (int r = row_begin; r < row_end; ++r) {
    const std::uint8_t* row = W.Row(r);
    y[r] = FmaChunkedDot(W.cols, x, [&](std::int64_t begin, std::int64_t count, float* w) {
      DequantizeRow(W.type, row + GgmlRowBytes(W.type, begin), w, count);
    });
  }
}

}  // namespace scalar
}  // namespace plumb::kernels::ggml
