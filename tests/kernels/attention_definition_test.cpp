// kernels::CausalAttention against its definition, scalar::AttendOneHead (kernels/scalar.h), bit for bit:
// the kernel splits each (row, head) into phases (scores by position chunk, softmax by head, value sums by
// output columns) spread over threads and waves of rows, and every split must leave the bits alone. Head
// dims 64 and 32 (the vector paths: whole 32-column pieces, the inline 8-lane Dot), 40 (a partial piece)
// and 18 (not a multiple of 8: the row-dot fallback); GQA 1, 3 and 8; contiguous and paged caches (block
// sizes 1, 16 and 256, shuffled tables, NaN in every slot past the length); decode, a prefill long enough
// to span several waves, chunked prefill; batches of sequences in every KV dtype (the split by (row, KV
// heads) of attention_by_head.cpp); 1, 2 and 3 threads; the CPU's vector code and PLUMB_ISA=scalar's. Sliding
// windows (AttentionItem::window) of 1 position, of sizes off every chunk, block and vector width, equal to
// and beyond the context, a prefill whose rows cross from unwindowed to windowed, and batches whose items
// have different windows and score rules (Gemma's scale and soft-cap, AttentionItem::rule).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "plumb/kernels/kernels.h"
#include "plumb/kernels/row_dot.h"
#include "plumb/kernels/scalar.h"
#include "plumb/kv/contiguous_kv_cache.h"
#include "support/kv_views.h"
#include "support/naive.h"

namespace plumb {
namespace {

using testing::ExpectSameBits;
using testing::PagedTestKv;
using testing::RandomVector;
using testing::TestBlockPool;

struct Shape {
  int n_heads, n_kv_heads, head_dim;
};
const Shape kShapes[] = {{9, 3, 64}, {4, 4, 32}, {8, 1, 40}, {6, 2, 18}};

// 300 positions: more than two 128-position score chunks, not a multiple of any block size; a prefill of
// them holds Σ n_heads · (r + 1) ≥ 180600 score floats, and 361200 at 8 heads: over one wave (262144).
constexpr int kLength = 300;

// The definition: one AttendOneHead per (row, head), in row and head order, with scalar::Dot.
std::vector<float> Definition(const std::vector<float>& q, int rows, int first_pos, const KvLayerView& kv,
                              int n_heads, int window = 0, kernels::AttentionScoreRule rule = {}) {
  std::vector<float> out(q.size());
  std::vector<float> scratch(static_cast<std::size_t>(first_pos + rows + kv.head_dim));
  const int group = n_heads / kv.n_kv_heads;
  for (int r = 0; r < rows; ++r) {
    for (int h = 0; h < n_heads; ++h) {
      const std::size_t offset = (static_cast<std::size_t>(r) * n_heads + h) * kv.head_dim;
      kernels::scalar::AttendOneHead(q.data() + offset, kv, h / group, first_pos + r + 1, window,
                                     scratch.data(), out.data() + offset, kernels::scalar::Dot, rule);
    }
  }
  return out;
}

// Fills a one-layer cache with kLength positions of random keys and values ([pos][n_kv_heads · head_dim]).
void Fill(KvSequence& kv, int kv_dim) {
  const std::vector<float> keys = RandomVector(static_cast<std::size_t>(kLength) * kv_dim, 5);
  const std::vector<float> values = RandomVector(static_cast<std::size_t>(kLength) * kv_dim, 6);
  kv.Reserve(kLength);
  for (int p = 0; p < kLength; ++p) {
    kv.Write(0, p, keys.data() + static_cast<std::size_t>(p) * kv_dim,
             values.data() + static_cast<std::size_t>(p) * kv_dim);
  }
  kv.Commit(std::vector<int>(kLength, 0));
}

// Every case of one cache against the definition, for every thread count and instruction set, unwindowed
// (window 0) or with each of `windows`.
void CheckAgainstDefinition(const KvSequence& cache, int n_heads, const std::string& what,
                            const std::vector<int>& windows = {0},
                            const std::vector<int>& threads = {1, 2, 3}) {
  const KvLayerView kv = cache.Layer(0);
  struct Case {
    const char* name;
    int rows, first_pos;
  };
  for (const int window : windows) {
    for (const Case& c : {Case{"decode", 1, kLength - 1}, Case{"prefill", kLength, 0},
                          Case{"chunked prefill", 7, kLength - 7}}) {
      const std::vector<float> q =
          RandomVector(static_cast<std::size_t>(c.rows) * n_heads * kv.head_dim, 11, 2.0f);
      const std::vector<float> expected = Definition(q, c.rows, c.first_pos, kv, n_heads, window);
      const kernels::Isa best = kernels::ActiveIsa();
      for (const kernels::Isa isa : {best, kernels::Isa::kScalar}) {
        kernels::SetIsa(isa);
        for (const int t : threads) {
          kernels::SetNumThreads(t);
          ExpectSameBits(testing::Attend(q, c.rows, c.first_pos, kv, n_heads, window), expected,
                         what + ", " + c.name + ", window " + std::to_string(window) + ", " +
                             kernels::IsaName(isa) + ", " + std::to_string(t) + " threads");
        }
      }
      kernels::SetIsa(best);
    }
  }
  kernels::SetNumThreads(0);
}

// Windows of one position, off the 8- and 16-lane widths, the block sizes and the 128-position score chunk
// (100, 129), equal to the context, and beyond it. The prefill's rows cross from unwindowed (p < window) to
// windowed, and each row's first position moves through the blocks.
const std::vector<int> kWindows = {1, 100, 129, kLength, kLength + 50};

class AttentionDefinition : public ::testing::TestWithParam<int> {};

TEST_P(AttentionDefinition, ContiguousCacheGivesTheDefinitionsBits) {
  const Shape s = kShapes[GetParam()];
  ContiguousKvCache cache(1, s.n_kv_heads, kLength + 5, s.head_dim);
  Fill(cache, s.n_kv_heads * s.head_dim);
  CheckAgainstDefinition(cache, s.n_heads, "contiguous");
}

TEST_P(AttentionDefinition, SlidingWindowsOverAContiguousCacheGiveTheDefinitionsBits) {
  const Shape s = kShapes[GetParam()];
  ContiguousKvCache cache(1, s.n_kv_heads, kLength + 5, s.head_dim);
  Fill(cache, s.n_kv_heads * s.head_dim);
  CheckAgainstDefinition(cache, s.n_heads, "contiguous", kWindows, {1, 2});
}

TEST_P(AttentionDefinition, SlidingWindowsOverAPagedCacheGiveTheDefinitionsBits) {
  const Shape s = kShapes[GetParam()];
  for (int block_size : {1, 16}) {  // a window's first position at every offset of a block, and inside one
    TestBlockPool pool(1, s.n_kv_heads, s.head_dim, block_size, 2 * ((kLength + block_size - 1) / block_size),
                       KvDtype::kF32);
    PagedTestKv paged(pool, kLength);
    Fill(paged, s.n_kv_heads * s.head_dim);
    CheckAgainstDefinition(paged, s.n_heads, "paged, block " + std::to_string(block_size), kWindows, {1, 2});
  }
}

TEST_P(AttentionDefinition, PagedCacheGivesTheDefinitionsBitsForEveryBlockSize) {
  const Shape s = kShapes[GetParam()];
  for (int block_size : {1, 16, 256}) {
    // Twice the blocks needed: the others stay unreferenced and NaN, as does the last block's tail.
    TestBlockPool pool(1, s.n_kv_heads, s.head_dim, block_size, 2 * ((kLength + block_size - 1) / block_size),
                       KvDtype::kF32);
    PagedTestKv paged(pool, kLength);
    Fill(paged, s.n_kv_heads * s.head_dim);
    CheckAgainstDefinition(paged, s.n_heads, "paged, block " + std::to_string(block_size));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionDefinition,
                         ::testing::Range(0, static_cast<int>(std::size(kShapes))));

// A paged cache (block 16) of kShapes[0] in a low-precision dtype, FP8 with distinct per-head scales (so a
// kernel using the wrong head's scale fails), against the definition for `windows` and `threads`.
void CheckLowPrecisionPagedCache(KvDtype dtype, const std::vector<int>& windows,
                                 const std::vector<int>& threads) {
  const Shape s = kShapes[0];
  std::vector<float> k_scales, v_scales;
  if (IsFp8(dtype)) {
    for (int h = 0; h < s.n_kv_heads; ++h) {
      k_scales.push_back(0.02f * static_cast<float>(h + 1));
      v_scales.push_back(0.03f / static_cast<float>(h + 1));
    }
  }
  TestBlockPool pool(1, s.n_kv_heads, s.head_dim, 16, 2 * ((kLength + 15) / 16), dtype, k_scales, v_scales);
  PagedTestKv paged(pool, kLength);
  Fill(paged, s.n_kv_heads * s.head_dim);
  CheckAgainstDefinition(paged, s.n_heads, std::string("paged ") + std::string(KvDtypeName(dtype)), windows,
                         threads);
}

// Non-f32 caches decode rows (keys whole, values a piece at a time): still the definition's bits.
TEST(AttentionDefinition, F16AndFp8PagedCachesGiveTheDefinitionsBits) {
  for (const KvDtype dtype : {KvDtype::kF16, KvDtype::kFp8E4M3})
    CheckLowPrecisionPagedCache(dtype, {0}, {1, 2, 3});
}

// The same with sliding windows, every low-precision dtype: the window's first run of keys and stretch of
// values start inside a block, and are decoded from there.
TEST(AttentionDefinition, SlidingWindowsOverLowPrecisionCachesGiveTheDefinitionsBits) {
  for (const KvDtype dtype : {KvDtype::kF16, KvDtype::kBF16, KvDtype::kFp8E4M3, KvDtype::kFp8E5M2}) {
    CheckLowPrecisionPagedCache(dtype, {1, 100, 129}, {1, 2});
  }
}

// Window 0 is no window: bitwise the window that covers every position (the context, or more).
TEST(AttentionDefinition, WindowZeroIsBitwiseAWindowCoveringTheContext) {
  const Shape s = kShapes[0];
  ContiguousKvCache cache(1, s.n_kv_heads, kLength, s.head_dim);
  Fill(cache, s.n_kv_heads * s.head_dim);
  const KvLayerView kv = cache.Layer(0);
  const std::vector<float> q = RandomVector(static_cast<std::size_t>(kLength) * s.n_heads * s.head_dim, 12);
  const std::vector<float> unwindowed = testing::Attend(q, kLength, 0, kv, s.n_heads);
  ExpectSameBits(unwindowed, Definition(q, kLength, 0, kv, s.n_heads), "window 0 vs the definition");
  for (const int window : {kLength, kLength + 1, 1 << 30}) {
    ExpectSameBits(testing::Attend(q, kLength, 0, kv, s.n_heads, window), unwindowed,
                   "window " + std::to_string(window));
  }
}

}  // namespace
}  // namespace plumb

namespace plumb {
namespace {

// A batch of decoding sequences (lengths 1 .. 77, none a multiple of the block size, so every last block
// has a NaN tail) and one prefill chunk, each over its own paged cache: every item's output is the
// definition's, for batches that split by whole rows, by parts of a row's KV heads, and (one thread per
// few rows) not at all, in every dtype, on the CPU's vector code and scalar's; unwindowed, and with a
// different window per item (none, 1 position, shorter and longer than the item's context, off the block
// size), so that the rows of one unit, wave or tile start at different positions.
TEST(AttentionDefinition, BatchesOfSequencesGiveEachTheDefinitionsBits) {
  for (const Shape s : {kShapes[0], kShapes[2], kShapes[3], Shape{4, 4, 32}}) {
    for (const KvDtype dtype :
         {KvDtype::kF32, KvDtype::kF16, KvDtype::kBF16, KvDtype::kFp8E4M3, KvDtype::kFp8E5M2}) {
      std::vector<float> k_scales, v_scales;
      if (IsFp8(dtype)) {
        for (int h = 0; h < s.n_kv_heads; ++h) {
          k_scales.push_back(0.02f * static_cast<float>(h + 1));
          v_scales.push_back(0.03f / static_cast<float>(h + 1));
        }
      }
      const int kv_dim = s.n_kv_heads * s.head_dim, block_size = 16;
      const int lengths[] = {77, 1, 33, 17, 50, 5, 64 + 3, 31, 2};
      const int mixed_windows[] = {3, 1, 0, 17, 13, 512, 40, 1, 2};  // item 0's 4 rows: windows inside it
      TestBlockPool pool(1, s.n_kv_heads, s.head_dim, block_size, 64, dtype, k_scales, v_scales);
      std::vector<std::unique_ptr<PagedTestKv>> caches;
      for (const int length : lengths) {
        caches.push_back(std::make_unique<PagedTestKv>(pool, length));
        const auto seed = static_cast<std::uint32_t>(length);
        const std::vector<float> keys = RandomVector(static_cast<std::size_t>(length) * kv_dim, seed);
        const std::vector<float> values = RandomVector(static_cast<std::size_t>(length) * kv_dim, seed + 1);
        caches.back()->Reserve(length);
        for (int p = 0; p < length; ++p) {
          caches.back()->Write(0, p, keys.data() + static_cast<std::size_t>(p) * kv_dim,
                               values.data() + static_cast<std::size_t>(p) * kv_dim);
        }
        caches.back()->Commit(std::vector<int>(length, 0));
      }
      for (const bool windowed : {false, true}) {
        for (const std::size_t batch : {std::size(lengths), std::size_t{3}, std::size_t{1}}) {
          const auto window_of = [&](std::size_t i) { return windowed ? mixed_windows[i] : 0; };
          // With the windows, every other item also scores by Gemma's rule: another scale, and a soft-cap
          // that bites (|q·k| · 0.2 reaches well past 3 with these q).
          const auto rule_of = [&](std::size_t i) {
            return windowed && i % 2 == 0 ? kernels::AttentionScoreRule{0.2f, 3.0f}
                                          : kernels::AttentionScoreRule{};
          };
          // Item 0 takes its last 4 rows (a chunk), the others decode their last row.
          std::vector<std::vector<float>> qs, expected, outs;
          std::vector<kernels::AttentionItem> items;
          for (std::size_t i = 0; i < batch; ++i) {
            const KvLayerView kv = caches[i]->Layer(0);
            const int rows = i == 0 ? 4 : 1;
            qs.push_back(RandomVector(static_cast<std::size_t>(rows) * s.n_heads * s.head_dim,
                                      static_cast<std::uint32_t>(40 + i), 2.0f));
            expected.push_back(
                Definition(qs.back(), rows, lengths[i] - rows, kv, s.n_heads, window_of(i), rule_of(i)));
          }
          const kernels::Isa best = kernels::ActiveIsa();
          for (const kernels::Isa isa : {best, kernels::Isa::kScalar}) {
            kernels::SetIsa(isa);
            for (int threads : {1, 2, 3}) {
              kernels::SetNumThreads(threads);
              outs.assign(batch, {});
              items.clear();
              for (std::size_t i = 0; i < batch; ++i) {
                outs[i].assign(qs[i].size(), -1.0f);
                const int rows = i == 0 ? 4 : 1;
                items.push_back({qs[i].data(), outs[i].data(), rows, lengths[i] - rows, caches[i]->Layer(0),
                                 window_of(i), rule_of(i)});
              }
              kernels::CausalAttention(items, s.n_heads);
              for (std::size_t i = 0; i < batch; ++i) {
                ExpectSameBits(outs[i], expected[i],
                               std::string(KvDtypeName(dtype)) + ", head_dim " + std::to_string(s.head_dim) +
                                   ", batch " + std::to_string(batch) + ", item " + std::to_string(i) +
                                   ", window " + std::to_string(window_of(i)) + ", " + kernels::IsaName(isa) +
                                   ", " + std::to_string(threads) + " threads");
              }
            }
          }
          kernels::SetIsa(best);
          kernels::SetNumThreads(0);
        }
      }
    }
  }
}

}  // namespace
}  // namespace plumb
