// CausalAttention split by (row, KV heads): for a batch whose rows alone keep every thread busy (batched
// decode: 16 sequences and 3 KV heads are 48 pairs for 2 threads), each unit runs scalar::AttendOneHead's
// three steps for the query heads of its KV heads, one after the other, on data in L1/L2: the keys a tile of
// kTile positions at a time (decoded into a small per-thread buffer, f32 read in place) and scored, the
// softmax of each head, then the values the same way, summed into per-thread sums. One parallel region per
// call instead of attention.cpp's three per wave, no row's scores in a shared buffer, and every key and value
// decoded once per unit where the phases' staging went through a 128-position buffer per chunk.
// Which unit computes what, and the tile, never change a bit: each score is the definition's Dot (the same
// score kernels as attention.cpp), each softmax the definition's, each output element its own ascending sum.
#include "attention_by_head.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "attention_score.h"
#include "attention_values.h"
#include "plumb/core/extent.h"
#include "plumb/formats/kv_dtype.h"
#include "plumb/kernels/kv_decode.h"
#include "plumb/kernels/scalar.h"
#include "plumb/kernels/thread_pool.h"

namespace plumb::kernels {
namespace {

constexpr int kTile = 16;           // positions decoded and scored together (one paged block by default)
constexpr int kUnitsPerThread = 4;  // below this many units per thread attention.cpp's phases balance better

struct RowRef {
  int item, row;
};

// Per-calling-thread workspace, grown to the largest call and reused.
struct Workspace {
  std::vector<RowRef> rows;
  std::vector<float> buffers;  // [threads][per thread]: scores, staged rows, sums
};
Workspace& ThreadWorkspace() {
  thread_local Workspace workspace;
  return workspace;
}

std::int64_t RoundUp16(std::int64_t n) {
  return (n + 15) / 16 * 16;
}

struct UnitKernels {
  DecodeKvRowsFn decode;
  AccumulateFn accumulate;
};

// Calls fn(first, count, next, next_count) for tiles of positions [begin, end), ascending, none crossing a
// block: positions first .. first + count − 1, and the tile after it (next_count 0 at the end). A window's
// begin may fall inside a block: the first tile then ends at that block's end.
template <class Fn>
void ForEachTile(const KvLayerView& kv, int begin, int end, Fn&& fn) {
  const auto tile_at = [&](int t) { return std::min({kTile, kv.block_size - t % kv.block_size, end - t}); };
  int count = begin < end ? tile_at(begin) : 0;
  for (int t = begin; t < end; t += count, count = t < end ? tile_at(t) : 0) {
    const int next = t + count;
    fn(t, count, next, next < end ? tile_at(next) : 0);
  }
}

// The FP32 rows of KV head c of positions [t, t + count) of `data` (keys or values): the cache itself for
// f32, else decoded into `staging` ([count][head_dim]); returns the first row and sets the stride in bytes.
// Meanwhile asks for the rows of the next tile (the hardware prefetchers do not follow a jump to another
// block).
const std::uint8_t* TileRows(const KvLayerView& kv, const void* data, float scale, int c, int t, int count,
                             int next, int next_count, float* staging, DecodeKvRowsFn decode,
                             std::size_t& stride) {
  const auto element_bytes = static_cast<std::int64_t>(KvDtypeBytes(kv.dtype));
  const auto position_bytes = static_cast<std::size_t>(kv.position_stride * element_bytes);
  const auto row_bytes = static_cast<int>(kv.head_dim * element_bytes);
  const auto* bytes = static_cast<const std::uint8_t*>(data);
  const std::uint8_t* first = bytes + kv.Element(t, c) * element_bytes;
  if (next_count > 0) {
    // Every line a row touches: a row need not start on a line (an FP8 row of 64 bytes usually spans two).
    const std::uint8_t* ahead = bytes + kv.Element(next, c) * element_bytes;
    for (int i = 0; i < next_count; ++i) {
      const std::uint8_t* row = ahead + i * position_bytes;
      const auto offset = static_cast<int>(reinterpret_cast<std::uintptr_t>(row) % 64);
      PrefetchBytes(row - offset, row_bytes + offset);
    }
  }
  if (kv.dtype == KvDtype::kF32) {
    stride = position_bytes;
    return first;
  }
  decode(kv.dtype, first, position_bytes, count, kv.head_dim, scale, staging);
  stride = Extent(kv.head_dim, sizeof(float));
  return reinterpret_cast<const std::uint8_t*>(staging);
}

// One unit: query heads [c_begin · group, c_end · group) of `row` of `item`, over the row's positions
// [begin, end) (the window's, if any). scores: [heads][end − begin], position t at t − begin;
// staging: [kTile][head_dim]; sums: [heads][head_dim rounded up to kValueDims].
void AttendUnit(const AttentionItem& item, int row, int c_begin, int c_end, int n_heads, float* scores,
                float* staging, float* sums, const UnitKernels& k) {
  const KvLayerView& kv = item.kv;
  const int head_dim = kv.head_dim;
  const int group = n_heads / kv.n_kv_heads;
  const int begin = item.Begin(row), end = item.End(row), n = end - begin;
  const int heads = (c_end - c_begin) * group;
  const int h_begin = c_begin * group;  // the unit's first query head
  const float scale = item.rule.ScaleFor(head_dim);
  const float* q = item.q + (static_cast<std::int64_t>(row) * n_heads + h_begin) * head_dim;
  const ScoreRunFn score = ActiveScoreRun(head_dim);
  ForEachTile(kv, begin, end, [&](int t, int count, int next, int next_count) {
    for (int c = c_begin; c < c_end; ++c) {
      std::size_t stride = 0;
      const std::uint8_t* rows =
          TileRows(kv, kv.keys, kv.KScale(c), c, t, count, next, next_count, staging, k.decode, stride);
      const int g0 = (c - c_begin) * group;
      score(q + static_cast<std::int64_t>(g0) * head_dim, 1, group, head_dim, KeyRun{rows, stride, 0, count},
            scale, scores + static_cast<std::int64_t>(g0) * n + (t - begin), n);
    }
  });
  if (item.rule.softcap > 0.0f) scalar::SoftCap(scores, heads * n, item.rule.softcap);  // [heads][n]
  SoftmaxRows(scores, heads, n, n);

  const int padded = (head_dim + kValueDims - 1) / kValueDims * kValueDims;
  std::fill(sums, sums + static_cast<std::int64_t>(heads) * padded, 0.0f);
  ForEachTile(kv, begin, end, [&](int t, int count, int next, int next_count) {
    for (int c = c_begin; c < c_end; ++c) {
      std::size_t stride = 0;
      const std::uint8_t* rows =
          TileRows(kv, kv.values, kv.VScale(c), c, t, count, next, next_count, staging, k.decode, stride);
      const int h0 = (c - c_begin) * group;
      for (int d0 = 0; d0 < head_dim; d0 += kValueDims) {
        const int width = std::min(kValueDims, head_dim - d0);
        for (int g0 = 0; g0 < group; g0 += kHeadTile) {
          const int g_count = std::min(kHeadTile, group - g0);
          const float* p[kHeadTile];
          float* out[kHeadTile];
          for (int g = 0; g < g_count; ++g) {
            p[g] = scores + static_cast<std::int64_t>(h0 + g0 + g) * n;
            out[g] = sums + static_cast<std::int64_t>(h0 + g0 + g) * padded + d0;
          }
          k.accumulate(p, g_count, width, t - begin, count, rows + Extent(d0, sizeof(float)), stride, out);
        }
      }
    }
  });
  float* out_row = item.out + (static_cast<std::int64_t>(row) * n_heads + h_begin) * head_dim;
  for (int h = 0; h < heads; ++h) {
    std::copy(sums + static_cast<std::int64_t>(h) * padded,
              sums + static_cast<std::int64_t>(h) * padded + head_dim,
              out_row + static_cast<std::int64_t>(h) * head_dim);
  }
}

}  // namespace

bool AttendByKvHeads(std::span<const AttentionItem> items, int n_heads) {
  const int threads = NumThreads();
  std::int64_t rows = 0;
  int min_kv_heads = n_heads, max_positions = 0, max_head_dim = 0;
  for (const AttentionItem& item : items) {
    if (item.rows == 0) continue;
    rows += item.rows;
    min_kv_heads = std::min(min_kv_heads, item.kv.n_kv_heads);
    // A row attends to at least as many positions as the rows before it: the last row has the most.
    max_positions = std::max(max_positions, item.End(item.rows - 1) - item.Begin(item.rows - 1));
    max_head_dim = std::max(max_head_dim, item.kv.head_dim);
  }
  const std::int64_t wanted = static_cast<std::int64_t>(kUnitsPerThread) * threads;
  if (rows == 0 || rows * min_kv_heads < wanted) return false;
  // Each row's KV heads in `parts` units: whole rows where there are rows enough (a paged block read front to
  // back by one unit), else as few parts as give every thread kUnitsPerThread units.
  const int parts = static_cast<int>(std::min<std::int64_t>(min_kv_heads, (wanted + rows - 1) / rows));

  Workspace& ws = ThreadWorkspace();
  ws.rows.clear();
  for (std::size_t i = 0; i < items.size(); ++i) {
    for (int r = 0; r < items[i].rows; ++r) ws.rows.push_back({static_cast<int>(i), r});
  }
  // The most query heads a unit takes: a part of ceil(n_kv_heads / parts) KV heads of group query heads each.
  std::int64_t max_heads = 0;
  for (const AttentionItem& item : items) {
    if (item.rows == 0) continue;
    const int group = n_heads / item.kv.n_kv_heads;
    max_heads = std::max<std::int64_t>(max_heads, (item.kv.n_kv_heads + parts - 1) / parts * group);
  }
  const std::int64_t scores_floats = RoundUp16(max_heads * max_positions);
  const std::int64_t staging_floats = RoundUp16(static_cast<std::int64_t>(kTile) * max_head_dim);
  const std::int64_t sums_floats =
      RoundUp16(max_heads * ((max_head_dim + kValueDims - 1) / kValueDims * kValueDims));
  const std::int64_t per_thread = scores_floats + staging_floats + sums_floats;
  if (ws.buffers.size() < static_cast<std::size_t>(per_thread * threads)) {
    ws.buffers.resize(static_cast<std::size_t>(per_thread * threads));
  }
  const UnitKernels kernels{ActiveDecodeKvRows(), ActiveAccumulate()};
  const std::int64_t units = static_cast<std::int64_t>(ws.rows.size()) * parts;
  ParallelForDynamic(units, [&](std::int64_t unit, int t) {
    const RowRef& r = ws.rows[static_cast<std::size_t>(unit / parts)];
    const AttentionItem& item = items[static_cast<std::size_t>(r.item)];
    const int part = static_cast<int>(unit % parts);
    const int n_kv = item.kv.n_kv_heads;
    float* scores = ws.buffers.data() + t * per_thread;
    AttendUnit(item, r.row, part * n_kv / parts, (part + 1) * n_kv / parts, n_heads, scores,
               scores + scores_floats, scores + scores_floats + staging_floats, kernels);
  });
  return true;
}

}  // namespace plumb::kernels
