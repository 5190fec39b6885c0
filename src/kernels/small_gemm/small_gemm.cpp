// The small-m product of decode batches (small_gemm.h): threading, the per-thread scratch tile, the choice
// of variant, and the scalar variant (the order of small_gemm.h written out; aarch64 and CPUs without
// AVX2 and FMA run it).
#include "small_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "plumb/core/extent.h"
#include "plumb/kernels/scalar.h"
#include "plumb/kernels/thread_pool.h"
#include "plumb/kernels/weight_format.h"

namespace plumb::kernels::small_gemm {

namespace scalar {

namespace {

// small_gemm.h's fused order: 8 lanes of fused multiply-adds, reduced by scalar::Dot's tree.
float DotFused(const float* a, const float* b, int n) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < n; ++i) lane[i % 8] = std::fma(a[i], b[i], lane[i % 8]);
  return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

}  // namespace

void Tile(const float* X, int m, int k, const float* tile, std::size_t ldw, int rows, float* Y,
          std::size_t ldy, Order order) {
  for (int i = 0; i < m; ++i) {
    const float* x = X + Extent(i, k);
    for (int r = 0; r < rows; ++r) {
      const float* w = tile + r * ldw;
      Y[i * ldy + r] = order == Order::kFused ? DotFused(w, x, k) : kernels::scalar::Dot(w, x, k);
    }
  }
}

}  // namespace scalar

namespace {

// The variant for ActiveIsa(). The vector ones need FMA for the fused order, which kAvx2 (and so kAvx512)
// includes (kernels/isa.h).
TileFn PickTile() {
#if defined(__x86_64__)
  switch (ActiveIsa()) {
    case Isa::kAvx512:
      return avx512::Tile;
    case Isa::kAvx2:
      return avx2::Tile;
    default:
      break;
  }
#endif
  return scalar::Tile;
}

}  // namespace

void Multiply(const float* X, int m, const WeightMatrix& W, float* Y, Order order) {
  const int n = W.rows;
  const int k = W.cols;
  if (m <= 0 || n <= 0) return;
  const TileFn tile_product = PickTile();
  // The tile's rows decoded by W's format (exactly: its definition's values, without the row scale).
  const DecodeRowsFn decode = KernelsFor(*W.format, ActiveIsa()).decode_rows;
  const bool f32 = W.IsF32();
  // Tiles of ~16 KiB (4 rows at k = 576 or 1536), decoded just before they are used: the decode's stores stay
  // in L1 and the weights' DRAM reads are spread over the call (with the decoders' prefetch) instead of
  // coming in long bursts; with 128 KiB tiles SmolLM2's batch-2 projections took 1.5x the CPU time (decode
  // stalled on memory). A multiple of 4 rows, the register blocks' height. X (≤ 64 × k floats) stays in a 1
  // MiB L2.
  constexpr std::size_t kTileBytes = std::size_t{16} << 10;
  const int tile_max =
      std::max(4, static_cast<int>(kTileBytes / (sizeof(float) * static_cast<std::size_t>(k))) / 4 * 4);
  RunParallel([&](int t, int threads) {
    // Rows [begin, end) of W: this thread's static, contiguous share, so each thread streams its own slice.
    const auto [share_begin, share_end] = StaticShare(n, t, threads);
    const int begin = static_cast<int>(share_begin);
    const int end = static_cast<int>(share_end);
    // [tile_max][k] decoded weight rows; per thread, grown only when a larger tile is first needed.
    thread_local std::vector<float> tile;
    if (!f32 && tile.size() < Extent(tile_max, k)) {
      tile.resize(Extent(tile_max, k));
    }
    for (int r0 = begin; r0 < end; r0 += tile_max) {
      const int rows = std::min(tile_max, end - r0);
      const float* weights = reinterpret_cast<const float*>(W.Row(r0));
      if (!f32) {
        decode(W, r0, rows, tile.data());
        weights = tile.data();
      }
      tile_product(X, m, k, weights, static_cast<std::size_t>(k), rows, Y + r0, static_cast<std::size_t>(n),
                   order);
      // The format's definition: the row scale multiplies the finished dot, one rounding.
      ApplyRowScales(W, r0, rows, Y, m, static_cast<std::size_t>(n));
    }
  });
}

}  // namespace plumb::kernels::small_gemm
