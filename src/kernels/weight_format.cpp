// The table of weight formats, the ISA fallback, and running a matrix's kernels (kernels/weight_format.h).
// Each format's descriptor lives in its own folder (ggml/, fp8/, int4/, microscaled/, block_fp8/).
#include "plumb/kernels/weight_format.h"

#include <algorithm>
#include <array>

#include "ggml/ggml_kernel_table.h"
#include "isa_fallback.h"
#include "plumb/core/error.h"
#include "plumb/core/extent.h"
#include "plumb/kernels/int8_activations.h"
#include "plumb/kernels/weight_matrix.h"

namespace plumb::kernels {

std::span<const WeightFormat* const> WeightFormats() {
  static constexpr std::array<const WeightFormat*, 5> kAll = {&kGgmlFormat, &kFp8Format, &kInt4Format,
                                                              &kMicroscaledFormat, &kBlockFp8Format};
  return kAll;
}

namespace {

// The formats' `covers` strings (int8_covers or fma_covers), joined with "; ".
std::string Coverage(const char* WeightFormat::*covers) {
  std::string covered;
  for (const WeightFormat* format : WeightFormats()) {
    if (format->*covers == nullptr) continue;
    covered += (covered.empty() ? "" : "; ") + std::string(format->*covers);
  }
  return covered;
}

}  // namespace

std::string Int8Coverage() {
  return Coverage(&WeightFormat::int8_covers);
}

std::string FmaCoverage() {
  return Coverage(&WeightFormat::fma_covers);
}

namespace {

template <class Fn>
Fn Pick(const WeightFormat& format, Isa isa, Fn FormatKernels::*member) {
  for (;; isa = NextDown(isa)) {
    const Fn fn = format.kernels[static_cast<int>(isa)].*member;
    if (fn != nullptr || isa == Isa::kScalar) return fn;
  }
}

void CheckRows(const char* what, const WeightMatrix& W, int row_begin, int row_end) {
  if (row_begin < 0 || row_end > W.rows || row_begin > row_end) {
    throw MakeError(what, ": rows [", row_begin, ", ", row_end, ") outside the ", W.format->describe(W),
                    " matrix's ", W.rows, " rows");
  }
}

}  // namespace

FormatKernels KernelsFor(const WeightFormat& format, Isa isa) {
  return WithFallback<FormatKernels>(
      isa, [&](Isa at) -> const FormatKernels& { return format.kernels[static_cast<int>(at)]; });
}

void RowDotsOf(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  CheckRows("RowDotsOf", W, row_begin, row_end);
  if (row_end > row_begin)
    Pick(*W.format, ActiveIsa(), &FormatKernels::row_dots)(W, row_begin, row_end, x, y);
}

void DecodeRowsOf(const WeightMatrix& W, int r0, int count, float* out) {
  CheckRows("DecodeRowsOf", W, r0, r0 + count);
  if (count > 0) Pick(*W.format, ActiveIsa(), &FormatKernels::decode_rows)(W, r0, count, out);
}

bool ExactRowDotsAreVectorized(const WeightMatrix& W) {
  if (!W.Is(kGgmlFormat)) return true;  // FP8 and INT4: row dots for AVX2, AVX-512 and NEON, every matrix
  // The GGUF types the kernel table's base vector column has row dots for (AVX2's, which AVX-512 builds on;
  // NEON's has the same types): a property of the code, not of the CPU.
  return ggml::HasVectorRowDots(W.type);
}

bool UsesInt8RowDots(const WeightMatrix& W) {
  return ActiveFamily() == KernelFamily::kFast && !W.exact_only && W.format->has_int8 != nullptr &&
         W.format->has_int8(W);
}

bool UsesFmaRowDots(const WeightMatrix& W) {
  return ActiveFamily() == KernelFamily::kFast && !W.exact_only && W.format->has_fma != nullptr &&
         W.format->has_fma(W);
}

void FmaRowDotsOf(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  CheckRows("FmaRowDotsOf", W, row_begin, row_end);
  if (W.format->has_fma == nullptr || !W.format->has_fma(W)) {
    throw MakeError("FmaRowDotsOf: the fast family has no FMA kernels for a ", W.format->describe(W),
                    " matrix");
  }
  if (row_end > row_begin)
    Pick(*W.format, ActiveIsa(), &FormatKernels::fma_row_dots)(W, row_begin, row_end, x, y);
}

namespace {

void CheckInt8(const char* what, const WeightMatrix& W, int row_begin, int row_end,
               const Int8Activations& x) {
  CheckRows(what, W, row_begin, row_end);
  if (W.format->has_int8 == nullptr || !W.format->has_int8(W)) {
    throw MakeError(what, ": the fast family has no kernels for a ", W.format->describe(W), " matrix");
  }
  if (x.n != W.cols) {
    throw MakeError(what, ": x has ", x.n, " elements; the ", W.format->describe(W), " matrix has ", W.cols,
                    " columns");
  }
}

}  // namespace

bool Int8BatchPays(const WeightMatrix& W, int rows) {
  return rows <= kInt8BatchMaxRows && UsesInt8RowDots(W) && ActiveIsa() != Isa::kScalar &&
         W.format->has_int8_gemm != nullptr && W.format->has_int8_gemm(W) &&
         KernelsFor(*W.format, ActiveIsa()).int8_gemm != nullptr;
}

void Int8RowDotsOf(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations& x, float* y) {
  CheckInt8("Int8RowDotsOf", W, row_begin, row_end, x);
  if (row_end > row_begin) {
    Pick(*W.format, ActiveIsa(), &FormatKernels::int8_row_dots)(W, row_begin, row_end, x, y);
  }
}

void Int8GemmOf(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs, int m, float* Y,
                std::size_t ldy) {
  for (int i = 0; i < m; ++i) CheckInt8("Int8GemmOf", W, row_begin, row_end, xs[i]);
  if (row_end <= row_begin || m <= 0) return;
  const FormatKernels k = KernelsFor(*W.format, ActiveIsa());
  if (k.int8_gemm != nullptr) return k.int8_gemm(W, row_begin, row_end, xs, m, Y, ldy);
  for (int i = 0; i < m; ++i) k.int8_row_dots(W, row_begin, row_end, xs[i], Y + Extent(i, ldy));
}

void ApplyRowScales(const WeightMatrix& W, int r0, int count, float* Y, int m, std::size_t ldy) {
  if (W.format->row_scale == nullptr) return;
  constexpr int kBlock = 64;  // scales gathered per block of rows: one call each, not one per element
  float scale[kBlock];
  for (int b0 = 0; b0 < count; b0 += kBlock) {
    const int rows = std::min(kBlock, count - b0);
    for (int j = 0; j < rows; ++j) scale[j] = W.format->row_scale(W, r0 + b0 + j);
    for (int i = 0; i < m; ++i) {
      float* y = Y + Extent(i, ldy) + r0 + b0;
      for (int j = 0; j < rows; ++j) y[j] = scale[j] * y[j];
    }
  }
}

}  // namespace plumb::kernels
