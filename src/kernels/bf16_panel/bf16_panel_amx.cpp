// The BF16 panels with AMX-BF16 (bf16_panel.h, the tiles' sums): one tdpbf16ps multiplies 16 weight rows by
// 16 x rows over 16 pairs of k, 256 outputs' worth of 32 products each, where vdpbf16ps takes 16 outputs'
// 2 products. The weights are the first operand (A: a tile row is a weight row's 16 pairs, 64 bytes), staged
// per task as contiguous 1 KiB tiles (a GGUF BF16 row's words copied as stored, other formats decoded and
// rounded). x is the second operand (B: tile row p holds pair p of 16 x rows), which is the panels' layout
// (Panel), packed once per call. Each output tile is then weight rows × x rows, transposed into Y at the end.
//
// Blocking: 2 × 2 output tiles (tmm0-3) stay in the tiles while a chunk of k runs; A in tmm4-5, B in tmm6-7,
// so each 16-pair block costs 4 tile loads for 4 products. k is cut into chunks of kChunkBlocks blocks, the
// outputs carried through a scratch in tile form between chunks (the definition's acc, exact in memory): a
// chunk of every x row (m KiB) then stays in L2 while all of a task's weight rows pass over it.
// Bitwise TileDot (fma_family_test, Bf16Panels.GemmIsBitwiseTheDefinition).
#include "bf16_panel.h"

#if defined(__x86_64__)

#include "../simd/amx_tile_config.h"
#include "../simd/avx512_intrinsics.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bf16_panel_avx512.h"
#include "plumb/core/extent.h"
#include "plumb/formats/dtype.h"
#include "plumb/kernels/isa.h"
#include "plumb/kernels/kernels.h"
#include "plumb/kernels/thread_pool.h"
#include "plumb/kernels/weight_format.h"

#define PLUMB_AMX_BF16 \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")))

namespace plumb::kernels::bf16 {
namespace {

constexpr int kTile = 16;         // a tile's rows, and its depth in pairs (64 bytes a row)
constexpr int kTileWords = 256;   // one tile: 16 rows of 16 words
constexpr int kChunkBlocks = 16;  // 16-pair blocks of k per pass over the x rows: m KiB of x in L2
constexpr int kTaskRows = 128;    // weight rows per task, fewer where the tasks would not go round

// All eight tiles 16 rows of 64 bytes.
AmxTileConfig FullTiles() {
  AmxTileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.colsb[t] = 64;
    config.rows[t] = kTile;
  }
  return config;
}

// A 64-byte aligned window of words inside a vector that grows as needed.
struct AlignedWords {
  std::vector<std::uint32_t> storage;
  std::uint32_t* Get(std::size_t words) {
    if (storage.size() < words + 16) storage.resize(words + 16);
    const auto address = reinterpret_cast<std::uintptr_t>(storage.data());
    return storage.data() + ((64 - address % 64) % 64) / 4;
  }
};

// One chunk of k for weight groups (w0, w1) against x groups (x0, x1): the 2 × 2 output tiles c[a][b] at
// c00 (a = 0) and c10 (a = 1), b = 1 a tile after b = 0, loaded from there (zeroed when `first`) and stored
// back. Without the second weight or x group, its tiles are neither computed nor stored. The tile numbers are
// immediates, hence the two flags as template arguments.
template <bool kTwoW, bool kTwoX>
PLUMB_AMX_BF16 void Chunk(const std::uint32_t* w0, const std::uint32_t* w1, const std::uint32_t* x0,
                          const std::uint32_t* x1, int blocks, float* c00, float* c10, bool first) {
  // The tiles read memory behind the compiler's back: every store to it is done before this.
  __asm__ volatile("" ::: "memory");
  if (first) {
    _tile_zero(0);
    if (kTwoX) _tile_zero(1);
    if (kTwoW) _tile_zero(2);
    if (kTwoW && kTwoX) _tile_zero(3);
  } else {
    _tile_loadd(0, c00, 64);
    if (kTwoX) _tile_loadd(1, c00 + kTileWords, 64);
    if (kTwoW) _tile_loadd(2, c10, 64);
    if (kTwoW && kTwoX) _tile_loadd(3, c10 + kTileWords, 64);
  }
  for (int b = 0; b < blocks; ++b) {
    _tile_loadd(4, w0 + kTileWords * b, 64);
    _tile_loadd(6, x0 + kTileWords * b, 64);
    _tile_dpbf16ps(0, 4, 6);
    if (kTwoX) {
      _tile_loadd(7, x1 + kTileWords * b, 64);
      _tile_dpbf16ps(1, 4, 7);
    }
    if (kTwoW) {
      _tile_loadd(5, w1 + kTileWords * b, 64);
      _tile_dpbf16ps(2, 5, 6);
      if (kTwoX) _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, c00, 64);
  if (kTwoX) _tile_stored(1, c00 + kTileWords, 64);
  if (kTwoW) _tile_stored(2, c10, 64);
  if (kTwoW && kTwoX) _tile_stored(3, c10 + kTileWords, 64);
  __asm__ volatile("" ::: "memory");  // ... and the scratch is read only after the tiles wrote it
}

using ChunkFn = void (*)(const std::uint32_t*, const std::uint32_t*, const std::uint32_t*,
                         const std::uint32_t*, int, float*, float*, bool);

ChunkFn ChunkFor(bool two_w, bool two_x) {
  if (two_w) return two_x ? Chunk<true, true> : Chunk<true, false>;
  return two_x ? Chunk<false, true> : Chunk<false, false>;
}

// Output tile c (weight row j's 16 x rows at c + 16j) into Y: x row i of the tile is Y's row y0 + i
// (i < x_rows), weight row j its column r0 + j (j < w_rows).
PLUMB_AMX_BF16 void StoreTransposed(const float* c, int x_rows, int w_rows, float* Y, std::size_t ldy,
                                    std::size_t y0, int r0) {
  __m512i r[kTile];
  for (int j = 0; j < kTile; ++j) r[j] = _mm512_load_si512(c + kTile * j);
  Transpose16(r);
  const __mmask16 valid = static_cast<__mmask16>((1u << w_rows) - 1);
  for (int i = 0; i < x_rows; ++i)
    _mm512_mask_storeu_ps(Y + Extent(y0 + i, ldy) + r0, valid, _mm512_castsi512_ps(r[i]));
}

struct Call {
  const WeightMatrix& W;
  const Panel& xs;  // X's rows as panels: groups of 16 x rows, pairs padded to whole blocks
  int m, pairs, blocks;
  DecodeRowsFn decode;
  void (*round_row)(const float* x, int k, std::uint32_t* out);
  float* Y;
};

// Row j of every block of group g's tiles from the row's words (`pairs` of them; null: +0).
PLUMB_AMX_BF16 void ScatterRow(const std::uint32_t* row, int pairs, int blocks, std::uint32_t* group, int j) {
  for (int q = 0; q < blocks; ++q) {
    std::uint32_t* out = group + Extent(q, kTileWords) + kTile * j;
    if (row == nullptr) {
      _mm512_store_si512(out, _mm512_setzero_si512());
      continue;
    }
    const int n = std::min(kTile, pairs - kTile * q);
    const __mmask16 valid = static_cast<__mmask16>(n >= kTile ? 0xFFFFu : (1u << n) - 1);
    _mm512_store_si512(out, _mm512_maskz_loadu_epi32(valid, row + kTile * q));
  }
}

// The task's weight rows as tiles: group g's block q (16 rows × 16 pairs, 1 KiB) at Extent(g · blocks + q,
// kTileWords), row j's 16 words at 16j, pairs past the row and rows past the matrix +0. A tile is then one
// contiguous KiB: read in place, 16 rows at the matrix's stride would touch 16 pages per tile.
PLUMB_AMX_BF16 void StageRows(const Call& call, int r0, int rows, std::uint32_t* stage) {
  const WeightMatrix& W = call.W;
  const int k = W.cols, w_groups = (rows + kTile - 1) / kTile;
  // A GGUF BF16 row of even length is its words as stored (docs/formats.md, "BF16 panels").
  const bool stored = W.format == &kGgmlFormat && W.type == GgmlType::BF16 && k % 2 == 0;
  thread_local std::vector<float> decoded;
  thread_local std::vector<std::uint32_t> words;
  if (words.size() < static_cast<std::size_t>(call.pairs)) words.resize(static_cast<std::size_t>(call.pairs));
  for (int g = 0; g < w_groups; ++g) {
    const int first = r0 + kTile * g, count = std::min(kTile, rows - kTile * g);
    std::uint32_t* group = stage + Extent(g, call.blocks, kTileWords);
    if (!stored) {
      if (decoded.size() < Extent(kTile, k)) decoded.resize(Extent(kTile, k));
      call.decode(W, first, count, decoded.data());
    }
    for (int j = 0; j < kTile; ++j) {
      const std::uint32_t* row = nullptr;
      if (j < count && stored) {
        row = reinterpret_cast<const std::uint32_t*>(W.Row(first + j));
      } else if (j < count) {
        call.round_row(decoded.data() + Extent(j, k), k, words.data());
        row = words.data();
      }
      ScatterRow(row, call.pairs, call.blocks, group, j);
    }
  }
}

// Y's columns r0 .. r0 + rows − 1, every x row.
PLUMB_AMX_BF16 void RunTask(const Call& call, int r0, int rows) {
  const WeightMatrix& W = call.W;
  const int w_groups = (rows + kTile - 1) / kTile, x_groups = call.xs.groups;
  thread_local AlignedWords stage_words, c_words;
  std::uint32_t* stage = stage_words.Get(Extent(w_groups, call.blocks, kTileWords));
  StageRows(call, r0, rows, stage);
  float* c = reinterpret_cast<float*>(c_words.Get(Extent(w_groups * x_groups, kTileWords)));
  const AmxTileConfig config = FullTiles();
  _tile_loadconfig(&config);
  for (int q0 = 0; q0 < call.blocks; q0 += kChunkBlocks) {
    const int blocks = std::min(kChunkBlocks, call.blocks - q0);
    for (int g = 0; g < w_groups; g += 2) {
      const bool two_w = g + 1 < w_groups;
      const std::uint32_t* w0 = stage + Extent(Extent(g, call.blocks) + q0, kTileWords);
      const std::uint32_t* w1 = two_w ? w0 + Extent(call.blocks, kTileWords) : nullptr;
      for (int b = 0; b < x_groups; b += 2) {
        const bool two_x = b + 1 < x_groups;
        const std::uint32_t* x0 = call.xs.Group(b) + Extent(q0, kTileWords);
        const std::uint32_t* x1 = two_x ? call.xs.Group(b + 1) + Extent(q0, kTileWords) : nullptr;
        float* c00 = c + Extent(Extent(g, x_groups) + b, kTileWords);
        ChunkFor(two_w, two_x)(w0, w1, x0, x1, blocks, c00, c00 + Extent(x_groups, kTileWords), q0 == 0);
      }
    }
  }
  _tile_release();
  const std::size_t ldy = static_cast<std::size_t>(W.rows);
  for (int g = 0; g < w_groups; ++g) {
    for (int b = 0; b < x_groups; ++b) {
      StoreTransposed(c + Extent(Extent(g, x_groups) + b, kTileWords), std::min(kTile, call.m - kTile * b),
                      std::min(kTile, rows - kTile * g), call.Y, ldy, static_cast<std::size_t>(kTile) * b,
                      r0 + kTile * g);
    }
  }
  ApplyRowScales(W, r0, rows, call.Y, call.m, ldy);
}

void GemmAmx(const WeightMatrix& W, const float* X, int m, float* Y) {
  const Kernels avx512 = Avx512Bf16Kernels();
  const int n = W.rows, k = W.cols, pairs = (k + 1) / 2;
  const int blocks = (pairs + kTile - 1) / kTile;
  thread_local Panel xs_scratch;
  Panel& xs = xs_scratch;  // a reference, so the pool's threads share this thread's
  xs.Resize((m + kTile - 1) / kTile, blocks * kTile);
  ParallelFor(xs.groups, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t g = begin; g < end; ++g) {
      const int i0 = static_cast<int>(g) * kTile;
      avx512.pack_group(X + Extent(i0, k), std::min(kTile, m - i0), k, xs, static_cast<int>(g));
    }
  });
  // Enough tasks that the pool's threads each get several, so that one slower thread does not hold the rest.
  int task_rows = kTaskRows;
  while (task_rows > 2 * kTile && (n + task_rows - 1) / task_rows < 4 * NumThreads()) task_rows -= 2 * kTile;
  const Call call{W, xs, m, pairs, blocks, KernelsFor(*W.format, ActiveIsa()).decode_rows, avx512.round_row,
                  Y};
  ParallelForDynamic((n + task_rows - 1) / task_rows, [&](std::int64_t task, int) {
    const int r0 = static_cast<int>(task) * task_rows;
    RunTask(call, r0, std::min(task_rows, n - r0));
  });
}

// The probe cases: a BF16 matrix of 40 rows (two whole groups read as stored, one partial group staged)
// and 96 columns (3 blocks), against 20 x rows; rows of three kinds, magnitudes over 2^±20 (the two chains
// and their join show in the low bits), around 2^-63 (products and sums at the smallest normal: the
// flushes) and mixed with zeros of both signs.
std::string ProbeTiles() {
  constexpr int kRows = 40, kCols = 96, kM = 20;
  std::mt19937 random(20261207);
  const auto value = [&](int kind) -> float {
    const int exponent =
        kind == 0 ? static_cast<int>(random() % 41) - 20 : -63 + static_cast<int>(random() % 9) - 4;
    const float magnitude = std::ldexp(1.0f + static_cast<float>(random() % 128) / 128.0f, exponent);
    const float v = (random() & 1) ? -magnitude : magnitude;
    if (kind == 2 && random() % 3 == 0) return (random() & 1) ? -0.0f : 0.0f;
    return v;
  };
  std::vector<std::uint8_t> bytes;
  for (int r = 0; r < kRows; ++r) {
    for (int e = 0; e < kCols; ++e) {
      const std::uint16_t b = F32ToBF16(value(r % 3));
      bytes.push_back(static_cast<std::uint8_t>(b & 0xFF));
      bytes.push_back(static_cast<std::uint8_t>(b >> 8));
    }
  }
  const WeightMatrix W = WeightMatrix::FromBytes(GgmlType::BF16, kRows, kCols, std::move(bytes));
  std::vector<float> X(static_cast<std::size_t>(kM) * kCols);
  for (int i = 0; i < kM; ++i)
    for (int e = 0; e < kCols; ++e) X[Extent(i, kCols) + e] = value(i % 3);
  std::vector<float> got(static_cast<std::size_t>(kM) * kRows), want(got.size());
  GemmAmx(W, X.data(), kM, got.data());
  Bf16Rows xb;
  RoundRows(X.data(), kM, kCols, xb);
  GemmDefinition(W, 0, kRows, xb, want.data(), kRows, Sums::kTileBlocks);
  int differ = 0;
  for (std::size_t e = 0; e < got.size(); ++e) differ += std::memcmp(&got[e], &want[e], sizeof(float)) != 0;
  if (differ == 0) return "";
  return "this CPU's tdpbf16ps does not compute the tiles' definition (docs/formats.md, \"BF16 tiles\"): " +
         std::to_string(differ) + " of " + std::to_string(got.size()) + " probe outputs differ";
}

}  // namespace

GemmFn AmxBf16Gemm() {
  return HasAmxBf16() ? GemmAmx : nullptr;
}

const std::string& TileSumsMismatch() {
  static const std::string why = HasAmxBf16() ? ProbeTiles() : AmxBf16Missing();
  return why;
}

}  // namespace plumb::kernels::bf16

#else

namespace plumb::kernels::bf16 {
GemmFn AmxBf16Gemm() {
  return nullptr;
}
const std::string& TileSumsMismatch() {
  static const std::string why = "not an x86-64 build";
  return why;
}
}  // namespace plumb::kernels::bf16

#endif
