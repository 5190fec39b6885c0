// The kernel interface (include/plumb/kernels/kernels.h): threading and BLAS around the scalar definitions.
#include "plumb/kernels/kernels.h"

#include <cblas.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "bf16_panel/bf16_panel.h"
#include "exp/exp_kernels.h"
#include "plumb/core/error.h"
#include "plumb/core/extent.h"
#include "plumb/kernels/int8_activations.h"
#include "plumb/kernels/row_dot.h"
#include "plumb/kernels/scalar.h"
#include "plumb/kernels/thread_pool.h"
#include "plumb/kernels/weight_format.h"
#include "small_gemm/small_gemm.h"

namespace plumb::kernels {

// One thread pool only: plumb's (kernels/thread_pool.h). OpenBLAS always runs single-threaded, inside the
// pool's threads (see Gemm), because its own pthread pool and another pool's spinning workers starve each
// other: on 2 cores, letting both run made a 2-thread decode 30x slower than a 1-thread one.
void SetNumThreads(int n) {
  SetPoolThreads(n);
  openblas_set_num_threads(1);
}

int NumThreads() {
  return PoolThreads();
}

namespace {

// Rows [begin, end) of thread t's static, contiguous share of n rows: each thread streams its own slice of
// the matrix, and which thread computes a row never changes its bits.
void ThreadRows(int n, int t, int threads, int& begin, int& end) {
  const auto [b, e] = StaticShare(n, t, threads);
  begin = static_cast<int>(b);
  end = static_cast<int>(e);
}

// y[n] = W[n][k] · x, W row-major FP32. Each row is scalar::Dot; the vector RowDots computes the same bits
// 2.4x faster than the compiler's code for scalar::GemvRows (L2-resident, AVX2), which one thread needs to
// keep up with DRAM.
void F32Rows(const float* w, int k, int begin, int end, const float* x, float* y) {
  if (ActiveIsa() == Isa::kScalar) {
    scalar::GemvRows(w, x, y, k, begin, end);
  } else if (end > begin) {
    RowDots(GgmlType::F32, reinterpret_cast<const std::uint8_t*>(w + Extent(begin, k)),
            Extent(k, sizeof(float)), end - begin, x, k, y + begin);
  }
}

void GemvF32(const float* w, int n, int k, const float* x, float* y) {
  RunParallel([&](int t, int threads) {
    int begin = 0, end = 0;
    ThreadRows(n, t, threads, begin, end);
    F32Rows(w, k, begin, end, x, y);
  });
}

// y[begin .. end) of W · x with W's kernels in the active family: in the fast family the int8 ones over xq
// or the FMA ones over x where W has them, else the exact ones over x.
void GemvRows(const WeightMatrix& W, int begin, int end, const float* x, const Int8Activations& xq,
              float* y) {
  if (end <= begin) return;
  if (UsesInt8RowDots(W)) {
    KernelsFor(*W.format, ActiveIsa()).int8_row_dots(W, begin, end, xq, y);
  } else if (UsesFmaRowDots(W)) {
    KernelsFor(*W.format, ActiveIsa()).fma_row_dots(W, begin, end, x, y);
  } else if (W.IsF32()) {
    F32Rows(reinterpret_cast<const float*>(W.data), W.cols, begin, end, x, y);
  } else {
    KernelsFor(*W.format, ActiveIsa()).row_dots(W, begin, end, x, y);
  }
}

// The weight rows each cblas_sgemm call of a GEMM covers: a grid of tiles fixed by W's shape and the
// machine, which the threads take one at a time. Not a share per thread: OpenBLAS's sgemm does not round a
// column the same wherever it falls in a call (its edge kernels sum in another order; on 0.3.21, splitting
// 1536 columns at 768 changed 3% of the outputs), so call bounds that followed --threads, or the pool running
// a region on the caller alone on a busy host, changed the logits, and a greedy answer with them. A tile is
// at most kTileBytes of FP32 rows: every call re-reads and packs all of X, so few, large tiles (64-row tiles
// at k = 14336 made the packed GEMM 0.69x sgemm's rate at P = 512, 8 MiB ones 0.93x; a grid of 8 tiles
// where 2 threads had one share each cost pp512 at 1B about 10%). And there are ProcessorCount() tiles
// where W has the rows, one for each thread the machine can run; a multiple of 16 rows (OpenBLAS's
// micro-tiles).
int GemmTileRows(int n, int k) {
  constexpr std::size_t kTileBytes = std::size_t{8} << 20;
  constexpr int kAlign = 16;
  static const int tiles = ProcessorCount();
  const auto row_bytes = sizeof(float) * static_cast<std::size_t>(k);
  const int by_bytes = static_cast<int>(kTileBytes / row_bytes) / kAlign * kAlign;
  const int by_count = (n + tiles - 1) / tiles;
  return std::max(kAlign, std::min(by_bytes, (by_count + kAlign - 1) / kAlign * kAlign));
}

// Y[m][n] = X[m][k] · W[n][k]ᵀ, all row-major FP32, with W's rows in GemmTileRows tiles. On the thread that
// multiplies rows r0 .. r0 + rows − 1, tile(r0, rows) returns them as FP32 (W's own rows, or rows it decoded
// into a buffer of that thread's), and finish(r0, rows) runs once their columns of Y are written.
template <class Tile, class Finish>
void TiledSgemm(const float* X, int m, int n, int k, float* Y, Tile&& tile, Finish&& finish) {
  static const bool blas_single_threaded = (openblas_set_num_threads(1), true);  // the pool's threads split
  (void)blas_single_threaded;
  const int tile_rows = GemmTileRows(n, k);
  ParallelForDynamic((n + tile_rows - 1) / tile_rows, [&](std::int64_t i, int) {
    const int r0 = static_cast<int>(i) * tile_rows;
    const int rows = std::min(tile_rows, n - r0);
    const float* w = tile(r0, rows);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, rows, k, 1.0f, X, k, w, k, 0.0f, Y + r0, n);
    finish(r0, rows);
  });
}

void GemmF32(const float* X, int m, const float* w, int n, int k, float* Y) {
  TiledSgemm(
      X, m, n, k, Y, [&](int r0, int) { return w + Extent(r0, k); }, [](int, int) {});
}

}  // namespace

void Gemv(const MatrixF32& W, const float* x, float* y) {
  GemvF32(W.values.data(), W.rows, W.cols, x, y);
}

void Gemm(const float* X, int m, const MatrixF32& W, float* Y) {
  GemmF32(X, m, W.values.data(), W.rows, W.cols, Y);
}

void Gemv(const WeightMatrix& W, const float* x, float* y) {
  const GemvOutput one{&W, y};
  GemvShared({&one, 1}, x);
}

// The threads split the matrices' rows taken together in contiguous chunks (below); a row's bits never
// depend on which thread computes it. The fast family's x is quantized once, on the calling thread, into its
// scratch, which every thread reads.
void GemvShared(std::span<const GemvOutput> outputs, const float* x) {
  if (outputs.empty()) return;
  thread_local Int8Activations scratch;
  Int8Activations& xq = scratch;  // a reference, so the pool's threads below share this thread's copy
  const bool any_int8 =
      std::any_of(outputs.begin(), outputs.end(), [](const GemvOutput& o) { return UsesInt8RowDots(*o.W); });
  if (any_int8) QuantizeActivations(x, outputs[0].W->cols, xq);
  GemvShared(outputs, x, xq);
}

void GemvShared(std::span<const GemvOutput> outputs, const float* x, const Int8Activations& xq) {
  if (outputs.empty()) return;
  const int k = outputs[0].W->cols;
  int total_rows = 0;
  for (const GemvOutput& o : outputs) {
    if (o.W->cols != k)
      throw MakeError("GemvShared: a matrix of ", o.W->cols, " columns beside one of ", k, " (one input x)");
    if (UsesInt8RowDots(*o.W) && xq.n != k)
      throw MakeError("GemvShared: x quantized with ", xq.n, " elements for a matrix of ", k, " columns");
    total_rows += o.W->rows;
  }
  // The rows taken together go out in chunks, one at a time to whichever thread asks next: a thread that
  // starts late or runs slower (its core shared with another process, or a busier one) takes fewer, where
  // static equal shares made the region wait for it. At 1B sizes on 2 cores, that wait cost more than the
  // second thread gave (docs/performance.md, "Threads that scale"). About kChunksPerThread chunks a thread,
  // each a multiple of kChunkAlign rows (the row kernels' 4-row groups) and at least kMinChunkRows.
  constexpr int kChunksPerThread = 8, kChunkAlign = 4, kMinChunkRows = 16;
  const int threads = NumThreads();
  const int chunk_rows =
      std::max(kMinChunkRows,
               (total_rows / (threads * kChunksPerThread) + kChunkAlign - 1) / kChunkAlign * kChunkAlign);
  const int chunks = (total_rows + chunk_rows - 1) / chunk_rows;
  ParallelForDynamic(chunks, [&](std::int64_t chunk, int) {
    const int begin = static_cast<int>(chunk) * chunk_rows;
    const int end = std::min(total_rows, begin + chunk_rows);
    int first = 0;  // output i's first row in the concatenation
    for (const GemvOutput& o : outputs) {
      const int rows = o.W->rows;
      GemvRows(*o.W, std::clamp(begin - first, 0, rows), std::clamp(end - first, 0, rows), x, xq, o.y);
      first += rows;
    }
  });
}

namespace {

// Y[m][W.rows] with the fast family's int8 kernels (W must have them): each row of X quantized once, then
// the threads split W's rows as Gemv does, and each walks its share kTile rows at a time, taking every row of
// X over those weight rows while they are in L1: the format's int8_gemm, which prepares each weight block
// once for several rows of X, or where it has none its int8_row_dots per row. Each Y row is bitwise Gemv's
// for that row alone: int8_gemm's contract, or the same kernel over the same rows and the same quantized x.
void Int8GemvBatch(const WeightMatrix& W, const float* X, int m, float* Y) {
  const int n = W.rows;
  const int k = W.cols;
  thread_local std::vector<Int8Activations> scratch;
  std::vector<Int8Activations>& xq = scratch;  // a reference, so the pool's threads share this thread's
  if (xq.size() < static_cast<std::size_t>(m)) xq.resize(m);
  for (int i = 0; i < m; ++i) QuantizeActivations(X + Extent(i, k), k, xq[i]);
  const FormatKernels kernels = KernelsFor(*W.format, ActiveIsa());
  // 16 rows of a 1536-column Q4_1 matrix are 15 KiB: they stay in L1 while every row of X passes over them.
  constexpr int kTile = 16;
  RunParallel([&](int t, int threads) {
    int begin = 0, end = 0;
    ThreadRows(n, t, threads, begin, end);
    for (int r0 = begin; r0 < end; r0 += kTile) {
      const int r1 = std::min(r0 + kTile, end);
      if (kernels.int8_gemm != nullptr) {
        kernels.int8_gemm(W, r0, r1, xq.data(), m, Y, static_cast<std::size_t>(n));
      } else {
        for (int i = 0; i < m; ++i) kernels.int8_row_dots(W, r0, r1, xq[i], Y + Extent(i, n));
      }
    }
  });
}

// Whether Gemm of W runs its format's int8 panels: the fast family's int8 kernels, and a panel kernel for W.
bool UsesInt8Panels(const WeightMatrix& W) {
  return UsesInt8RowDots(W) && KernelsFor(*W.format, ActiveIsa()).int8_panel_gemm != nullptr;
}

// Y[m][W.rows] on the format's int8 panels (W must have them: UsesInt8Panels), each Y row bitwise Gemv's
// for that row alone (int8_panel_gemm's contract). X's rows are quantized once, by the pool, with the group
// sums the panels take; then the pool hands out tiles of weight rows, each repacked once by the thread that
// takes it and multiplied with every row of X. All of X passes each tile, so larger tiles read X fewer
// times: a tile is as many rows as keep its panel near 192 KiB (a core's L2 holds it beside X's rows in
// flight; 64 rows at 2048 columns, 32 at 8192), from 32 to 128 rows, and no more than leave 4 tiles per
// thread, so a late thread takes fewer.
void Int8PanelGemm(const WeightMatrix& W, const float* X, int m, float* Y) {
  const int n = W.rows;
  const int k = W.cols;
  constexpr int kPanelBytes = 192 << 10, kMinTileRows = 32, kMaxTileRows = 128, kTilesPerThread = 4;
  const int by_bytes = kPanelBytes / (k + k / 4) / 16 * 16;  // about 1.25 bytes a weight: codes, factors
  const int by_threads = n / (kTilesPerThread * NumThreads()) / 16 * 16;
  const int tile_rows = std::max(kMinTileRows, std::min({kMaxTileRows, by_bytes, by_threads}));
  thread_local std::vector<Int8Activations> scratch;
  std::vector<Int8Activations>& xq = scratch;  // a reference, so the pool's threads share this thread's
  if (xq.size() < static_cast<std::size_t>(m)) xq.resize(m);
  ParallelFor(m, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      QuantizeActivations(X + Extent(i, k), k, xq[i]);
      AddGroupSums(xq[i]);
    }
  });
  const Int8GemmFn gemm = KernelsFor(*W.format, ActiveIsa()).int8_panel_gemm;
  const int tiles = (n + tile_rows - 1) / tile_rows;
  ParallelForDynamic(tiles, [&](std::int64_t tile, int) {
    const int r0 = static_cast<int>(tile) * tile_rows;
    gemm(W, r0, std::min(n, r0 + tile_rows), xq.data(), m, Y, static_cast<std::size_t>(n));
  });
}

// Y[m][W.rows] with the fast family's FMA kernels (W must have them), each Y row bitwise Gemv's for that row
// alone, walked as Int8GemvBatch walks its rows.
void FmaGemvBatch(const WeightMatrix& W, const float* X, int m, float* Y) {
  const int n = W.rows;
  const int k = W.cols;
  const RowDotsFn dots = KernelsFor(*W.format, ActiveIsa()).fma_row_dots;
  constexpr int kTile = 16;  // 16 F16 rows of 1536 columns: 48 KiB, in L2 while every row of X passes
  RunParallel([&](int t, int threads) {
    int begin = 0, end = 0;
    ThreadRows(n, t, threads, begin, end);
    for (int r0 = begin; r0 < end; r0 += kTile) {
      const int r1 = std::min(r0 + kTile, end);
      for (int i = 0; i < m; ++i) dots(W, r0, r1, X + Extent(i, k), Y + Extent(i, n));
    }
  });
}

}  // namespace

void Gemm(const float* X, int m, const WeightMatrix& W, float* Y) {
  const int n = W.rows;
  const int k = W.cols;
  const bool f32 = W.IsF32();
  if (m <= 0 || n <= 0) return;
  if (m == 1 && (!f32 || UsesFmaRowDots(W))) {  // one row: the GEMV's fused decode and dot beat a tile first
    Gemv(W, X, Y);
    return;
  }
  // In the fast family a matrix with int8 kernels runs them for every number of rows, so that each row is
  // bitwise its Gemv whatever else is in the call: a prompt gives the same logits prefilled whole, in
  // chunks, after a cached prefix or beside other sequences. Few rows take the row dots per row, more the
  // int8 panels, which repack W once for all of them (kInt8PanelMinRows: where they pay, prefill_gemm_bench).
  if (UsesInt8RowDots(W)) {
    if (m < kInt8PanelMinRows || !UsesInt8Panels(W)) return Int8GemvBatch(W, X, m, Y);
    return Int8PanelGemm(W, X, m, Y);
  }
  // A float matrix in the fast family, on a CPU with BF16 dot products: x and W rounded to BF16, FP32 sums
  // (bf16_panel.h), twice an FP32 FMA's products per instruction.
  if (m >= kBf16PanelMinRows && bf16::PanelsRun(W)) return bf16::PanelGemm(W, X, m, Y);
  // Decode batches (a few to a few dozen rows): each weight tile decoded once into L2 and multiplied with
  // every row by plumb's register-blocked FMA kernel (small_gemm.h, which states its order). SmolLM2 Q4_1,
  // one decode step of 16 sequences: see docs/performance.md, "Batched decode".
  if (m <= small_gemm::kMaxRows) {
    small_gemm::Multiply(X, m, W, Y, small_gemm::Order::kFused);
    return;
  }
  if (f32) {
    GemmF32(X, m, reinterpret_cast<const float*>(W.data), n, k, Y);
    return;
  }
  // Prefill: each tile of W's rows decoded into FP32 (small_gemm's decoders, exact), then multiplied with
  // cblas_sgemm (TiledSgemm's grid); the row scale (FP8's) multiplies each finished dot product, as in the
  // GEMV (and a GPU epilogue).
  const DecodeRowsFn decode = KernelsFor(*W.format, ActiveIsa()).decode_rows;
  const int tile_rows = GemmTileRows(n, k);
  TiledSgemm(
      X, m, n, k, Y,
      [&](int r0, int rows) {
        // [tile_rows][k] decoded rows, per thread and kept between calls (a fresh 8 MiB vector per call
        // page-faulted on every projection of every layer); grown only when a larger tile is first needed.
        thread_local std::vector<float> tile;
        if (tile.size() < Extent(tile_rows, k)) tile.resize(Extent(tile_rows, k));
        decode(W, r0, rows, tile.data());
        return tile.data();
      },
      [&](int r0, int rows) { ApplyRowScales(W, r0, rows, Y, m, static_cast<std::size_t>(n)); });
}

bool UsesBf16Panels(const WeightMatrix& W) {
  return bf16::PanelsRun(W);
}

bool Bf16PanelsAvailable() {
  return bf16::PanelsAvailable();
}

const char* Bf16PanelsKind() {
  return bf16::ActiveSums() == bf16::Sums::kTileBlocks ? "AMX-BF16 tiles" : "AVX512-BF16";
}

std::vector<std::string> DeclaredAllowances(KernelFamily family) {
  if (family == KernelFamily::kExact) return {};
  std::vector<std::string> allow = {"int8_activations"};
  if (Bf16PanelsAvailable()) allow.push_back("bf16_activations");
  return allow;
}

void GemvBatch(const WeightMatrix& W, const float* X, int rows, float* Y) {
  if (rows <= 0 || W.rows <= 0) return;
  if (rows == 1) {  // the definition itself, without decoding tiles: bitwise the same, and a decode's speed
    Gemv(W, X, Y);
    return;
  }
  if (UsesInt8RowDots(W)) return Int8GemvBatch(W, X, rows, Y);  // the fast family's Gemv, row by row
  if (UsesFmaRowDots(W)) return FmaGemvBatch(W, X, rows, Y);
  // Each weight tile decoded once (exactly: DequantizeRow / DecodePackedRow's values) and dotted with every
  // row of X in scalar::Dot's order, the FP8 scale after the dot: each Y row is bitwise Gemv's, whatever the
  // other rows, their number or the thread count (small_gemm.h).
  small_gemm::Multiply(X, rows, W, Y, small_gemm::Order::kDefinition);
}

void DequantizeRowOf(const WeightMatrix& W, int r, float* out) {
  DecodeRowsOf(W, r, 1, out);
  if (W.format->row_scale != nullptr) {
    // A row as a vector of its own (the token embedding): each element q·scale, rounded to FP32 once.
    const float scale = W.format->row_scale(W, r);
    for (int c = 0; c < W.cols; ++c) out[c] = out[c] * scale;
  }
}

void RmsNorm(const float* x, const float* weight, float* out, int rows, int n, float eps) {
  ParallelFor(rows, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const std::size_t offset = Extent(r, n);
      scalar::RmsNorm(x + offset, weight, out + offset, n, eps);
    }
  });
}

namespace {

// A gated activation (exp_kernels.h's GatedFn) over n elements, the pool over chunks of 4096.
void GatedInChunks(GatedFn gated, const float* gate, const float* up, float* out, std::int64_t n) {
  constexpr std::int64_t kChunk = 4096;
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  ParallelFor(chunks, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t c = first; c < last; ++c) {
      const std::int64_t begin = c * kChunk;
      const std::int64_t count = (n - begin < kChunk) ? n - begin : kChunk;
      gated(gate + begin, up + begin, out + begin, static_cast<int>(count));
    }
  });
}

}  // namespace

void SwiGlu(const float* gate, const float* up, float* out, std::int64_t n) {
  GatedInChunks(ActiveSwiGlu(), gate, up, out, n);  // scalar::SwiGlu's bits (exp_kernels.h)
}

void SoftCap(float* x, std::size_t n, float cap) {
  constexpr std::size_t kChunk = 1 << 20;  // scalar::SoftCap takes an int count
  for (std::size_t i = 0; i < n; i += kChunk)
    scalar::SoftCap(x + i, static_cast<int>(std::min(kChunk, n - i)), cap);
}

void GeluTanhGlu(const float* gate, const float* up, float* out, std::int64_t n) {
  GatedInChunks(ActiveGeluTanhGlu(), gate, up, out, n);  // scalar::GeluTanhGlu's bits
}

}  // namespace plumb::kernels
