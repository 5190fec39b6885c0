// PackedRowDots: the scalar definition and the run-time choice of variant
// (include/plumb/kernels/packed_dot.h).
#include "plumb/kernels/packed_dot.h"

#include <algorithm>
#include <cstddef>

#include "plumb/core/error.h"
#include "plumb/kernels/row_dot.h"

namespace plumb::kernels {
namespace {

// Columns decoded at a time: a multiple of 8 (so each chunk starts in lane 0, as scalar::Dot's lanes need)
// and of every INT4 group size (so a chunk is whole groups and starts at an even group, whose 4-bit zero
// point is the low nibble of a byte); 1 KiB of stack.
constexpr int kChunk = 256;

float ReduceLanes(const float* lane) {
  return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

// Columns [c0, c0 + count) of row r, decoded as the definition does: FP8 codes without the scale, INT4 by
// DequantizeInt4Row itself (on a slice of whole groups of the row).
void DecodeChunk(const WeightMatrix& W, int r, int c0, int count, float* out) {
  const std::uint8_t* row = W.Row(r);
  if (W.encoding == WeightEncoding::kFp8) {
    const float* table = Fp8DecodeTable(W.fp8_format);
    for (int i = 0; i < count; ++i) out[i] = table[row[c0 + i]];
    return;
  }
  const int G = W.int4.group_size;
  const int groups = Int4Groups(W.cols, G);
  const int g0 = c0 / G;
  const std::uint8_t* zeros = nullptr;
  if (W.int4_zeros != nullptr) {
    const std::size_t zero_row = Int4ZeroRowBytes(W.int4, W.cols);
    const std::size_t zero_offset = W.int4.scheme == Int4Scheme::kAsymmetric
                                        ? static_cast<std::size_t>(g0) / 2
                                        : 2 * static_cast<std::size_t>(g0);
    zeros = W.int4_zeros + static_cast<std::size_t>(r) * zero_row + zero_offset;
  }
  DequantizeInt4Row(W.int4, row + c0 / 2, W.int4_scales + static_cast<std::size_t>(r) * groups + g0, zeros,
                    count, out);
}

void CheckArgs(const char* what, const WeightMatrix& W, int row_begin, int row_end) {
  if (W.encoding != WeightEncoding::kFp8 && W.encoding != WeightEncoding::kInt4) {
    throw MakeError(what, ": expects an FP8 or INT4 matrix; this one is a GGUF-type (", GgmlTypeName(W.type),
                    ") matrix");
  }
  if (row_begin < 0 || row_end > W.rows || row_begin > row_end) {
    throw MakeError(what, ": rows [", row_begin, ", ", row_end, ") outside the matrix's ", W.rows, " rows");
  }
}

}  // namespace

void DecodePackedRow(const WeightMatrix& W, int r, float* out) {
  CheckArgs("DecodePackedRow", W, r, r + 1);
#if defined(__x86_64__)
  // AVX-512 decodes as AVX2 does: a GEMM tile's rows are written once and read many times.
  const Isa isa = ActiveIsa();
  if (isa == Isa::kAvx2 || isa == Isa::kAvx512) return avx2::DecodePackedRow(W, r, out);
#endif
  for (int c0 = 0; c0 < W.cols; c0 += kChunk) DecodeChunk(W, r, c0, std::min(kChunk, W.cols - c0), out + c0);
}

void PackedRowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  CheckArgs("PackedRowDots", W, row_begin, row_end);
  switch (ActiveIsa()) {
#if defined(__x86_64__)
    case Isa::kAvx2:
      return avx2::PackedRowDots(W, row_begin, row_end, x, y);
    case Isa::kAvx512:
      return avx512::PackedRowDots(W, row_begin, row_end, x, y);
#endif
#if defined(__aarch64__)
    case Isa::kNeon:
      return neon::PackedRowDots(W, row_begin, row_end, x, y);
#endif
    default:
      return scalar::PackedRowDots(W, row_begin, row_end, x, y);
  }
}

namespace scalar {

void PackedRowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  CheckArgs("scalar::PackedRowDots", W, row_begin, row_end);
  float w[kChunk];
  for (int r = row_begin; r < row_end; ++r) {
    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int c0 = 0; c0 < W.cols; c0 += kChunk) {
      const int count = std::min(kChunk, W.cols - c0);
      DecodeChunk(W, r, c0, count, w);
      for (int i = 0; i < count; ++i) lane[i % 8] += w[i] * x[c0 + i];
    }
    const float dot = ReduceLanes(lane);
    y[r] = W.encoding == WeightEncoding::kFp8 ? W.fp8_scales[W.fp8_per_row ? r : 0] * dot : dot;
  }
}

}  // namespace scalar
}  // namespace plumb::kernels
