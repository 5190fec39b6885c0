// Causal GQA attention over a KvLayerView (include/plumb/kernels/kernels.h): scalar::AttendOneHead's
// arithmetic, reorganised so that every thread has work and the cache is read block by block, one
// definition for the contiguous and the paged KV layout (docs/kv-cache.md, "How attention reads the cache").

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "../exp/exp_kernels.h"
#include "attention_by_head.h"
#include "attention_score.h"
#include "attention_values.h"
#include "plumb/core/error.h"
#include "plumb/core/extent.h"
#include "plumb/formats/kv_dtype.h"
#include "plumb/kernels/kernels.h"
#include "plumb/kernels/kv_decode.h"
#include "plumb/kernels/row_dot.h"
#include "plumb/kernels/scalar.h"
#include "plumb/kernels/thread_pool.h"

namespace plumb::kernels {
namespace {

// AttendOneHead computes, for one query head, three things in turn: every score (a Dot per position), the
// softmax of the score row (a max, an exp per position, one left-to-right sum), and out[j] = Σ_t p_t·v_t[j]
// in ascending t, an independent sum for each j. None of them fixes which thread does what, so the kernel
// runs them as three parallel phases over a wave of query rows, each phase split along the axis that leaves
// the bits alone:
//   A (scores):  (row, kScoreChunk positions): the chunk's keys are read once, a block at a time and within
//                it eight positions at a time over every KV head (a paged block front to back), each key
//                dotted with the query heads sharing it (the definition's Dot);
//   B (softmax): (row, query head): the definition's softmax (SoftmaxRow);
//   C (values):  (row, a share of its value pieces, a piece being kValueDims columns of one KV head): the
//                share's columns staged kScoreChunk positions at a time, then each output element summed in
//                ascending t, kHeadTile heads' sums of a piece in registers.
// f16, bf16 and FP8 rows are converted to FP32 by DecodeKvRow (kernels/kv_decode.h, exact) as they are
// staged, so every dtype runs the same FP32 arithmetic.
// Batch-1 decode of SmolLM2 at context n thus has ceil(n / 128) units in A, 9 in B and one per thread in C,
// where the previous unit, a (row, KV head) pair, gave 3 units to 2 threads. A wave's score rows
// ([row][n_heads][positions]) stay under kWaveFloats, so a long prefill never holds all its scores at once.
// A batch whose rows alone give every thread several units (batched decode) takes another split, one unit
// per (row, KV heads) running all three steps itself: attention_by_head.cpp.
// A row with a sliding window attends to [begin, end) = [AttentionItem::Begin, End): every phase walks
// only those positions (chunks counted from begin, scores stored from begin), so a windowed decode at
// context 4096 with window 512 does an eighth of the work, and rows of one wave may start anywhere.
// Measured figures: docs/performance.md ("Batched decode and the paged KV cache").
constexpr int kScoreChunk = 128;  // positions per phase-A unit
// kValueDims (output elements per phase-C piece) and kHeadTile (query heads summed together):
// attention_values.h.
constexpr std::int64_t kWaveFloats = 1 << 18;  // score floats of one wave (1 MiB) unless one row needs more

// One query row of one item in the current wave, and where its units start in each phase.
struct WaveRow {
  const AttentionItem* item;
  int row;                     // within the item
  int begin, end;              // positions it attends to: [item->Begin(row), item->End(row))
  std::int64_t scores;         // offset of its [n_heads][end − begin] scores in the wave buffer
  std::int64_t first_unit[3];  // its first unit in phases A, B, C (prefix sums over the wave)

  int Positions() const { return end - begin; }  // a head's score row: position t at t − begin
};

// Per-calling-thread workspace: grows to the largest call seen and is reused, so steady-state decode
// allocates nothing.
struct Workspace {
  std::vector<WaveRow> rows;
  std::vector<float> scores;   // [wave rows][n_heads][positions of the row]
  std::vector<float> decoded;  // [threads][per thread]: phase A's decoded keys, phase C's sums and staging
};
Workspace& ThreadWorkspace() {
  thread_local Workspace workspace;
  return workspace;
}

void CheckItem(const AttentionItem& item, std::size_t index, int n_heads) {
  const KvLayerView& kv = item.kv;
  if (item.rows < 0 || item.first_pos < 0 || item.window < 0) {
    throw MakeError("attention item ", index, ": rows ", item.rows, ", first_pos ", item.first_pos,
                    " and window ", item.window, " must not be negative");
  }
  if (item.rows == 0) return;
  if (!item.q || !item.out || !kv.keys || !kv.values) {
    throw MakeError("attention item ", index, ": a query, output, key or value pointer is null");
  }
  if (kv.n_kv_heads <= 0 || n_heads % kv.n_kv_heads != 0 || kv.head_dim <= 0) {
    throw MakeError("attention item ", index, ": ", n_heads, " query heads cannot share ", kv.n_kv_heads,
                    " KV heads of dimension ", kv.head_dim);
  }
  if (kv.length < item.first_pos + item.rows) {
    throw MakeError("attention item ", index, ": rows at positions ", item.first_pos, "..",
                    item.first_pos + item.rows - 1, " need ", item.first_pos + item.rows,
                    " cached positions, the view holds ", kv.length);
  }
  if (kv.block_size <= 0 || static_cast<std::int64_t>(kv.block_table.size()) * kv.block_size <
                                static_cast<std::int64_t>(kv.length)) {
    throw MakeError("attention item ", index, ": block size ", kv.block_size, " and a block table of ",
                    kv.block_table.size(), " blocks cannot cover ", kv.length, " positions");
  }
}

int CeilDiv(int a, int b) {
  return (a + b - 1) / b;
}

// Phase C splits a row's value pieces (kValueDims columns of one KV head) among at most as many units as
// there are threads: fewer, longer units read longer stretches of each paged position. Which unit sums an
// output element never changes its bits, so this may depend on the thread count.
int ValueUnitsPerRow(const KvLayerView& kv) {
  return std::min(kv.n_kv_heads * CeilDiv(kv.head_dim, kValueDims), NumThreads());
}

// Units of each phase for one row (see the comment at the top).
void RowUnits(const WaveRow& w, int n_heads, std::int64_t units[3]) {
  const KvLayerView& kv = w.item->kv;
  units[0] = CeilDiv(w.Positions(), kScoreChunk);
  units[1] = n_heads;
  units[2] = ValueUnitsPerRow(kv);
}

// The row whose units of `phase` contain `unit`, and the unit's index within that row.
const WaveRow& FindRow(std::span<const WaveRow> rows, int phase, std::int64_t unit, std::int64_t& local) {
  const auto it = std::upper_bound(rows.begin(), rows.end(), unit, [phase](std::int64_t u, const WaveRow& w) {
    return u < w.first_unit[phase];
  });
  const WaveRow& w = *(it - 1);
  local = unit - w.first_unit[phase];
  return w;
}

// Calls fn(t0, count, first) for the runs of positions [begin, end) that lie in one block, in ascending
// order: positions t0 .. t0+count-1, whose rows (of KV head kv_head, in `data`) start at `first` and lie
// position_stride elements apart. The block table is read once per run, never per position.
template <class Fn>
void ForEachRun(const KvLayerView& kv, const void* data, int kv_head, int begin, int end, Fn&& fn) {
  const auto element_bytes = static_cast<std::int64_t>(KvDtypeBytes(kv.dtype));
  const auto* bytes = static_cast<const std::uint8_t*>(data);
  for (int t0 = begin; t0 < end;) {
    const int count = std::min(end - t0, kv.block_size - t0 % kv.block_size);
    fn(t0, count, bytes + kv.Element(t0, kv_head) * element_bytes);
    t0 += count;
  }
}

// Copies (f32) or decodes (DecodeKvRow, the head's scale) columns [col_begin, col_end) of positions
// [t0, t0 + count) of `data` (keys or values) into staging[i · width + col − col_begin], width =
// col_end − col_begin, column c · head_dim + j being element j of KV head c; and, position by position as it
// goes, asks for the same columns of positions [t0 + count, t0 + 2 · count) (up to n_ctx), the next stretch
// a unit will stage. The hardware prefetchers follow a stream within a page but not across a jump to
// another block (paged), nor to the next chunk of each KV head's stream (contiguous); a burst of a whole
// block's requests at once measured no faster than none.
void StageColumns(const KvLayerView& kv, const void* data, bool values, int t0, int count, int n_ctx,
                  int col_begin, int col_end, float* staging) {
  const int head_dim = kv.head_dim;
  const int width = col_end - col_begin;
  const auto element_bytes = static_cast<std::int64_t>(KvDtypeBytes(kv.dtype));
  const auto position_bytes = static_cast<std::int64_t>(kv.position_stride) * element_bytes;
  const auto* bytes = static_cast<const std::uint8_t*>(data);
  const int c_first = col_begin / head_dim;
  const int c_last = (col_end - 1) / head_dim;
  const int j_first = col_begin - c_first * head_dim;  // the first column's element within KV head c_first
  const DecodeKvRowFn decode = ActiveDecodeKvRow();
  // Where position t's columns start (KV head c_first, element j_first): the block table is read when a
  // block begins, never per position; the stretches may cross blocks.
  const auto columns_at = [&](int t) { return bytes + (kv.Element(t, c_first) + j_first) * element_bytes; };
  const std::uint8_t* from = nullptr;
  const std::uint8_t* ahead = nullptr;
  // NHD: the KV heads of a position are adjacent, so a unit's columns are one stretch, converted by one call
  // unless FP8's scale differs from head to head.
  const bool merged = kv.head_stride == head_dim && !IsFp8(kv.dtype);
  for (int i = 0; i < count; ++i) {
    const int t_ahead = t0 + count + i;
    if (t_ahead < n_ctx) {
      ahead = i == 0 || t_ahead % kv.block_size == 0 ? columns_at(t_ahead) : ahead + position_bytes;
    }
    from = i == 0 || (t0 + i) % kv.block_size == 0 ? columns_at(t0 + i) : from + position_bytes;
    float* to = staging + static_cast<std::int64_t>(i) * width;
    if (merged) {  // the unit's columns of a position are one stretch of memory
      if (t_ahead < n_ctx) PrefetchBytes(ahead, static_cast<int>(width * element_bytes));
      if (kv.dtype == KvDtype::kF32) {
        std::memcpy(to, from, Extent(width, sizeof(float)));
      } else {
        decode(kv.dtype, from, width, 1.0f, to);
      }
      continue;
    }
    for (int c = c_first; c <= c_last; ++c) {
      const int j0 = std::max(col_begin - c * head_dim, 0);
      const int j1 = std::min(col_end - c * head_dim, head_dim);
      // KV head c's element j0 lies (c − c_first) · head_stride + j0 − j_first elements after `from`.
      const std::int64_t offset = ((c - c_first) * kv.head_stride + j0 - j_first) * element_bytes;
      if (t_ahead < n_ctx) PrefetchBytes(ahead + offset, static_cast<int>((j1 - j0) * element_bytes));
      if (kv.dtype == KvDtype::kF32) {
        std::memcpy(to, from + offset, Extent(j1 - j0, sizeof(float)));
      } else {
        decode(kv.dtype, from + offset, j1 - j0, values ? kv.VScale(c) : kv.KScale(c), to);
      }
      to += j1 - j0;
    }
  }
}

// Phase A unit: scores[h][t − w.begin] = Dot(q_h, k_t) · scale for every query head h and positions t in
// [begin, end), a run (block) at a time. scores points at the row's [n_heads][positions] block; decoded holds
// [kScoreChunk][n_kv_heads][head_dim] floats (non-f32 caches: the run decoded, exact as DecodeKv is).
void ScoreUnit(const WaveRow& w, int n_heads, int begin, int end, float* scores, float* decoded,
               ScoreRunFn score_run) {
  const KvLayerView& kv = w.item->kv;
  const int head_dim = kv.head_dim;
  const int group = n_heads / kv.n_kv_heads;
  const float scale = w.item->rule.ScaleFor(head_dim);
  const float* q = w.item->q + static_cast<std::int64_t>(w.row) * n_heads * head_dim;
  const auto element_bytes = static_cast<std::int64_t>(KvDtypeBytes(kv.dtype));
  const bool nhd_f32 = kv.dtype == KvDtype::kF32 && kv.head_stride == head_dim &&
                       kv.position_stride == static_cast<std::int64_t>(kv.n_kv_heads) * head_dim;
  ForEachRun(kv, kv.keys, 0, begin, end, [&](int t0, int count, const std::uint8_t* first) {
    KeyRun run{first, static_cast<std::size_t>(kv.position_stride * element_bytes),
               static_cast<std::size_t>(kv.head_stride * element_bytes), count};
    if (nhd_f32 && t0 + count < end) {
      run.next = static_cast<const std::uint8_t*>(kv.keys) + kv.Element(t0 + count, 0) * element_bytes;
      run.next_bytes = static_cast<int>(kv.position_stride * element_bytes);
    }
    run.ahead = kv.dtype == KvDtype::kF32 && !nhd_f32;
    if (kv.dtype != KvDtype::kF32) {
      const std::int64_t kv_dim = static_cast<std::int64_t>(kv.n_kv_heads) * head_dim;
      StageColumns(kv, kv.keys, false, t0, count, end, 0, static_cast<int>(kv_dim), decoded);
      run = {reinterpret_cast<const std::uint8_t*>(decoded), Extent(kv_dim, sizeof(float)),
             Extent(head_dim, sizeof(float)), count};
    }
    score_run(q, kv.n_kv_heads, group, head_dim, run, scale, scores + (t0 - w.begin), w.Positions());
  });
}

// Eight floats in one vector register (GCC/Clang vector extension): elementwise + and · round exactly as
// the scalar operations do, whatever instructions the target compiles them to.
using Float8 = float __attribute__((vector_size(32)));
using Int8 = std::int32_t __attribute__((vector_size(32)));
constexpr int kLanes8 = kValueDims / 8;

// out_g[j] += p_g[t0 + i] · v_i[j] for g < g_count query heads, j < width output elements, i < count
// positions of one run. Each element is its own sum in ascending t (no FMA: -ffp-contract=off), so any
// vector width gives the bits of the scalar loop. With G heads of kValueDims elements the G · kValueDims
// sums stay in registers (12 of the 16 AVX2 registers for G = 3) for the whole run; otherwise (a tail of a
// head_dim that is not a multiple of kValueDims) they are summed in memory. Inlined into one function per
// instruction set below.
template <int G>
[[gnu::always_inline]] inline void AccumulateTile(const float* const* p, int g_count, int width, int t0,
                                                  int count, const std::uint8_t* first, std::size_t stride,
                                                  float* const* out) {
  if (g_count == G && width == kValueDims) {
    Float8 acc[G][kLanes8] = {};
    for (int g = 0; g < G; ++g) {
      for (int l = 0; l < kLanes8; ++l) std::memcpy(&acc[g][l], out[g] + 8 * l, sizeof(Float8));
    }
    for (int i = 0; i < count; ++i) {
      const std::uint8_t* v = first + i * stride;
      Float8 pt[G];
      for (int g = 0; g < G; ++g) pt[g] = p[g][t0 + i] + Float8{};  // a broadcast (p >= +0, so x + 0 == x)
      for (int l = 0; l < kLanes8; ++l) {
        Float8 vl;
        std::memcpy(&vl, v + l * sizeof(Float8), sizeof(Float8));
        for (int g = 0; g < G; ++g) acc[g][l] += pt[g] * vl;
      }
    }
    for (int g = 0; g < G; ++g) {
      for (int l = 0; l < kLanes8; ++l) std::memcpy(out[g] + 8 * l, &acc[g][l], sizeof(Float8));
    }
  } else if constexpr (G > 1) {
    AccumulateTile<G - 1>(p, g_count, width, t0, count, first, stride, out);
  } else {
    for (int i = 0; i < count; ++i) {
      const float* v = reinterpret_cast<const float*>(first + i * stride);
      for (int g = 0; g < g_count; ++g) {
        const float pt = p[g][t0 + i];
        for (int j = 0; j < width; ++j) out[g][j] += pt * v[j];
      }
    }
  }
}

void AccumulatePlain(const float* const* p, int g_count, int width, int t0, int count,
                     const std::uint8_t* first, std::size_t stride, float* const* out) {
  AccumulateTile<kHeadTile>(p, g_count, width, t0, count, first, stride, out);
}
#if defined(__x86_64__)
[[gnu::target("avx2")]] void AccumulateAvx2(const float* const* p, int g_count, int width, int t0, int count,
                                            const std::uint8_t* first, std::size_t stride,
                                            float* const* out) {
  AccumulateTile<kHeadTile>(p, g_count, width, t0, count, first, stride, out);
}
#endif

// Phase C unit: out_h[d .. d+width) = Σ_t p_h[t] · v_t[d .. d+width) for the pieces [piece_begin,
// piece_end) of the row's value columns, a piece being kValueDims elements of one KV head (piece i: KV head
// i / pieces_per_head), for that KV head's query heads, t ascending from w.begin. Positions are taken in
// stretches of kScoreChunk, whatever the blocks: each stretch's columns of the unit are first staged
// (StageColumns: copied, or decoded from f16 / bf16 / fp8, in address order, the next stretch requested
// meanwhile) into `staging` ([count][unit columns]), then summed from there piece by piece, each in tiles of
// kHeadTile heads, all from L1. One front-to-back read of the cache, where a strided pass per piece had
// read each line twice in the paged layout and let the contiguous layout's streams run cold.
// The sums live in `sums` ([piece_end − piece_begin][group][kValueDims], this thread's) until the last
// stretch, then go to out: in the caller's output two units' pieces can share a cache line, and writing it
// after every 16-position block bounced the line between the cores.
void ValueUnit(const WaveRow& w, int n_heads, int piece_begin, int piece_end, const float* scores,
               float* sums, float* staging, AccumulateFn accumulate) {
  const KvLayerView& kv = w.item->kv;
  const int head_dim = kv.head_dim;
  const int group = n_heads / kv.n_kv_heads;
  const int pieces_per_head = CeilDiv(head_dim, kValueDims);
  float* out_row = w.item->out + static_cast<std::int64_t>(w.row) * n_heads * head_dim;
  const auto sum_of = [&](int piece, int g) {  // the sums of (piece, query head g of its KV head)
    return sums + (static_cast<std::int64_t>(piece - piece_begin) * group + g) * kValueDims;
  };
  std::fill(sums, sum_of(piece_end, 0), 0.0f);
  // Columns [col_begin, col_end) of a position: element c · head_dim + j is element j of KV head c.
  const int col_begin = piece_begin / pieces_per_head * head_dim + piece_begin % pieces_per_head * kValueDims;
  const int col_end = (piece_end - 1) / pieces_per_head * head_dim +
                      std::min(head_dim, ((piece_end - 1) % pieces_per_head + 1) * kValueDims);
  const int staged_width = col_end - col_begin;
  const auto run_stride = Extent(staged_width, sizeof(float));
  for (int t0 = w.begin; t0 < w.end; t0 += kScoreChunk) {
    const int count = std::min(kScoreChunk, w.end - t0);
    StageColumns(kv, kv.values, true, t0, count, w.end, col_begin, col_end, staging);
    for (int piece = piece_begin; piece < piece_end; ++piece) {
      const int kv_head = piece / pieces_per_head;
      const int d0 = piece % pieces_per_head * kValueDims;
      const int width = std::min(kValueDims, head_dim - d0);
      const auto* at = reinterpret_cast<const std::uint8_t*>(staging + (kv_head * head_dim + d0 - col_begin));
      for (int g0 = 0; g0 < group; g0 += kHeadTile) {
        const int g_count = std::min(kHeadTile, group - g0);
        const float* p[kHeadTile];
        float* out[kHeadTile];
        for (int g = 0; g < g_count; ++g) {
          const int h = kv_head * group + g0 + g;
          p[g] = scores + static_cast<std::int64_t>(h) * w.Positions();
          out[g] = sum_of(piece, g0 + g);
        }
        accumulate(p, g_count, width, t0 - w.begin, count, at, run_stride, out);  // p indexed from begin
      }
    }
  }
  for (int piece = piece_begin; piece < piece_end; ++piece) {
    const int kv_head = piece / pieces_per_head;
    const int d0 = piece % pieces_per_head * kValueDims;
    const int width = std::min(kValueDims, head_dim - d0);
    for (int g = 0; g < group; ++g) {
      const float* from = sum_of(piece, g);
      std::copy(from, from + width, out_row + static_cast<std::int64_t>(kv_head * group + g) * head_dim + d0);
    }
  }
}

// Runs phases A, B and C over rows (one wave), then returns; each phase's units go to the threads one at a
// time (they differ in length), and each phase finishes before the next starts. A wave of two units or fewer
// in phases A and C runs on the calling thread.
void RunWave(std::span<const WaveRow> rows, int n_heads, const std::int64_t total[3], float* scores,
             float* decoded, std::int64_t decoded_per_thread, std::int64_t sums_floats) {
  const std::int64_t min_parallel = total[0] + total[2] > 2 ? 2 : std::numeric_limits<std::int64_t>::max();
  const AccumulateFn accumulate = ActiveAccumulate();
  ParallelForDynamic(
      total[0],
      [&](std::int64_t unit, int t) {
        std::int64_t local = 0;
        const WaveRow& w = FindRow(rows, 0, unit, local);
        const int begin = w.begin + static_cast<int>(local) * kScoreChunk;
        ScoreUnit(w, n_heads, begin, std::min(begin + kScoreChunk, w.end), scores + w.scores,
                  decoded + t * decoded_per_thread, ActiveScoreRun(w.item->kv.head_dim));
      },
      min_parallel);
  ParallelForDynamic(
      total[1],
      [&](std::int64_t unit, int) {
        std::int64_t h = 0;
        const WaveRow& w = FindRow(rows, 1, unit, h);
        float* row = scores + w.scores + h * w.Positions();
        if (w.item->rule.softcap > 0.0f) scalar::SoftCap(row, w.Positions(), w.item->rule.softcap);
        SoftmaxRow(row, w.Positions());
      },
      min_parallel);
  ParallelForDynamic(
      total[2],
      [&](std::int64_t unit, int t) {
        std::int64_t local = 0;
        const WaveRow& w = FindRow(rows, 2, unit, local);
        const int pieces = w.item->kv.n_kv_heads * CeilDiv(w.item->kv.head_dim, kValueDims);
        const int units = ValueUnitsPerRow(w.item->kv);
        const auto u = static_cast<int>(local);
        float* thread_decoded = decoded + t * decoded_per_thread;
        ValueUnit(w, n_heads, u * pieces / units, (u + 1) * pieces / units, scores + w.scores, thread_decoded,
                  thread_decoded + sums_floats, accumulate);
      },
      min_parallel);
}

}  // namespace

namespace {

// Softmax's max of x[0..n), or NaN if x holds one: without a NaN the max is the same value whichever way it
// is found (only the sign of a zero can differ, and x − (+0) == x − (−0) for every x but −0, where both give
// a zero and Exp gives 1), so eight running maxima by compare-and-select, where the scalar loop's fmaxf or
// compare-and-branch per score took half of the softmax's own time.
float MaxOrNan(const float* x, int n) {
  // Two registers of four lanes: SSE2's width, which every x86-64 build has, so the compare-and-select
  // compiles to vector instructions (eight-lane vectors, wider than the baseline ISA, were split into
  // scalar code through the stack: a fifth of batched attention's time).
  using Float4 = float __attribute__((vector_size(16)));
  using Int4 = std::int32_t __attribute__((vector_size(16)));
  Float4 max4[2] = {x[0] + Float4{}, x[0] + Float4{}};
  Int4 nan4 = {};
  int k = 0;
  for (; k + 8 <= n; k += 8) {
    for (int h = 0; h < 2; ++h) {
      Float4 v;
      std::memcpy(&v, x + k + 4 * h, sizeof(v));
      nan4 |= v != v;
      max4[h] = v > max4[h] ? v : max4[h];
    }
  }
  float max_value = x[0];
  bool nan = false;
  for (int l = 0; l < 4; ++l) {
    nan |= nan4[l] != 0;
    for (const Float4& m : max4) max_value = m[l] > max_value ? m[l] : max_value;
  }
  for (; k < n; ++k) {
    nan |= x[k] != x[k];
    max_value = x[k] > max_value ? x[k] : max_value;
  }
  return nan ? std::numeric_limits<float>::quiet_NaN() : max_value;
}

// The left-to-right sums of G rows of n floats, each its own chain of adds, the G chains interleaved so the
// adder is not left waiting on one chain's latency (the softmax's sum is the definition's serial one).
template <int G>
void RowSums(float* const* rows, int n, float* sums) {
  float s[G] = {};
  for (int i = 0; i < n; ++i) {
    for (int g = 0; g < G; ++g) s[g] += rows[g][i];
  }
  for (int g = 0; g < G; ++g) sums[g] = s[g];
}

}  // namespace

// scalar::Softmax of each of `count` rows of n floats (row r at x + r · stride), bit for bit: the max by
// MaxOrNan (a row holding a NaN goes through the definition itself), the exponentials by the vector
// variant of scalar::Exp (exp_kernels.h), then scalar::SoftmaxFromMax's sum and scaling, the sums of up to
// four rows interleaved.
void SoftmaxRows(float* x, int count, int n, std::int64_t stride) {
  const ExpMinusFn exp_minus = ActiveExpMinus();
  constexpr int kInterleave = 4;
  float* rows[kInterleave];
  int pending = 0;
  const auto finish = [&] {
    float sums[kInterleave];
    switch (pending) {
      case 4:
        RowSums<4>(rows, n, sums);
        break;
      case 3:
        RowSums<3>(rows, n, sums);
        break;
      case 2:
        RowSums<2>(rows, n, sums);
        break;
      default:
        RowSums<1>(rows, n, sums);
        break;
    }
    for (int g = 0; g < pending; ++g) {
      const float inv_sum = 1.0f / sums[g];
      for (int i = 0; i < n; ++i) rows[g][i] *= inv_sum;
    }
    pending = 0;
  };
  for (int r = 0; r < count; ++r) {
    float* row = x + r * stride;
    const float max_value = MaxOrNan(row, n);
    if (max_value != max_value) {
      scalar::Softmax(row, n);
      continue;
    }
    exp_minus(row, n, max_value);
    rows[pending++] = row;
    if (pending == kInterleave) finish();
  }
  if (pending > 0) finish();
}

void SoftmaxRow(float* x, int n) {
  SoftmaxRows(x, 1, n, n);
}

// Through the CPU's row dots (kernels/row_dot.h), for any head_dim.
static void ScoreRunRowDots(const float* q, int n_kv, int group, int head_dim, const KeyRun& run, float scale,
                            float* s, int s_stride) {
  for (int h = 0; h < n_kv * group; ++h) {
    float* sh = s + static_cast<std::int64_t>(h) * s_stride;
    RowDots(GgmlType::F32, run.rows + h / group * run.head_stride, run.position_stride, run.count,
            q + static_cast<std::int64_t>(h) * head_dim, head_dim, sh);
    for (int i = 0; i < run.count; ++i) sh[i] *= scale;
  }
}
ScoreRunFn ActiveScoreRun([[maybe_unused]] int head_dim) {
#if defined(__x86_64__)
  if (head_dim % 8 == 0 && ActiveIsa() == Isa::kAvx512) return avx512::ScoreRun;
  if (head_dim % 8 == 0 && ActiveIsa() != Isa::kScalar) return avx2::ScoreRun;
#endif
  return ScoreRunRowDots;
}

// AVX-512 or AVX2 where the row dots may use it (kernels/isa.h: PLUMB_ISA=scalar, SetIsa turn both off).
AccumulateFn ActiveAccumulate() {
#if defined(__x86_64__)
  if (ActiveIsa() == Isa::kAvx512) return avx512::Accumulate;
  if (ActiveIsa() != Isa::kScalar) return AccumulateAvx2;
#endif
  return AccumulatePlain;
}

void CausalAttention(std::span<const AttentionItem> items, int n_heads) {
  if (n_heads <= 0) throw MakeError("attention: n_heads must be positive, got ", n_heads);
  int context = 0;
  std::int64_t kv_dim = 0;       // the largest n_kv_heads · head_dim
  std::int64_t sums_floats = 0;  // the largest n_heads · head_dim rounded up to kValueDims
  for (std::size_t i = 0; i < items.size(); ++i) {
    CheckItem(items[i], i, n_heads);
    if (items[i].rows == 0) continue;
    context = std::max(context, items[i].first_pos + items[i].rows);
    kv_dim = std::max(kv_dim, static_cast<std::int64_t>(items[i].kv.n_kv_heads) * items[i].kv.head_dim);
    sums_floats = std::max(sums_floats, static_cast<std::int64_t>(n_heads) *
                                            CeilDiv(items[i].kv.head_dim, kValueDims) * kValueDims);
  }
  if (context == 0) return;
  // Enough rows to keep every thread busy with whole (row, KV heads) units: attention_by_head.cpp.
  if (AttendByKvHeads(items, n_heads)) return;

  Workspace& ws = ThreadWorkspace();
  // Per thread: phase A's decoded keys ([kScoreChunk][kv_dim]), or phase C's sums (at most n_heads ·
  // head_dim rounded up to kValueDims) followed by its staged values (at most [kScoreChunk][kv_dim]); each
  // part a multiple of 64 bytes, so that no two threads write one cache line.
  sums_floats = (sums_floats + 15) / 16 * 16;
  const std::int64_t decoded_per_thread =
      sums_floats + (static_cast<std::int64_t>(kScoreChunk) * kv_dim + 15) / 16 * 16;
  const auto decoded_floats = static_cast<std::size_t>(NumThreads() * decoded_per_thread);
  if (ws.decoded.size() < decoded_floats) ws.decoded.resize(decoded_floats);
  // Waves: consecutive rows (in item order) whose score rows fit kWaveFloats, at least one row each.
  std::size_t item = 0;
  int row = 0;
  while (item < items.size()) {
    ws.rows.clear();
    std::int64_t floats = 0;
    std::int64_t total[3] = {0, 0, 0};
    for (; item < items.size(); ++item, row = 0) {
      const AttentionItem& it = items[item];
      for (; row < it.rows; ++row) {
        WaveRow w{&it, row, it.Begin(row), it.End(row), floats, {total[0], total[1], total[2]}};
        const std::int64_t row_floats = static_cast<std::int64_t>(n_heads) * w.Positions();
        if (!ws.rows.empty() && floats + row_floats > kWaveFloats) break;
        std::int64_t units[3];
        RowUnits(w, n_heads, units);
        for (int ph = 0; ph < 3; ++ph) total[ph] += units[ph];
        floats += row_floats;
        ws.rows.push_back(w);
      }
      if (row < it.rows) break;  // the wave is full; this item goes on in the next one
    }
    if (ws.scores.size() < static_cast<std::size_t>(floats))
      ws.scores.resize(static_cast<std::size_t>(floats));
    RunWave(ws.rows, n_heads, total, ws.scores.data(), ws.decoded.data(), decoded_per_thread, sums_floats);
  }
}

void CausalAttention(const float* q, int rows, int first_pos, const KvLayerView& kv, int n_heads, float* out,
                     int window) {
  const AttentionItem item{q, out, rows, first_pos, kv, window};
  CausalAttention(std::span<const AttentionItem>(&item, 1), n_heads);
}

}  // namespace plumb::kernels
