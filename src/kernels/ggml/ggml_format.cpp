// The GGUF-type weight format: plain F32/F16/BF16 rows and GGUF blocks (docs/formats.md "GGUF blocks"),
// W.type saying which. Its row dots are kernels/row_dot.h's (the definition: RowDot(type, row r, x) ==
// scalar::Dot(DequantizeRow(row r), x)), its decoded rows DequantizeRow's; no row scale, no side arrays.
#include <cstddef>
#include <string>

#include "ggml_kernels.h"
#include "plumb/core/extent.h"
#include "plumb/formats/gguf_blocks.h"
#include "plumb/kernels/row_dot.h"
#include "plumb/kernels/weight_format.h"

namespace plumb::kernels {
namespace ggml {
namespace {

std::string Describe(const WeightMatrix& W) {
  return std::string(GgmlTypeName(W.type));
}

std::size_t SideBytes(const WeightMatrix&) {
  return 0;
}

void RowDotsScalar(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  for (int r = row_begin; r < row_end; ++r) y[r] = kernels::scalar::RowDot(W.type, W.Row(r), x, W.cols);
}

void DecodeRowsScalar(const WeightMatrix& W, int r0, int count, float* out) {
  for (int i = 0; i < count; ++i) {
    DequantizeRow(W.type, W.Row(r0 + i), out + Extent(i, W.cols), W.cols);
  }
}

// kernels/row_dot.h's variants over rows [row_begin, row_end) of W.
#if defined(__x86_64__)
void RowDotsAvx2(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  kernels::avx2::RowDots(W.type, W.Row(row_begin), W.row_bytes, row_end - row_begin, x, W.cols,
                         y + row_begin);
}
void RowDotsAvx512(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  kernels::avx512::RowDots(W.type, W.Row(row_begin), W.row_bytes, row_end - row_begin, x, W.cols,
                           y + row_begin);
}
#endif
#if defined(__aarch64__)
void RowDotsNeon(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  kernels::neon::RowDots(W.type, W.Row(row_begin), W.row_bytes, row_end - row_begin, x, W.cols,
                         y + row_begin);
}
#endif

}  // namespace
}  // namespace ggml

constexpr WeightFormat kGgmlFormat = {
    .name = "ggml",
    .describe = ggml::Describe,
    .side_bytes = ggml::SideBytes,
    .row_scale = nullptr,
    .has_int8 = ggml::HasInt8,
    .has_int8_gemm = ggml::HasInt8Gemm,
    .int8_covers = ggml::kInt8Covers,
    .has_fma = ggml::HasFma,
    .fma_covers = ggml::kFmaCovers,
    .kernels = {{
        /* kScalar */ {.row_dots = ggml::RowDotsScalar,
                       .decode_rows = ggml::DecodeRowsScalar,
                       .int8_row_dots = ggml::scalar::Int8RowDots,
                       .int8_gemm = Int8GemmByRows<ggml::scalar::Int8RowDots>,
                       .fma_row_dots = ggml::scalar::FmaRowDots},
#if defined(__x86_64__)
        /* kAvx2 */
        {.row_dots = ggml::RowDotsAvx2,
         .decode_rows = ggml::avx2::DecodeRows,
         .int8_row_dots = ggml::avx2::Int8RowDots,
         .int8_gemm = ggml::avx2::Int8Gemm,
         .fma_row_dots = ggml::avx2::FmaRowDots},
        /* kNeon */ {},
        /* kAvx512 */
        {.row_dots = ggml::RowDotsAvx512,
         .int8_row_dots = ggml::avx512::Int8RowDots,
         .int8_gemm = ggml::avx512::Int8Gemm},
#elif defined(__aarch64__)
        /* kAvx2 */ {},
        /* kNeon */
        {.row_dots = ggml::RowDotsNeon,
         .int8_row_dots = ggml::neon::Int8RowDots,
         .int8_gemm = ggml::neon::Int8Gemm,
         .fma_row_dots = ggml::neon::FmaRowDots},
        /* kAvx512 */ {},
#else
        {},
        {},
        {},
#endif
    }},
};

}  // namespace plumb::kernels
