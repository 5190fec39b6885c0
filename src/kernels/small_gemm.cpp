// The small-m product of decode batches (small_gemm.h): threading, the per-thread scratch tile, the choice
// of variant, and the scalar variant (the order of small_gemm.h written out; aarch64 and CPUs without
// AVX2 and FMA run it).
#include "small_gemm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "plumb/formats/gguf_blocks.h"
#include "plumb/kernels/packed_dot.h"
#include "plumb/kernels/row_dot.h"
#include "plumb/kernels/scalar.h"

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
    const float* x = X + static_cast<std::size_t>(i) * k;
    for (int r = 0; r < rows; ++r) {
      const float* w = tile + r * ldw;
      Y[i * ldy + r] = order == Order::kFused ? DotFused(w, x, k) : kernels::scalar::Dot(w, x, k);
    }
  }
}

void Decode(const WeightMatrix& W, int r0, int count, float* tile) {
  for (int r = 0; r < count; ++r) {
    float* out = tile + static_cast<std::size_t>(r) * W.cols;
    if (W.encoding == WeightEncoding::kGgml) {
      DequantizeRow(W.type, W.Row(r0 + r), out, W.cols);
    } else {
      DecodePackedRow(W, r0 + r, out);  // FP8: the codes only; the scale multiplies the finished dot
    }
  }
}

}  // namespace scalar

namespace {

struct Variant {
  TileFn tile;
  DecodeFn decode;
};

// The variant for ActiveIsa(): the vector ones also need FMA for the fused order (every AVX2 CPU
// plumb has met has it, but the instruction set does not promise it).
Variant PickVariant() {
#if defined(__x86_64__)
  static const bool fma = __builtin_cpu_supports("fma");
  switch (ActiveIsa()) {
    case Isa::kAvx512:
      if (fma) return {avx512::Tile, avx512::Decode};
      break;
    case Isa::kAvx2:
      if (fma) return {avx2::Tile, avx2::Decode};
      break;
    default:
      break;
  }
#endif
  return {scalar::Tile, scalar::Decode};
}

}  // namespace

DecodeFn PickDecode() {
  return PickVariant().decode;
}

void Multiply(const float* X, int m, const WeightMatrix& W, float* Y, Order order) {
  const int n = W.rows;
  const int k = W.cols;
  if (m <= 0 || n <= 0) return;
  const Variant variant = PickVariant();
  const bool f32 = W.encoding == WeightEncoding::kGgml && W.type == GgmlType::F32;
  // Tiles of ~16 KiB (4 rows at k = 576 or 1536), decoded just before they are used: the decode's stores stay
  // in L1 and the weights' DRAM reads are spread over the call (with the decoders' prefetch) instead of
  // coming in long bursts; with 128 KiB tiles SmolLM2's batch-2 projections took 1.5x the CPU time (decode
  // stalled on memory). A multiple of 4 rows, the register blocks' height. X (≤ 64 × k floats) stays in a 1
  // MiB L2.
  constexpr std::size_t kTileBytes = std::size_t{16} << 10;
  const int tile_max =
      std::max(4, static_cast<int>(kTileBytes / (sizeof(float) * static_cast<std::size_t>(k))) / 4 * 4);
#pragma omp parallel
  {
    // Rows [begin, end) of W: this thread's static, contiguous share, so each thread streams its own slice.
    const int threads = omp_get_num_threads();
    const int t = omp_get_thread_num();
    const int begin = static_cast<int>(static_cast<std::int64_t>(n) * t / threads);
    const int end = static_cast<int>(static_cast<std::int64_t>(n) * (t + 1) / threads);
    // [tile_max][k] decoded weight rows; per thread, grown only when a larger tile is first needed.
    thread_local std::vector<float> tile;
    if (!f32 && tile.size() < static_cast<std::size_t>(tile_max) * k) {
      tile.resize(static_cast<std::size_t>(tile_max) * k);
    }
    for (int r0 = begin; r0 < end; r0 += tile_max) {
      const int rows = std::min(tile_max, end - r0);
      const float* weights = reinterpret_cast<const float*>(W.Row(r0));
      if (!f32) {
        variant.decode(W, r0, rows, tile.data());
        weights = tile.data();
      }
      variant.tile(X, m, k, weights, static_cast<std::size_t>(k), rows, Y + r0, static_cast<std::size_t>(n),
                   order);
      if (W.encoding == WeightEncoding::kFp8) {
        // PackedRowDots's definition: the scale multiplies the finished dot, one rounding.
        for (int i = 0; i < m; ++i) {
          float* y = Y + static_cast<std::size_t>(i) * n;
          for (int r = r0; r < r0 + rows; ++r) y[r] = W.fp8_scales[W.fp8_per_row ? r : 0] * y[r];
        }
      }
    }
  }
}

}  // namespace plumb::kernels::small_gemm
