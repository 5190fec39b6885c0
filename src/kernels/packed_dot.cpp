// PackedRowDots and DecodePackedRow (include/plumb/kernels/packed_dot.h): the FP8 and INT4 formats' kernels
// (fp8/, int4/), reached through their descriptors, with the checks a caller outside the kernels needs.
#include "plumb/kernels/packed_dot.h"

#include "plumb/core/error.h"
#include "plumb/kernels/weight_format.h"

namespace plumb::kernels {
namespace {

void CheckPacked(const char* what, const WeightMatrix& W) {
  if (!W.Is(kFp8Format) && !W.Is(kInt4Format)) {
    throw MakeError(what, ": expects an FP8 or INT4 matrix; this one is a GGUF-type (", W.format->describe(W),
                    ") matrix");
  }
}

}  // namespace

void DecodePackedRow(const WeightMatrix& W, int r, float* out) {
  CheckPacked("DecodePackedRow", W);
  DecodeRowsOf(W, r, 1, out);
}

void PackedRowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  CheckPacked("PackedRowDots", W);
  RowDotsOf(W, row_begin, row_end, x, y);
}

namespace scalar {

void PackedRowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  CheckPacked("scalar::PackedRowDots", W);
  if (row_begin < 0 || row_end > W.rows || row_begin > row_end) {
    throw MakeError("scalar::PackedRowDots: rows [", row_begin, ", ", row_end, ") outside the matrix's ",
                    W.rows, " rows");
  }
  W.format->kernels[static_cast<int>(Isa::kScalar)].row_dots(W, row_begin, row_end, x, y);
}

}  // namespace scalar
}  // namespace plumb::kernels
