// The INT4 row dots and row decoding with AVX2 + F16C: the definition (int4_format.cpp), eight lanes at a
// time.
//
// Why the bits match the definition: one __m256 accumulator per row holds scalar::Dot's eight lanes
// (column i in lane i mod 8; groups are multiples of 8 columns, so each starts in lane 0); each step is
// _mm256_mul_ps then _mm256_add_ps (no FMA: the target leaves "fma" out and the build has
// -ffp-contract=off); a row's last cols mod 8 columns are added lane by lane in scalar code as scalar::Dot's
// tail loop does; the lanes are reduced by the definition's expression. The codes are widened to int32
// lanes by a variable shift of the row's 32-bit word (8 nibbles, column c at bits 4c..4c+3), then
// float(q)·scale, float(q − z)·scale or (float(q) − z)·scale, in formats/int4.h's order of float operations
// (sym takes q·2^28 and s·2^-28, exactly the same product). F16C's scale conversions are exact.
//
// Several rows are computed together (kRows accumulators, x loaded once for them): one row's adds form a
// single dependency chain (the definition fixes it), so interleaving rows keeps the adders busy.
#include "int4_kernels.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>

#include "../simd/avx2_common.h"
#include "int4_avx2.h"

namespace plumb::kernels::int4::avx2 {
namespace {

constexpr int kRows = 4;

using avx2_common::Finish;
using avx2_common::Prefetch;
using avx2_shared::Int4Group;
using avx2_shared::Int4Groups8;
using avx2_shared::Int4Weight;
template <Int4Scheme S>
using Int4RowParams = Int4Groups8<S>;  // int4_dots_x86_body.h

#define PLUMB_BODY_TARGET PLUMB_AVX2
#include "int4_dots_x86_body.h"

#include "plumb/core/extent.h"
#undef PLUMB_BODY_TARGET

template <Int4Scheme S>
PLUMB_AVX2 void DecodeRow(const WeightMatrix& W, int r, float* out) {
  const std::uint8_t* row = W.Row(r);
  const int cols = W.cols;
  const int G = W.int4.group_size;
  const int groups = Int4Groups(cols, G);
  const std::size_t zero_row = Int4ZeroRowBytes(W.int4, cols);
  const int full = cols - cols % 8;
  for (int g8 = 0; g8 * G < full; g8 += 8) {
    Int4Groups8<S> params;
    params.Load(W, r, g8, groups, zero_row);
    for (int j = 0; j < 8 && (g8 + j) * G < full; ++j) {
      const Int4Group<S> group = params.Group(j);
      const int begin = (g8 + j) * G;
      const int end = begin + G < full ? begin + G : full;
      for (int c = begin; c < end; c += 8) _mm256_storeu_ps(out + c, group.Decode(row + c / 2));
    }
  }
  for (int c = full; c < cols; ++c) out[c] = Int4Weight(W, r, c);
}

template <Int4Scheme S>
void Run(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  avx2_common::RunRowBlocks<kRows>(Int4Dots<S, kRows>, Int4Dots<S, 1>, W, row_begin, row_end, x, y);
}

template <Int4Scheme S>
void Decode(const WeightMatrix& W, int r0, int count, float* out) {
  for (int i = 0; i < count; ++i) DecodeRow<S>(W, r0 + i, out + Extent(i, W.cols));
}

}  // namespace

void RowDots(const WeightMatrix& W, int row_begin, int row_end, const float* x, float* y) {
  WithScheme(W.int4.scheme, [&](auto s) { Run<decltype(s)::value>(W, row_begin, row_end, x, y); });
}

void DecodeRows(const WeightMatrix& W, int r0, int count, float* out) {
  WithScheme(W.int4.scheme, [&](auto s) { Decode<decltype(s)::value>(W, r0, count, out); });
}

}  // namespace plumb::kernels::int4::avx2

#endif  // defined(__x86_64__)
