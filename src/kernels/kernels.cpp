// The kernel interface (include/plumb/kernels/kernels.h): threading and BLAS around the scalar definitions.
#include "plumb/kernels/kernels.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "plumb/formats/gguf_blocks.h"
#include "plumb/kernels/packed_dot.h"
#include "plumb/kernels/row_dot.h"
#include "plumb/kernels/scalar.h"

namespace plumb::kernels {

// One thread pool only: OpenMP's. OpenBLAS always runs single-threaded, inside OpenMP's threads (see Gemm),
// because its own pthread pool and OpenMP's spinning workers starve each other: on 2 cores, letting both
// run made a 2-thread decode 30x slower than a 1-thread one.
void SetNumThreads(int n) {
  if (n <= 0) n = omp_get_num_procs();
  omp_set_num_threads(n);
  openblas_set_num_threads(1);
}

int NumThreads() {
  return omp_get_max_threads();
}

namespace {

// Rows [begin, end) of this OpenMP thread's static, contiguous share of n rows: each thread streams its own
// slice of the matrix, and which thread computes a row never changes its bits.
void ThreadRows(int n, int& begin, int& end) {
  const int threads = omp_get_num_threads();
  const int t = omp_get_thread_num();
  begin = static_cast<int>(static_cast<std::int64_t>(n) * t / threads);
  end = static_cast<int>(static_cast<std::int64_t>(n) * (t + 1) / threads);
}

// y[n] = W[n][k] · x, W row-major FP32. Each row is scalar::Dot; the vector RowDots computes the same bits
// 2.4x faster than the compiler's code for scalar::GemvRows (L2-resident, AVX2), which one thread needs to
// keep up with DRAM.
void GemvF32(const float* w, int n, int k, const float* x, float* y) {
  const bool vector = ActiveRowDotIsa() != RowDotIsa::kScalar;
  const std::size_t row_bytes = static_cast<std::size_t>(k) * sizeof(float);
#pragma omp parallel
  {
    int begin = 0, end = 0;
    ThreadRows(n, begin, end);
    if (!vector) {
      scalar::GemvRows(w, x, y, k, begin, end);
    } else if (end > begin) {
      RowDots(GgmlType::F32, reinterpret_cast<const std::uint8_t*>(w + static_cast<std::size_t>(begin) * k),
              row_bytes, end - begin, x, k, y + begin);
    }
  }
}

// Y[m][n] = X[m][k] · W[n][k]ᵀ, all row-major FP32.
void GemmF32(const float* X, int m, const float* w, int n, int k, float* Y) {
  // Each OpenMP thread takes a slice of W's rows (Y's columns) and runs a single-threaded cblas_sgemm on
  // it, so a thread streams only its own part of the weights.
  constexpr int kColumnAlign = 16;  // keep slices a multiple of OpenBLAS's micro-tile widths
  static const bool blas_single_threaded = (openblas_set_num_threads(1), true);  // even without SetNumThreads
  (void)blas_single_threaded;
#pragma omp parallel
  {
    const int threads = omp_get_num_threads();
    const int per_thread = ((n + threads - 1) / threads + kColumnAlign - 1) / kColumnAlign * kColumnAlign;
    const int begin = std::min(n, omp_get_thread_num() * per_thread);
    const int end = std::min(n, begin + per_thread);
    if (end > begin) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, end - begin, k, 1.0f, X, k,
                  w + static_cast<std::size_t>(begin) * k, k, 0.0f, Y + begin, n);
    }
  }
}

}  // namespace

void Gemv(const MatrixF32& W, const float* x, float* y) {
  GemvF32(W.values.data(), W.rows, W.cols, x, y);
}

void Gemm(const float* X, int m, const MatrixF32& W, float* Y) {
  GemmF32(X, m, W.values.data(), W.rows, W.cols, Y);
}

namespace {

bool IsPacked(const WeightMatrix& W) {
  return W.encoding == WeightEncoding::kFp8 || W.encoding == WeightEncoding::kInt4;
}

// Row r of W in FP32 for a GEMM tile: what the GEMV's dot product multiplies x by (for FP8 the decoded codes;
// the scale is applied to the products afterwards, as in the GEMV's definition).
void TileRow(const WeightMatrix& W, int r, float* out) {
  if (IsPacked(W)) {
    DecodePackedRow(W, r, out);
  } else {
    DequantizeRow(W.type, W.Row(r), out, W.cols);
  }
}

}  // namespace

void Gemv(const WeightMatrix& W, const float* x, float* y) {
  if (IsPacked(W)) {
#pragma omp parallel
    {
      int begin = 0, end = 0;
      ThreadRows(W.rows, begin, end);
      PackedRowDots(W, begin, end, x, y);
    }
    return;
  }
  if (W.type == GgmlType::F32) {
    GemvF32(reinterpret_cast<const float*>(W.data), W.rows, W.cols, x, y);
    return;
  }
#pragma omp parallel
  {
    int begin = 0, end = 0;
    ThreadRows(W.rows, begin, end);
    if (end > begin) RowDots(W.type, W.Row(begin), W.row_bytes, end - begin, x, W.cols, y + begin);
  }
}

void Gemm(const float* X, int m, const WeightMatrix& W, float* Y) {
  const int n = W.rows;
  const int k = W.cols;
  if (W.encoding == WeightEncoding::kGgml && W.type == GgmlType::F32) {
    GemmF32(X, m, reinterpret_cast<const float*>(W.data), n, k, Y);
    return;
  }
  // Dequantizing a tile costs about as much as one RowDot pass over it, so for a handful of rows (e.g. the
  // LM head of the prompt's last token) m GEMVs are cheaper than dequantize + GEMM.
  constexpr int kMinRowsForTiles = 4;
  if (m < kMinRowsForTiles) {
    for (int i = 0; i < m; ++i)
      Gemv(W, X + static_cast<std::size_t>(i) * k, Y + static_cast<std::size_t>(i) * n);
    return;
  }
  // Each thread owns a contiguous slice of W's rows and walks it a tile at a time: decode the tile's rows
  // into FP32 (TileRow), multiply with cblas_sgemm. Tiles of about 8 MiB: every cblas_sgemm call re-reads
  // (and packs) all of X, so few, large tiles; 8 MiB per thread still leaves the tiles of two threads in a 32
  // MiB L3. 64-row tiles at k = 14336 made the packed GEMM 0.69x sgemm's rate at P = 512; 8 MiB ones, 0.93x.
  constexpr std::size_t kTileBytes = std::size_t{8} << 20;
  const int tile_max =
      std::max(16, static_cast<int>(kTileBytes / (sizeof(float) * static_cast<std::size_t>(k))) / 16 * 16);
  static const bool blas_single_threaded = (openblas_set_num_threads(1), true);
  (void)blas_single_threaded;
#pragma omp parallel
  {
    int begin = 0, end = 0;
    ThreadRows(n, begin, end);
    const int tile_capacity = std::min(tile_max, end - begin);
    std::vector<float> tile(static_cast<std::size_t>(std::max(tile_capacity, 0)) * k);  // once per thread
    for (int r0 = begin; r0 < end; r0 += tile_capacity) {
      const int tile_rows = std::min(tile_capacity, end - r0);
      for (int r = 0; r < tile_rows; ++r) TileRow(W, r0 + r, tile.data() + static_cast<std::size_t>(r) * k);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, tile_rows, k, 1.0f, X, k, tile.data(), k, 0.0f,
                  Y + r0, n);
      if (W.encoding == WeightEncoding::kFp8) {
        // The FP8 scale multiplies each finished dot product, as in the GEMV (and a GPU epilogue).
        for (int i = 0; i < m; ++i) {
          float* y = Y + static_cast<std::size_t>(i) * n;
          for (int r = r0; r < r0 + tile_rows; ++r) y[r] = W.fp8_scales[W.fp8_per_row ? r : 0] * y[r];
        }
      }
    }
  }
}

void GemvBatch(const WeightMatrix& W, const float* X, int rows, float* Y) {
  const int n = W.rows;
  const int k = W.cols;
  if (rows <= 0 || n <= 0) return;
  if (rows == 1) {  // the definition itself, without decoding tiles: bitwise the same, and a decode's speed
    Gemv(W, X, Y);
    return;
  }
  // Each thread owns a contiguous slice of W's rows and walks it a tile at a time: the tile (decoded to FP32
  // unless W is FP32 already) stays in L2 while every row of X is dotted with it, so the weights stream from
  // memory once per call, as in a GEMM. The dots are RowDots over FP32 rows: scalar::Dot's bits, which are
  // RowDot's and PackedRowDots's definition (DequantizeRow and DecodePackedRow are exact), so each Y row is
  // bitwise Gemv's.
  constexpr std::size_t kTileBytes = std::size_t{64} << 10;
  const int tile_max =
      std::max(1, static_cast<int>(kTileBytes / (sizeof(float) * static_cast<std::size_t>(k))));
  const bool f32 = W.encoding == WeightEncoding::kGgml && W.type == GgmlType::F32;
  const std::size_t f32_row_bytes = static_cast<std::size_t>(k) * sizeof(float);
  // For a few rows, the stored tile is dotted with each x row by RowDots / PackedRowDots themselves (they
  // are the definition; the tile stays in cache, so the weights are still read from memory once): their
  // fused decode is cheaper than decoding the tile to FP32 first. SmolLM2 Q4_1, one thread, a Step of B
  // decodes: B = 4 took 57 ms this way and 64 ms decoding tiles; B = 16, 214 ms and 158 ms.
  constexpr int kMaxDirectRows = 4;
  const bool direct = !f32 && rows <= kMaxDirectRows;
#pragma omp parallel
  {
    int begin = 0, end = 0;
    ThreadRows(n, begin, end);
    // [tile_max][k] decoded weight rows; per thread, grown only when a wider or taller tile is first needed.
    thread_local std::vector<float> tile;
    if (!f32 && tile.size() < static_cast<std::size_t>(tile_max) * k)
      tile.resize(static_cast<std::size_t>(tile_max) * k);
    for (int r0 = begin; r0 < end; r0 += tile_max) {
      const int tile_rows = std::min(tile_max, end - r0);
      if (direct) {
        for (int i = 0; i < rows; ++i) {
          const float* x = X + static_cast<std::size_t>(i) * k;
          float* y = Y + static_cast<std::size_t>(i) * n;
          if (IsPacked(W)) {
            PackedRowDots(W, r0, r0 + tile_rows, x, y);
          } else {
            RowDots(W.type, W.Row(r0), W.row_bytes, tile_rows, x, k, y + r0);
          }
        }
        continue;
      }
      const std::uint8_t* tile_bytes = W.Row(r0);
      if (!f32) {
        for (int r = 0; r < tile_rows; ++r) TileRow(W, r0 + r, tile.data() + static_cast<std::size_t>(r) * k);
        tile_bytes = reinterpret_cast<const std::uint8_t*>(tile.data());
      }
      const std::size_t stride = f32 ? W.row_bytes : f32_row_bytes;
      for (int i = 0; i < rows; ++i) {
        float* y = Y + static_cast<std::size_t>(i) * n;
        RowDots(GgmlType::F32, tile_bytes, stride, tile_rows, X + static_cast<std::size_t>(i) * k, k, y + r0);
        if (W.encoding == WeightEncoding::kFp8) {
          // PackedRowDots's definition: the scale multiplies the finished dot, one rounding.
          for (int r = r0; r < r0 + tile_rows; ++r) y[r] = W.fp8_scales[W.fp8_per_row ? r : 0] * y[r];
        }
      }
    }
  }
}

void DequantizeRowOf(const WeightMatrix& W, int r, float* out) {
  if (W.encoding == WeightEncoding::kGgml) {
    DequantizeRow(W.type, W.Row(r), out, W.cols);
    return;
  }
  DecodePackedRow(W, r, out);
  if (W.encoding == WeightEncoding::kFp8) {
    // An FP8 row as a vector of its own (the token embedding): each element q·scale, rounded to FP32 once.
    const float scale = W.fp8_scales[W.fp8_per_row ? r : 0];
    for (int c = 0; c < W.cols; ++c) out[c] = out[c] * scale;
  }
}

void RmsNorm(const float* x, const float* weight, float* out, int rows, int n, float eps) {
#pragma omp parallel for schedule(static) if (rows > 1)
  for (int r = 0; r < rows; ++r) {
    const std::size_t offset = static_cast<std::size_t>(r) * n;
    scalar::RmsNorm(x + offset, weight, out + offset, n, eps);
  }
}

void RopeRotateHalf(float* x, int rows, int n_heads, int head_dim, int first_pos, float theta) {
#pragma omp parallel for schedule(static) if (rows > 1)
  for (int r = 0; r < rows; ++r) {
    scalar::RopeRotateHalf(x + static_cast<std::size_t>(r) * n_heads * head_dim, n_heads, head_dim,
                           first_pos + r, theta);
  }
}

void SwiGlu(const float* gate, const float* up, float* out, std::int64_t n) {
  constexpr std::int64_t kChunk = 4096;
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t begin = c * kChunk;
    const std::int64_t count = (n - begin < kChunk) ? n - begin : kChunk;
    scalar::SwiGlu(gate + begin, up + begin, out + begin, static_cast<int>(count));
  }
}

}  // namespace plumb::kernels
