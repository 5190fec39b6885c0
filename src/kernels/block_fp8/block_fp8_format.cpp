// The block-scaled FP8 weight format, fp8-block128 (formats/block_fp8.h; docs/formats.md "Block-scaled FP8
// (128×128)"): its descriptor, and its definition in plain C++.
//
// Definition, for each row r:
//   y[r] = scalar::Dot(DecodeBlockFp8Row(row r), x, cols)
// each decoded element being Fp8ToF32(code) · scales[r / 128][c / 128], one rounded FP32 multiply. The scale
// changes along the row every 128 columns, so unlike FP8's per-row scale it cannot wait for the finished dot
// (there is no row_scale): decode_rows gives the scaled values, and the batched GEMMs' tiles need nothing
// after. The AVX2 kernels (block_fp8_avx2.cpp, which AVX-512 hosts run too) and the NEON ones
// (block_fp8_neon.cpp) compute the same bits. No fast-family kernels: a block-FP8 matrix runs the exact
// family in both.
#include <cstddef>
#include <string>

#include "../simd/chunked_dot.h"
#include "block_fp8_kernels.h"
#include "plumb/core/extent.h"
#include "plumb/kernels/weight_format.h"
#include "plumb/kernels/weight_matrix.h"

namespace plumb::kernels {
namespace block_fp8 {
namespace {

std::string Describe(const WeightMatrix&) {
  return "fp8-block128";
}

std::size_t SideBytes(const WeightMatrix& W) {
  return Extent(Fp8BlockCount(W.rows), Fp8BlockCount(W.cols)) * sizeof(float);
}

// Row r's block row of scales: ⌈cols / 128⌉ of them.
const float* Scales(const WeightMatrix& W, int r) {
  return W.fp8_block_scales + Extent(r / kFp8BlockSize, Fp8BlockCount(W.cols));
}

}  // namespace

namespace scalar {

void RowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  for (int r = row_begin; r < row_end; ++r) {
    y[r] = ChunkedDot(W.cols, x, [&](std::int64_t begin, std::int64_t count, float* w) {
      DecodeBlockFp8Row(W.Row(r), Scales(W, r), begin, count, w);
    });
  }
}

void DecodeRows(const WeightMatrix& W, int r0, int count, float* out) {
  for (int i = 0; i < count; ++i)
    DecodeBlockFp8Row(W.Row(r0 + i), Scales(W, r0 + i), 0, W.cols, out + Extent(i, W.cols));
}

}  // namespace scalar
}  // namespace block_fp8

constexpr WeightFormat kBlockFp8Format = {
    .name = "block-fp8",
    .describe = block_fp8::Describe,
    .side_bytes = block_fp8::SideBytes,
    .row_scale = nullptr,
    .has_int8 = nullptr,
    .has_int8_gemm = nullptr,
    .int8_covers = nullptr,
    .has_fma = nullptr,
    .fma_covers = nullptr,
    .kernels = {{
        /* kScalar */ {.row_dots = block_fp8::scalar::RowDots, .decode_rows = block_fp8::scalar::DecodeRows},
#if defined(__x86_64__)
        /* kAvx2 */ {.row_dots = block_fp8::avx2::RowDots, .decode_rows = block_fp8::avx2::DecodeRows},
#else
        /* kAvx2 */ {},
#endif
#if defined(__aarch64__)
        /* kNeon */ {.row_dots = block_fp8::neon::RowDots, .decode_rows = block_fp8::neon::DecodeRows},
#else
        /* kNeon */ {},
#endif
        /* kAvx512 */ {},
    }},
};

}  // namespace plumb::kernels
