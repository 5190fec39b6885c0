// The FP8 weight format (docs/formats.md "FP8"): its descriptor, and its definition in plain C++.
//
// Definition, for each row r:
//   y[r] = scale_r · scalar::Dot(Fp8ToF32 of row r's codes, x, cols)
//   (scale_r = W.fp8_scales[r] when fp8_per_row, else W.fp8_scales[0]; one rounded multiply after the dot,
//   as a GPU kernel's epilogue applies a per-channel scale). decode_rows gives the codes' values, without
//   the scale.
// The fast family's (fma_row_dots): y[r] = scale_r · FmaDot(Fp8ToF32 of row r's codes, x), the dot in
// kernels/simd/fma_dot.h's order, the scale as above.
#include <cstddef>
#include <string>

#include "../simd/chunked_dot.h"
#include "../simd/fma_dot.h"
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

bool HasFma(const WeightMatrix&) {
  return true;
}

}  // namespace

namespace scalar {

namespace {

// y[r] = scale_r · dot(row r's values, x) for r in [row_begin, row_end), where Dot(n, x, decode) is
// ChunkedDot (the exact family) or FmaChunkedDot (the fast one).
template <class Dot>
void ScaledRows(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y, Dot dot) {
  const float* table = Fp8DecodeTable(W.fp8_format);
  for (int r = row_begin; r < row_end; ++r) {
    const std::uint8_t* codes = W.Row(r);
    y[r] = RowScale(W, r) * dot(W.cols, x, [&](std::int64_t begin, std::int64_t count, float* w) {
             for (std::int64_t i = 0; i < count; ++i) w[i] = table[codes[begin + i]];
           });
  }
}

}  // namespace

void RowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  ScaledRows(W, row_begin, row_end, x, y,
             [](std::int64_t n, const float* v, auto decode) { return ChunkedDot(n, v, decode); });
}

void FmaRowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  ScaledRows(W, row_begin, row_end, x, y,
             [](std::int64_t n, const float* v, auto decode) { return FmaChunkedDot(n, v, decode); });
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
    .has_fma = fp8::HasFma,
    .fma_covers = "FP8 E4M3, E5M2",
    .kernels = {{
        /* kScalar */
        {.row_dots = fp8::scalar::RowDots,
         .decode_rows = fp8::scalar::DecodeRows,
         .fma_row_dots = fp8::scalar::FmaRowDots},
#if defined(__x86_64__)
        /* kAvx2 */
        {.row_dots = fp8::avx2::RowDots,
         .decode_rows = fp8::avx2::DecodeRows,
         .fma_row_dots = fp8::avx2::FmaRowDots},
        /* kNeon */ {},
        /* kAvx512 */ {.row_dots = fp8::avx512::RowDots},
#elif defined(__aarch64__)
        /* kAvx2 */ {},
        /* kNeon */ {.row_dots = fp8::neon::RowDots, .fma_row_dots = fp8::neon::FmaRowDots},
        /* kAvx512 */ {},
#else
        {},
        {},
        {},
#endif
    }},
};

}  // namespace plumb::kernels
