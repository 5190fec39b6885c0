// The FP8 weight format (docs/formats.md "FP8"): its descriptor, and its definition in plain C++.
//
// Definition, for each row r:
//   y[r] = scale_r · scalar::Dot(Fp8ToF32 of row r's codes, x, cols)
//   (scale_r = W.fp8_scales[r] when fp8_per_row, else W.fp8_scales[0]; one rounded multiply after the dot,
//   as a GPU kernel's epilogue applies a per-channel scale). decode_rows gives the codes' values, without
//   the scale.
#include <cstddef>
#include <string>

#include "../chunked_dot.h"
#include "fp8_kernels.h"
#include "plumb/core/extent.h"
#include "plumb/kernels/weight_format.h"

namespace plumb::kernels {
namespace fp8 {
namespace {

std::string Describe(const WeightMatrix& W) {
  return W.fp8_format == Fp8Format::kE4M3 ? "fp8-e4m3" : "fp8-e5m2";
}

std::size_t SideBytes(const WeightMatrix& W) {
  return static_cast<std::size_t>(W.fp8_per_row ? W.rows : 1) * sizeof(float);
}

float RowScale(const WeightMatrix& W, int r) {
  return W.fp8_scales[W.fp8_per_row ? r : 0];
}

}  // namespace

namespace scalar {

void RowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  const float* table = Fp8DecodeTable(W.fp8_format);
  for (int r = row_begin; r < row_end; ++r) {
    const std::uint8_t* codes = W.Row(r);
    const float dot = ChunkedDot(W.cols, x, [&](std::int64_t begin, std::int64_t count, float* w) {
      for (std::int64_t i = 0; i < count; ++i) w[i] = table[codes[begin + i]];
    });
    y[r] = RowScale(W, r) * dot;
  }
}

void DecodeRows(const WeightMatrix& W, int r0, int count, float* out) {
  const float* table = Fp8DecodeTable(W.fp8_format);
  for (int i = 0; i < count; ++i) {
    const std::uint8_t* codes = W.Row(r0 + i);
    float* row = out + Extent(i, W.cols);
    for (int c = 0; c < W.cols; ++c) row[c] = table[codes[c]];
  }
}

}  // namespace scalar
}  // namespace fp8

constexpr WeightFormat kFp8Format = {
    .name = "fp8",
    .describe = fp8::Describe,
    .side_bytes = fp8::SideBytes,
    .row_scale = fp8::RowScale,
    .has_int8 = nullptr,
    .has_int8_gemm = nullptr,
    .int8_covers = nullptr,
    .kernels = {{
        /* kScalar */ {.row_dots = fp8::scalar::RowDots, .decode_rows = fp8::scalar::DecodeRows},
#if defined(__x86_64__)
        /* kAvx2 */ {.row_dots = fp8::avx2::RowDots, .decode_rows = fp8::avx2::DecodeRows},
        /* kNeon */ {},
        /* kAvx512 */ {.row_dots = fp8::avx512::RowDots},
#elif defined(__aarch64__)
        /* kAvx2 */ {},
        /* kNeon */ {.row_dots = fp8::neon::RowDots},
        /* kAvx512 */ {},
#else
        {},
        {},
        {},
#endif
    }},
};

}  // namespace plumb::kernels
