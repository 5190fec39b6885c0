// The microscaled weight format, MXFP4, NVFP4 and MXFP8 (formats/microscaling.h; docs/formats.md
// "Microscaled formats"): its descriptor, and its definition in plain C++.
//
// Definition, for each row r:
//   y[r] = tensor_scale · scalar::Dot(DecodeMicroscaledRow(row r), x, cols)
// (tensor_scale is NVFP4's, one rounded multiply after the dot as a GPU kernel's epilogue applies it; the MX
// schemes have none, W.mx_tensor_scale is 1 for them, and multiplying by 1 changes no bits). Each decoded
// element is its code's value times its block's scale, one FP32 multiply that is exact (docs/formats.md says
// why). decode_rows gives those values. The AVX2 row dots (microscaled_avx2.cpp, which AVX-512 hosts run
// too) and the NEON ones (microscaled_neon.cpp) compute the same bits; decode_rows runs this definition on
// every ISA. No fast-family kernels: a microscaled matrix runs the exact family in both.
#include <cstddef>
#include <string>

#include "../simd/chunked_dot.h"
#include "microscaled_kernels.h"
#include "plumb/core/extent.h"
#include "plumb/kernels/weight_format.h"
#include "plumb/kernels/weight_matrix.h"

namespace plumb::kernels {
namespace microscaled {
namespace {

std::string Describe(const WeightMatrix& W) {
  return MicroscalingSchemeName(W.mx_scheme);
}

std::size_t SideBytes(const WeightMatrix& W) {
  const std::size_t tensor_scale = W.mx_scheme == MicroscalingScheme::kNvfp4 ? sizeof(float) : 0;
  return Extent(W.rows, MicroscaledBlocks(W.mx_scheme, W.cols)) + tensor_scale;
}

float RowScale(const WeightMatrix& W, int) {
  return W.mx_tensor_scale;
}

const std::uint8_t* Scales(const WeightMatrix& W, int r) {
  return W.mx_scales + Extent(r, MicroscaledBlocks(W.mx_scheme, W.cols));
}

}  // namespace

namespace scalar {

void RowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  for (int r = row_begin; r < row_end; ++r) {
    // ChunkedDot's chunks start at multiples of 256: whole blocks, and an FP4 byte boundary.
    const float dot = ChunkedDot(W.cols, x, [&](std::int64_t begin, std::int64_t count, float* w) {
      DecodeMicroscaledRow(W.mx_scheme, W.Row(r), Scales(W, r), begin, count, w);
    });
    y[r] = RowScale(W, r) * dot;
  }
}

void DecodeRows(const WeightMatrix& W, int r0, int count, float* out) {
  for (int i = 0; i < count; ++i) {
    DecodeMicroscaledRow(W.mx_scheme, W.Row(r0 + i), Scales(W, r0 + i), 0, W.cols, out + Extent(i, W.cols));
  }
}

}  // namespace scalar
}  // namespace microscaled

constexpr WeightFormat kMicroscaledFormat = {
    .name = "microscaled",
    .describe = microscaled::Describe,
    .side_bytes = microscaled::SideBytes,
    .row_scale = microscaled::RowScale,
    .has_int8 = nullptr,
    .has_int8_gemm = nullptr,
    .int8_covers = nullptr,
    .has_fma = nullptr,
    .fma_covers = nullptr,
    .kernels = {{
        /* kScalar */ {.row_dots = microscaled::scalar::RowDots,
                       .decode_rows = microscaled::scalar::DecodeRows},
#if defined(__x86_64__)
        /* kAvx2 */ {.row_dots = microscaled::avx2::RowDots},
#else
        /* kAvx2 */ {},
#endif
#if defined(__aarch64__)
        /* kNeon */ {.row_dots = microscaled::neon::RowDots},
#else
        /* kNeon */ {},
#endif
        /* kAvx512 */ {},
    }},
};

}  // namespace plumb::kernels
