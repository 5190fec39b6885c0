// The GGUF-type weight format: plain F32/F16/BF16 rows and GGUF blocks (docs/formats.md "GGUF blocks"),
// W.type saying which. Its row dots are kernels/row_dot.h's (the definition: RowDot(type, row r, x) ==
// scalar::Dot(DequantizeRow(row r), x)), its decoded rows DequantizeRow's; no row scale, no side arrays.
// Its x86 entries look the type's kernel up in the GGUF kernel table (ggml_kernel_table.h), where each ISA
// file entered it; NEON's int8 dots are its whole-matrix functions.
#include <cstddef>
#include <string>

#include "ggml_kernel_table.h"
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

// The table's kernels for W.type on kIsa (the ISA's own, or the next one down's), as WeightFormat entries.
// Each is called only for a matrix its family covers (has_int8, has_fma; every type has row dots and a
// decoder), for which the table has the entry.
template <Isa kIsa>
void RowDotsOn(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  GgmlKernelsFor(W.type, kIsa)
      .row_dots(W.type, W.Row(row_begin), W.row_bytes, row_end - row_begin, x, W.cols, y + row_begin);
}
template <Isa kIsa>
void DecodeRowsOn(const WeightMatrix& W, int r0, int count, float* out) {
  GgmlKernelsFor(W.type, kIsa).decode_rows(W, r0, count, out);
}
template <Isa kIsa>
void Int8RowDotsOn(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y) {
  GgmlKernelsFor(W.type, kIsa).int8_row_dots(W, row_begin, row_end, x, y);
}
template <Isa kIsa>
void Int8GemmOn(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs, int m, float* Y,
                std::size_t ldy) {
  GgmlKernelsFor(W.type, kIsa).int8_gemm(W, row_begin, row_end, xs, m, Y, ldy);
}
template <Isa kIsa>
void Int8PanelGemmOn(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs, int m,
                     float* Y, std::size_t ldy) {
  GgmlKernelsFor(W.type, kIsa).int8_panel_gemm(W, row_begin, row_end, xs, m, Y, ldy);
}
template <Isa kIsa>
void FmaRowDotsOn(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  GgmlKernelsFor(W.type, kIsa).fma_row_dots(W, row_begin, row_end, x, y);
}

}  // namespace

void scalar::DecodeRows(const WeightMatrix& W, int r0, int count, float* out) {
  for (int i = 0; i < count; ++i) {
    DequantizeRow(W.type, W.Row(r0 + i), out + Extent(i, W.cols), W.cols);
  }
}

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
                       .decode_rows = ggml::scalar::DecodeRows,
                       .int8_row_dots = ggml::scalar::Int8RowDots,
                       .int8_gemm = Int8GemmByRows<ggml::scalar::Int8RowDots>,
                       .int8_panel_gemm = Int8GemmByRowChunks<ggml::scalar::Int8RowDots>,
                       .fma_row_dots = ggml::scalar::FmaRowDots},
#if defined(__x86_64__)
        /* kAvx2 */
        {.row_dots = ggml::RowDotsOn<Isa::kAvx2>,
         .decode_rows = ggml::DecodeRowsOn<Isa::kAvx2>,
         .int8_row_dots = ggml::Int8RowDotsOn<Isa::kAvx2>,
         .int8_gemm = ggml::Int8GemmOn<Isa::kAvx2>,
         .int8_panel_gemm = ggml::Int8PanelGemmOn<Isa::kAvx2>,
         .fma_row_dots = ggml::FmaRowDotsOn<Isa::kAvx2>},
        /* kNeon */ {},
        /* kAvx512 */
        {.row_dots = ggml::RowDotsOn<Isa::kAvx512>,
         .decode_rows = ggml::DecodeRowsOn<Isa::kAvx512>,
         .int8_row_dots = ggml::Int8RowDotsOn<Isa::kAvx512>,
         .int8_gemm = ggml::Int8GemmOn<Isa::kAvx512>,
         .int8_panel_gemm = ggml::Int8PanelGemmOn<Isa::kAvx512>,
         .fma_row_dots = ggml::FmaRowDotsOn<Isa::kAvx512>},
#elif defined(__aarch64__)
        /* kAvx2 */ {},
        /* kNeon */
        {.row_dots = ggml::RowDotsOn<Isa::kNeon>,
         .int8_row_dots = ggml::neon::Int8RowDots,  // each type's kernel on the CPU's path (ggml_kernels.h)
         .int8_gemm = ggml::neon::Int8Gemm,
         .int8_panel_gemm = ggml::Int8PanelGemmOn<Isa::kNeon>,
         .fma_row_dots = ggml::FmaRowDotsOn<Isa::kNeon>},
        /* kAvx512 */ {},
#else
        {},
        {},
        {},
#endif
    }},
};

}  // namespace plumb::kernels
