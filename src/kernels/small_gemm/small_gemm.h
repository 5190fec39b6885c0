// The small-m product of decode batches (internal to src/kernels/): Y[m][n] = X[m][k] · W[n][k]ᵀ for a
// handful of X rows (a decode step's batch, m = 2..64) and a stored weight matrix of any type, reading each
// weight from memory once per call.
//
// Each OpenMP thread owns a contiguous slice of W's rows and walks it a tile at a time: the tile's rows are
// decoded to FP32 (F32 weights are used where they lie) into a persistent per-thread scratch tile of
// ~16 KiB (at least 4 rows), which stays in L1/L2 while every row of X (in L2) is multiplied with it. The
// multiply is register-blocked in dot-product form: a block of kBlockX rows of X against kBlockW rows of the
// tile, one 8-lane accumulator per (X row, W row) pair, so each loaded vector of X or W serves several
// products and no operand is transposed. Nothing is allocated once a thread's scratch has grown to the
// largest tile.
//
// Accumulation order of one output element y = Σ_c w[c]·x[c] (w a decoded weight row, x a row of X):
//   lane[j], j = 0..7, starts at +0 and takes the elements c ≡ j (mod 8) in ascending c;
//   y = ((lane0 + lane4) + (lane2 + lane6)) + ((lane1 + lane5) + (lane3 + lane7)), then for FP8 weights
//   y = scale · y (one rounding, as PackedRowDots defines it).
// Order::kDefinition adds each rounded product (mul then add): scalar::Dot's order, so every element is
// bitwise RowDot's / PackedRowDots's (the decoders are exact) — GemvBatch's contract. Order::kFused takes
// each lane step as one fused multiply-add (lane = fma(w, x, lane)): Gemm's contract, "within the
// dot-product error bound", and bitwise the same for every variant (scalar uses std::fma), thread count and
// tiling, since no variant changes which element goes to which lane or the reduction tree.
#pragma once

#include "plumb/kernels/weight_matrix.h"

namespace plumb::kernels::small_gemm {

enum class Order { kDefinition, kFused };

// Y[m][W.rows] = X[m][W.cols] · Wᵀ in the order above, for any m ≥ 1 (it pays from m = 2 on) and every
// weight type Gemv handles; variant picked by ActiveIsa() (scalar, AVX2 + FMA, AVX-512VL + FMA).
void Multiply(const float* X, int m, const WeightMatrix& W, float* Y, Order order);

// The most rows kernels::Gemm sends here; beyond, X no longer fits beside a tile in L2 and sgemm's packing
// pays for itself (prefill).
constexpr int kMaxRows = 64;

// Variant entry points (small_gemm_avx2.cpp, small_gemm_avx512.cpp, and the scalar one in small_gemm.cpp):
// Y[i][r] (row stride ldy) = product of X row i (row stride k) and tile row r (row stride ldw floats),
// i < m, r < rows, in `order`. The tiles are decoded by W's format (kernels/weight_format.h, decode_rows).
using TileFn = void (*)(const float* X, int m, int k, const float* tile, std::size_t ldw, int rows, float* Y,
                        std::size_t ldy, Order order);

namespace scalar {
void Tile(const float* X, int m, int k, const float* tile, std::size_t ldw, int rows, float* Y,
          std::size_t ldy, Order order);
}  // namespace scalar

#if defined(__x86_64__)
namespace avx2 {
void Tile(const float* X, int m, int k, const float* tile, std::size_t ldw, int rows, float* Y,
          std::size_t ldy, Order order);
}  // namespace avx2
namespace avx512 {
void Tile(const float* X, int m, int k, const float* tile, std::size_t ldw, int rows, float* Y,
          std::size_t ldy, Order order);
}  // namespace avx512
#endif

}  // namespace plumb::kernels::small_gemm
