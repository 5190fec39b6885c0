// The INT4 weight format (formats/int4.h; docs/formats.md "INT4"): its descriptor, and its definition in
// plain C++.
//
// Definition, for each row r:
//   y[r] = scalar::Dot(DequantizeInt4Row(row r), x, cols)
// Group sizes are multiples of 8, so every group starts in lane 0 and a kernel can dequantize group by
// group. decode_rows gives DequantizeInt4Row's values.
#include <cstddef>
#include <string>

#include "../simd/chunked_dot.h"
#include "int4_kernels.h"
#include "plumb/core/extent.h"
#include "plumb/kernels/weight_format.h"

namespace plumb::kernels {
namespace int4 {
namespace {

std::string Describe(const WeightMatrix& W) {
  return std::string("int4-") + Int4SchemeName(W.int4.scheme) + "-g" + std::to_string(W.int4.group_size);
}

std::size_t SideBytes(const WeightMatrix& W) {
  const std::size_t groups = static_cast<std::size_t>(Int4Groups(W.cols, W.int4.group_size));
  return static_cast<std::size_t>(W.rows) *
         (groups * sizeof(std::uint16_t) + Int4ZeroRowBytes(W.int4, W.cols));
}

// Row r's scales and zero points, as DequantizeInt4Row takes them.
const std::uint16_t* Scales(const WeightMatrix& W, int r) {
  return W.int4_scales + static_cast<std::size_t>(r) * Int4Groups(W.cols, W.int4.group_size);
}
const std::uint8_t* Zeros(const WeightMatrix& W, int r) {
  if (W.int4_zeros == nullptr) return nullptr;
  return W.int4_zeros + static_cast<std::size_t>(r) * Int4ZeroRowBytes(W.int4, W.cols);
}

}  // namespace

namespace scalar {

void RowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  const int G = W.int4.group_size;
  for (int r = row_begin; r < row_end; ++r) {
    // Chunks are whole groups starting at an even group, whose 4-bit zero point is a low nibble.
    y[r] = ChunkedDot(W.cols, x, [&](std::int64_t begin, std::int64_t count, float* w) {
      const std::size_t g0 = static_cast<std::size_t>(begin / G);
      const std::uint8_t* zeros = Zeros(W, r);
      if (zeros != nullptr) zeros += W.int4.scheme == Int4Scheme::kAsymmetric ? g0 / 2 : 2 * g0;
      DequantizeInt4Row(W.int4, W.Row(r) + begin / 2, Scales(W, r) + g0, zeros, static_cast<int>(count), w);
    });
  }
}

void DecodeRows(const WeightMatrix& W, int r0, int count, float* out) {
  for (int i = 0; i < count; ++i) {
    DequantizeInt4Row(W.int4, W.Row(r0 + i), Scales(W, r0 + i), Zeros(W, r0 + i), W.cols,
                      out + Extent(i, W.cols));
  }
}

}  // namespace scalar
}  // namespace int4

constexpr WeightFormat kInt4Format = {
    .name = "int4",
    .describe = int4::Describe,
    .side_bytes = int4::SideBytes,
    .row_scale = nullptr,
    .has_int8 = int4::HasInt8,
    .has_int8_gemm = int4::HasInt8,  // every scheme, where an ISA has int8_gemm (x86)
    .int8_covers = int4::kInt8Covers,
    .has_fma = nullptr,
    .fma_covers = nullptr,
    .kernels = {{
        /* kScalar */ {.row_dots = int4::scalar::RowDots,
                       .decode_rows = int4::scalar::DecodeRows,
                       .int8_row_dots = int4::scalar::Int8RowDots,
                       .int8_gemm = Int8GemmByRows<int4::scalar::Int8RowDots>},
#if defined(__x86_64__)
        /* kAvx2 */
        {.row_dots = int4::avx2::RowDots,
         .decode_rows = int4::avx2::DecodeRows,
         .int8_row_dots = int4::avx2::Int8RowDots,
         .int8_gemm = int4::avx2::Int8Gemm},
        /* kNeon */ {},
        /* kAvx512 */
        {.row_dots = int4::avx512::RowDots,
         .int8_row_dots = int4::avx512::Int8RowDots,
         .int8_gemm = int4::avx512::Int8Gemm},
#elif defined(__aarch64__)
        /* kAvx2 */ {},
        /* kNeon */ {.row_dots = int4::neon::RowDots, .int8_row_dots = int4::neon::Int8RowDots},
        /* kAvx512 */ {},
#else
        {},
        {},
        {},
#endif
    }},
};

}  // namespace plumb::kernels
