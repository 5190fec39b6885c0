// How every int8_gemm variant (kernels/weight_format.h) walks its rows: weight rows in register blocks of
// kRows (then one at a time), x rows in groups of kX (then the remainder, as one smaller group), each
// (weight-row block, x-row group) one call of the variant's block kernel. Shared by the GGUF and INT4 x86
// kernels and the NEON ones. Internal to src/kernels/.
#pragma once

#include <cstddef>

#include "plumb/core/extent.h"
#include "plumb/kernels/int8_activations.h"
#include "plumb/kernels/weight_matrix.h"

namespace plumb::kernels {

// Block::template Run<RW, RX>(W, r0, xs, Y, ldy): weight rows [r0, r0 + RW) against x rows xs[0 .. RX) into
// Y[i][r] (row stride ldy), for RW in {kRows, 1} and RX in 1 .. kX.
template <class Block, int kRows, int kX>
class Int8GemmTiling {
 public:
  static void Run(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs, int m,
                  float* Y, std::size_t ldy) {
    int i = 0;
    for (; i + kX <= m; i += kX) Rows<kX>(W, row_begin, row_end, xs + i, Y + Extent(i, ldy), ldy);
    if (i < m) Rest<kX - 1>(W, row_begin, row_end, xs + i, m - i, Y + Extent(i, ldy), ldy);
  }

 private:
  template <int RX>
  static void Rows(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs, float* Y,
                   std::size_t ldy) {
    int r = row_begin;
    for (; r + kRows <= row_end; r += kRows) Block::template Run<kRows, RX>(W, r, xs, Y, ldy);
    for (; r < row_end; ++r) Block::template Run<1, RX>(W, r, xs, Y, ldy);
  }

  // The last `rest` (< kX) x rows, as one group of that many.
  template <int RX>
  static void Rest(const WeightMatrix& W, int row_begin, int row_end, const Int8Activations* xs, int rest,
                   float* Y, std::size_t ldy) {
    if constexpr (RX > 1) {
      if (rest < RX) return Rest<RX - 1>(W, row_begin, row_end, xs, rest, Y, ldy);
    }
    Rows<RX>(W, row_begin, row_end, xs, Y, ldy);
  }
};

}  // namespace plumb::kernels
