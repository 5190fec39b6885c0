// PagedKvCache, one behaviour at a time, against hand-computed block tables and figures (docs/kv-cache.md).
#include "plumb/kv/paged_kv_cache.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <vector>

#include "kv/paged_kv_test_util.h"
#include "plumb/formats/dtype.h"
#include "plumb/formats/fp8.h"
#include "support/errors.h"

namespace plumb {
namespace {

using testing::CountMismatches;
using testing::ErrorOf;
using testing::ExpectMessageHas;
using testing::Extend;
using testing::ReadKv;
using testing::TestConfig;

using Ids = std::vector<int>;

Ids Table(const PagedKvCache& cache, SeqId id) {
  const auto table = cache.BlockTable(id);
  return Ids(table.begin(), table.end());
}

Ids TokensOf(const PagedKvCache& cache, SeqId id) {
  const auto tokens = cache.Tokens(id);
  return Ids(tokens.begin(), tokens.end());
}

Ids Range(int first, int count) {
  Ids ids;
  for (int i = 0; i < count; ++i) ids.push_back(first + i);
  return ids;
}

void ExpectUsage(const PagedKvCache& cache, int used, int cached, int free, std::int64_t stored,
                 std::int64_t fragmented, int sequences) {
  const PagedKvUsage u = cache.Usage();
  EXPECT_EQ(u.total_blocks, cache.config().num_blocks);
  EXPECT_EQ(u.used_blocks, used);
  EXPECT_EQ(u.cached_blocks, cached);
  EXPECT_EQ(u.free_blocks, free);
  EXPECT_EQ(u.stored_positions, stored);
  EXPECT_EQ(u.fragmented_positions, fragmented);
  EXPECT_EQ(u.sequences, sequences);
  EXPECT_EQ(cache.AvailableBlocks(), free + cached);
  cache.CheckInvariants();
}

TEST(PagedKvConfig, BytesPerTokenIsTwoLayersHeadsDimBytesForEveryDtype) {
  for (KvDtype dtype : {KvDtype::kF32, KvDtype::kF16, KvDtype::kBF16, KvDtype::kFp8E4M3, KvDtype::kFp8E5M2}) {
    PagedKvConfig c = TestConfig(dtype, 16, 4, 64, /*n_layers=*/30, /*n_kv_heads=*/3, /*head_dim=*/64);
    EXPECT_EQ(c.BytesPerToken(), 2u * 30 * 3 * 64 * KvDtypeBytes(dtype)) << KvDtypeName(dtype);
    EXPECT_EQ(c.BytesPerBlock(), 16 * c.BytesPerToken());
  }
  // SmolLM2-135M in f32: 2 · 30 · 3 · 64 · 4 = 46080 bytes a token, 737280 a block of 16.
  const PagedKvConfig c = TestConfig(KvDtype::kF32, 16, 4, 64, 30, 3, 64);
  EXPECT_EQ(c.BytesPerToken(), 46080u);
  EXPECT_EQ(c.BlocksForBudget(737280), 1);
  EXPECT_EQ(c.BlocksForBudget(737280 * 10 + 737279), 10);
  EXPECT_EQ(c.BlocksForBudget(std::size_t{1} << 30), 1456);  // floor(2^30 / 737280)
  ExpectMessageHas(ErrorOf([&] { c.BlocksForBudget(737279); }), {"737279", "737280"});
}

TEST(PagedKvCache, BadConfigsNameTheValue) {
  auto error_of = [](auto mutate) {
    PagedKvConfig c = TestConfig(KvDtype::kFp8E4M3, 16, 4, 64);
    mutate(c);
    return ErrorOf([&] { PagedKvCache cache(c); });
  };
  for (int bs : {0, -4, 3, 12, 512}) {
    ExpectMessageHas(error_of([bs](PagedKvConfig& c) { c.block_size = bs; }),
                     {"block_size " + std::to_string(bs), "power of two"});
  }
  ExpectMessageHas(error_of([](PagedKvConfig& c) { c.num_blocks = 0; }), {"num_blocks 0"});
  ExpectMessageHas(error_of([](PagedKvConfig& c) { c.max_positions = 0; }), {"max_positions 0"});
  ExpectMessageHas(error_of([](PagedKvConfig& c) { c.head_dim = -1; }), {"head_dim -1"});
  ExpectMessageHas(error_of([](PagedKvConfig& c) { c.k_scales.pop_back(); }), {"k_scales has 3 values", "4"});
  ExpectMessageHas(error_of([](PagedKvConfig& c) { c.v_scales[3] = 0.0f; }),
                   {"v_scales[3]", "layer 1", "head 1"});
  ExpectMessageHas(error_of([](PagedKvConfig& c) { c.k_scales[1] = -2.0f; }), {"k_scales[1]", "-2"});
  ExpectMessageHas(
      error_of([](PagedKvConfig& c) { c.k_scales[0] = std::numeric_limits<float>::quiet_NaN(); }),
      {"k_scales[0]", "nan"});
}

TEST(PagedKvCache, BlocksAreTakenLazilyAsPositionsAreReserved) {
  PagedKvCache cache(TestConfig(KvDtype::kF32, 4, 8, 64));
  const SeqId a = cache.Add();
  EXPECT_EQ(cache.Sequence(a).length(), 0);
  EXPECT_TRUE(Table(cache, a).empty());
  ExpectUsage(cache, 0, 0, 8, 0, 0, 1);
  KvSequence& seq = cache.Sequence(a);
  seq.Reserve(1);
  EXPECT_EQ(Table(cache, a), Ids({0}));
  seq.Reserve(4);  // still the first block
  EXPECT_EQ(Table(cache, a), Ids({0}));
  EXPECT_EQ(cache.BlocksToGrow(a, 5), 1);
  EXPECT_EQ(cache.BlocksToGrow(a, 3), 0);  // less than reserved
  seq.Reserve(5);
  EXPECT_EQ(Table(cache, a), Ids({0, 1}));
  EXPECT_EQ(seq.Layer(0).length, 5);
  EXPECT_EQ(seq.length(), 0);
  ExpectUsage(cache, 2, 0, 6, 0, 8, 1);  // reserved slots hold nothing yet
  ASSERT_TRUE(Extend(cache, a, Range(1, 5)));
  EXPECT_EQ(seq.length(), 5);
  ExpectUsage(cache, 2, 0, 6, 5, 3, 1);
  // A commit of fewer positions than reserved keeps the rest reserved.
  seq.Reserve(3);
  EXPECT_EQ(Table(cache, a), Ids({0, 1}));
  seq.Commit(Ids{6});
  EXPECT_EQ(seq.length(), 6);
  EXPECT_EQ(seq.Layer(1).length, 8);
  cache.CheckInvariants();
}

TEST(PagedKvCache, SequenceInterfaceAndViewStrides) {
  PagedKvCache cache(TestConfig(KvDtype::kFp8E5M2, 8, 4, 20, 3, 2, 5));
  const SeqId a = cache.Add();
  const KvSequence& seq = cache.Sequence(a);
  EXPECT_EQ(seq.n_layers(), 3);
  EXPECT_EQ(seq.n_kv_heads(), 2);
  EXPECT_EQ(seq.head_dim(), 5);
  EXPECT_EQ(seq.dtype(), KvDtype::kFp8E5M2);
  EXPECT_EQ(seq.max_positions(), 20);
  ASSERT_TRUE(Extend(cache, a, Range(0, 11)));
  const KvLayerView view = seq.Layer(2);
  EXPECT_EQ(view.keys, cache.LayerKeys(2));
  EXPECT_EQ(view.values, cache.LayerValues(2));
  EXPECT_EQ(view.block_size, 8);
  EXPECT_EQ(view.position_stride, 2 * 5);
  EXPECT_EQ(view.head_stride, 5);
  EXPECT_EQ(view.block_stride, 8 * 2 * 5);
  EXPECT_EQ(view.length, 11);
  EXPECT_EQ(view.KScale(1), testing::TestScale(2, 1, false));
  EXPECT_EQ(view.VScale(0), testing::TestScale(2, 0, true));
  EXPECT_EQ(view.block_table.data(), cache.BlockTable(a).data());
  EXPECT_EQ(CountMismatches(cache, a), 0);
  // Without FP8 the view carries no scales.
  PagedKvCache f16(TestConfig(KvDtype::kF16, 8, 4, 20));
  EXPECT_EQ(f16.Sequence(f16.Add()).Layer(0).k_scales, nullptr);
}

// Every block size from 1 to 256, lengths that are not multiples of it, written in uneven chunks: every
// position reads back through the view and lies at its slot in the raw pool.
TEST(PagedKvCache, EveryBlockSizeHoldsWhatWasWritten) {
  for (int bs = 1; bs <= 256; bs *= 2) {
    SCOPED_TRACE("block_size " + std::to_string(bs));
    const int length = 3 * bs + 1 + (bs > 2 ? bs / 2 : 0);
    PagedKvCache cache(TestConfig(KvDtype::kBF16, bs, 12, length + bs));
    const SeqId a = cache.Add();
    const SeqId b = cache.Add();
    int done = 0;
    for (int chunk = 1; done < length; chunk = chunk * 3 % 7 + 1) {
      const int n = std::min(chunk, length - done);
      ASSERT_TRUE(Extend(cache, a, Range(100 + done, n)));
      ASSERT_TRUE(Extend(cache, b, Range(500 + done, n)));  // interleaved, so the tables interleave
      done += n;
    }
    const int blocks = (length + bs - 1) / bs;
    EXPECT_EQ(static_cast<int>(cache.BlockTable(a).size()), blocks);
    EXPECT_EQ(CountMismatches(cache, a), 0);
    EXPECT_EQ(CountMismatches(cache, b), 0);
    ExpectUsage(cache, 2 * blocks, 0, 12 - 2 * blocks, 2 * length, 2 * (blocks * bs - length), 2);
    // The raw pool: position p of `a` is at slot SlotMapping(p), [slot][kv_head][head_dim] elements.
    const std::vector<std::int64_t> slots = cache.SlotMapping(a, 0, length);
    const KvLayerView view = cache.Sequence(a).Layer(1);
    for (int p = 0; p < length; ++p) {
      const auto* raw = static_cast<const std::uint16_t*>(cache.LayerValues(1)) + slots[p] * 2 * 4 + 4;
      const std::vector<float> got = ReadKv(view, p, 1, true);
      for (int j = 0; j < 4; ++j) ASSERT_EQ(BF16ToF32(raw[j]), got[j]) << "position " << p;
    }
    // A third sequence with a's first blocks as its prompt shares them.
    const Ids a_tokens = TokensOf(cache, a);
    const SeqId c = cache.Add(a_tokens);
    EXPECT_EQ(cache.Sequence(c).length(), (length - 1) / bs * bs);
    EXPECT_EQ(CountMismatches(cache, c), 0);
    cache.CheckInvariants();
  }
}

TEST(PagedKvCache, ForkSharesBlocksAndCopyOnWriteLeavesTheParentUntouched) {
  PagedKvCache cache(TestConfig(KvDtype::kF32, 4, 8, 32));
  const SeqId parent = cache.Add();
  ASSERT_TRUE(Extend(cache, parent, Range(1, 6)));      // blocks [0, 1], block 1 half full
  std::vector<std::uint8_t> before(8 * 4 * 2 * 4 * 4);  // [num_blocks][block_size][n_kv_heads][head_dim] f32
  std::memcpy(before.data(), cache.LayerKeys(0), before.size());

  const SeqId child = cache.Fork(parent);
  EXPECT_EQ(Table(cache, child), Ids({0, 1}));
  EXPECT_EQ(TokensOf(cache, child), Range(1, 6));
  ExpectUsage(cache, 2, 0, 6, 6, 2, 2);
  EXPECT_EQ(cache.BlocksToGrow(child, 1), 1);  // the copy of block 1
  EXPECT_EQ(cache.BlocksToGrow(child, 3), 2);  // the copy and one more block

  ASSERT_TRUE(Extend(cache, child, Ids{42}));
  EXPECT_EQ(Table(cache, parent), Ids({0, 1}));
  EXPECT_EQ(Table(cache, child), Ids({0, 2}));
  EXPECT_EQ(std::memcmp(before.data(), cache.LayerKeys(0), 2 * 4 * 2 * 4 * 4),
            0);  // blocks 0 and 1 as they were
  EXPECT_EQ(CountMismatches(cache, parent), 0);
  EXPECT_EQ(CountMismatches(cache, child), 0);  // the copied slots and the new one
  // The parent's block 1 is its alone again: it grows in place.
  EXPECT_EQ(cache.BlocksToGrow(parent, 2), 0);
  ASSERT_TRUE(Extend(cache, parent, Ids{7, 8}));
  EXPECT_EQ(Table(cache, parent), Ids({0, 1}));
  EXPECT_EQ(CountMismatches(cache, parent), 0);
  EXPECT_EQ(CountMismatches(cache, child), 0);

  // The other order: the parent writes first and gets the copy; the fork keeps the original.
  const SeqId parent2 = cache.Add();
  ASSERT_TRUE(Extend(cache, parent2, Range(20, 3)));
  const Ids table2 = Table(cache, parent2);
  const SeqId child2 = cache.Fork(parent2);
  ASSERT_TRUE(Extend(cache, parent2, Ids{99}));
  EXPECT_EQ(Table(cache, child2), table2);
  EXPECT_NE(Table(cache, parent2), table2);
  EXPECT_EQ(CountMismatches(cache, parent2), 0);
  EXPECT_EQ(CountMismatches(cache, child2), 0);
  // A full last block is shared as it is: new positions go to a new block, nothing is copied.
  const SeqId full = cache.Fork(parent);  // parent holds 8 positions: two full blocks
  EXPECT_EQ(cache.BlocksToGrow(full, 1), 1);
  cache.CheckInvariants();
}

TEST(PagedKvCache, ForkOfASequenceWithReservedPositionsIsRefused) {
  PagedKvCache cache(TestConfig(KvDtype::kF32, 4, 8, 32));
  const SeqId a = cache.Add();
  ASSERT_TRUE(Extend(cache, a, Range(1, 5)));
  cache.Sequence(a).Reserve(2);
  ExpectMessageHas(ErrorOf([&] { cache.Fork(a); }), {"sequence 1", "2 reserved"});
  EXPECT_EQ(cache.Usage().sequences, 1);
  cache.CheckInvariants();
}

TEST(PagedKvCache, PrefixHitsAndMisses) {
  PagedKvCache cache(TestConfig(KvDtype::kF16, 4, 32, 64));
  const SeqId a = cache.Add();
  ASSERT_TRUE(Extend(cache, a, Range(1, 10)));  // blocks 0, 1 full (cached by prefix), 2 partial
  EXPECT_EQ(Table(cache, a), Ids({0, 1, 2}));

  // Two full blocks match; the rest is computed.
  const SeqId b = cache.Add(Ids{1, 2, 3, 4, 5, 6, 7, 8, 20, 21});
  EXPECT_EQ(cache.Sequence(b).length(), 8);
  EXPECT_EQ(Table(cache, b), Ids({0, 1}));
  EXPECT_EQ(TokensOf(cache, b), Range(1, 8));
  EXPECT_EQ(cache.BlocksToGrow(b, 2), 1);  // a full shared block is never copied
  ASSERT_TRUE(Extend(cache, b, Ids{20, 21}));
  EXPECT_EQ(CountMismatches(cache, b), 0);

  // Never the whole prompt: the last token must be computed, so 8 tokens match only one block.
  EXPECT_EQ(cache.Sequence(cache.Add(Range(1, 8))).length(), 4);
  EXPECT_EQ(cache.Sequence(cache.Add(Range(1, 9))).length(), 8);
  EXPECT_EQ(cache.Sequence(cache.Add(Range(1, 3))).length(), 0);  // no full block
  // The first block differs: nothing after it can match, although block 2's ids are a's.
  EXPECT_EQ(cache.Sequence(cache.Add(Ids{1, 2, 3, 5, 5, 6, 7, 8, 9})).length(), 0);
  EXPECT_EQ(cache.Sequence(cache.Add(Range(0, 10))).length(), 0);
  // The second block differs.
  EXPECT_EQ(cache.Sequence(cache.Add(Ids{1, 2, 3, 4, 5, 6, 7, 9, 10})).length(), 4);

  // The same ids in block 1 after a different block 0 are a different prefix.
  const SeqId g = cache.Add();
  ASSERT_TRUE(Extend(cache, g, Ids{7, 7, 7, 7, 5, 6, 7, 8, 1}));
  const SeqId h = cache.Add(Ids{7, 7, 7, 7, 5, 6, 7, 8, 2});
  const Ids g_table = Table(cache, g);
  EXPECT_EQ(Table(cache, h), Ids(g_table.begin(), g_table.begin() + 2));
  EXPECT_EQ(CountMismatches(cache, h), 0);
  EXPECT_EQ(cache.Sequence(cache.Add(Ids{9, 9, 9, 9, 5, 6, 7, 8, 1})).length(), 0);
  cache.CheckInvariants();

  // Without prefix caching nothing is matched and freed blocks are simply free.
  PagedKvConfig off_config = TestConfig(KvDtype::kF16, 4, 8, 64);
  off_config.prefix_caching = false;
  PagedKvCache off(off_config);
  const SeqId x = off.Add();
  ASSERT_TRUE(Extend(off, x, Range(1, 10)));
  EXPECT_EQ(off.Sequence(off.Add(Range(1, 10))).length(), 0);
  off.Free(x);
  ExpectUsage(off, 0, 0, 8, 0, 0, 1);
}

TEST(PagedKvCache, FreedPrefixBlocksStayCachedAndAreEvictedOldestFirst) {
  PagedKvCache cache(TestConfig(KvDtype::kF32, 2, 4, 16));
  const SeqId a = cache.Add();
  ASSERT_TRUE(Extend(cache, a, Range(1, 5)));  // [0, 1, 2]: 0 and 1 full
  cache.Free(a);
  // Block 2 (partial) is free; 1 then 0 joined the cached queue (a table is released last block first).
  ExpectUsage(cache, 0, 2, 2, 0, 0, 0);
  EXPECT_THROW(cache.Sequence(a), Error);

  // A hit takes a cached block back.
  const SeqId again = cache.Add(Range(1, 5));
  EXPECT_EQ(Table(cache, again), Ids({0, 1}));
  EXPECT_EQ(CountMismatches(cache, again), 0);
  ExpectUsage(cache, 2, 0, 2, 4, 0, 1);
  cache.Free(again);
  ExpectUsage(cache, 0, 2, 2, 0, 0, 0);

  // New contents take the free blocks first, then evict the oldest cached block: block 1.
  const SeqId b = cache.Add();
  ASSERT_TRUE(Extend(cache, b, Ids{9, 9, 9}));
  EXPECT_EQ(Table(cache, b), Ids({2, 3}));
  ExpectUsage(cache, 2, 2, 0, 3, 1, 1);
  ASSERT_TRUE(Extend(cache, b, Ids{9, 9}));
  EXPECT_EQ(Table(cache, b), Ids({2, 3, 1}));
  ExpectUsage(cache, 3, 1, 0, 5, 1, 1);
  // Block 0 still holds [1, 2]; [3, 4] after it is gone.
  const SeqId c = cache.Add(Range(1, 5));
  EXPECT_EQ(Table(cache, c), Ids({0}));
  EXPECT_EQ(CountMismatches(cache, c), 0);
  EXPECT_EQ(CountMismatches(cache, b), 0);
  ExpectUsage(cache, 4, 0, 0, 7, 1, 2);
}

TEST(PagedKvCache, ExhaustionChangesNothing) {
  PagedKvCache cache(TestConfig(KvDtype::kFp8E4M3, 4, 3, 64));
  const SeqId a = cache.Add();
  ASSERT_TRUE(Extend(cache, a, Range(1, 6)));  // 2 blocks
  const PagedKvUsage before = cache.Usage();
  const std::string message = ErrorOf([&] { cache.Sequence(a).Reserve(7); });  // positions 6..12: 2 more
  ExpectMessageHas(message, {"sequence 1", "needs 2 blocks", "positions [6, 13)", "1 are available"});
  EXPECT_EQ(Table(cache, a), Ids({0, 1}));
  EXPECT_EQ(cache.Sequence(a).Layer(0).length, 6);
  EXPECT_EQ(cache.Usage().free_blocks, before.free_blocks);
  EXPECT_EQ(cache.Usage().stored_positions, before.stored_positions);

  // A fork whose write needs a copy of the shared last block, with no block left.
  ASSERT_TRUE(Extend(cache, a, Range(7, 3)));  // 9 positions: all 3 blocks
  const SeqId b = cache.Fork(a);
  ExpectMessageHas(ErrorOf([&] { cache.Sequence(b).Reserve(1); }), {"needs 1 blocks", "0 are available"});
  EXPECT_EQ(Table(cache, b), Table(cache, a));
  EXPECT_EQ(CountMismatches(cache, a), 0);
  EXPECT_EQ(CountMismatches(cache, b), 0);
  ExpectUsage(cache, 3, 0, 0, 9, 3, 2);
}

// Hand-computed accounting: a fork, a copy-on-write, a prefix hit, frees.
TEST(PagedKvCache, AccountingFiguresByHand) {
  PagedKvCache cache(TestConfig(KvDtype::kF32, 4, 10, 64));
  const SeqId a = cache.Add();
  ASSERT_TRUE(Extend(cache, a, Range(1, 6)));  // [0, 1]
  const SeqId b = cache.Fork(a);
  ASSERT_TRUE(Extend(cache, b, Ids{7}));  // copy-on-write: [0, 2]
  // Block 0: 4 positions (counted once), block 1: 2 (a), block 2: 3 (b) = 9 of 12 slots.
  ExpectUsage(cache, 3, 0, 7, 9, 3, 2);
  const SeqId c = cache.Add(Ids{1, 2, 3, 4, 9});  // shares block 0
  EXPECT_EQ(Table(cache, c), Ids({0}));
  ExpectUsage(cache, 3, 0, 7, 9, 3, 3);
  ASSERT_TRUE(Extend(cache, c, Ids{9}));  // [0, 3]
  ExpectUsage(cache, 4, 0, 6, 10, 6, 3);
  cache.Free(a);  // block 1 free, block 0 still held
  ExpectUsage(cache, 3, 0, 7, 8, 4, 2);
  cache.Free(b);
  cache.Free(c);  // block 0 stays cached: it is full and in the prefix cache
  ExpectUsage(cache, 0, 1, 9, 0, 0, 0);
}

TEST(PagedKvCache, FlashInferPagesAndSlotMappingByHand) {
  PagedKvConfig config = TestConfig(KvDtype::kF32, 4, 8, 64);
  config.prefix_caching = false;
  PagedKvCache cache(config);
  const SeqId a = cache.Add();
  ASSERT_TRUE(Extend(cache, a, Range(1, 6)));  // [0, 1]
  const SeqId b = cache.Add();
  ASSERT_TRUE(Extend(cache, b, Range(1, 3)));  // [2]
  cache.Free(a);                               // 1, then 0, back on the free list: 0 is taken next
  const SeqId c = cache.Add();
  ASSERT_TRUE(Extend(cache, c, Range(1, 9)));  // [0, 1, 3]
  ASSERT_TRUE(Extend(cache, b, Range(4, 3)));  // [2, 4], 6 positions
  EXPECT_EQ(Table(cache, c), Ids({0, 1, 3}));
  EXPECT_EQ(Table(cache, b), Ids({2, 4}));

  const std::vector<SeqId> batch = {c, b};
  PagedKvCache::FlashInferView view = cache.FlashInferPages(batch);
  EXPECT_EQ(view.indptr, Ids({0, 3, 5}));
  EXPECT_EQ(view.indices, Ids({0, 1, 3, 2, 4}));
  EXPECT_EQ(view.last_page_len, Ids({1, 2}));  // 9 = 2 · 4 + 1, 6 = 4 + 2
  // slot = block · 4 + offset
  EXPECT_EQ(cache.SlotMapping(c, 6, 3), std::vector<std::int64_t>({6, 7, 12}));
  EXPECT_EQ(cache.SlotMapping(b, 3, 3), std::vector<std::int64_t>({11, 16, 17}));
  EXPECT_TRUE(cache.SlotMapping(b, 6, 0).empty());

  // Views cover reserved positions too: b reserves 3 more (positions 6..8) and takes block 5.
  cache.Sequence(b).Reserve(3);
  view = cache.FlashInferPages(batch);
  EXPECT_EQ(view.indptr, Ids({0, 3, 6}));
  EXPECT_EQ(view.indices, Ids({0, 1, 3, 2, 4, 5}));
  EXPECT_EQ(view.last_page_len, Ids({1, 1}));
  EXPECT_EQ(cache.SlotMapping(b, 7, 2), std::vector<std::int64_t>({19, 20}));
  // An empty sequence has no pages.
  const std::vector<SeqId> empty = {cache.Add()};
  view = cache.FlashInferPages(empty);
  EXPECT_EQ(view.indptr, Ids({0, 0}));
  EXPECT_EQ(view.last_page_len, Ids({0}));
}

TEST(PagedKvCache, WritesEncodeWithTheLayerAndHeadScale) {
  PagedKvCache cache(TestConfig(KvDtype::kFp8E4M3, 2, 4, 8));
  const SeqId a = cache.Add();
  KvSequence& seq = cache.Sequence(a);
  seq.Reserve(3);
  // Awkward values: ones that round, and ones beyond ±448 · scale that saturate.
  const float k[8] = {0.3f, -1e6f, 1000.0f, 0.01f, 3.7f, -2.2f, 900.0f, 1e-9f};  // [n_kv_heads][head_dim]
  const float v[8] = {1.0f, 2.0f, -3.0f, 4.0f, 5.5f, -6.25f, 7.0f, 1e7f};
  seq.Write(1, 2, k, v);
  const std::int64_t slot = cache.SlotMapping(a, 2, 1)[0];
  const auto* keys = static_cast<const std::uint8_t*>(cache.LayerKeys(1)) + slot * 8;
  const auto* values = static_cast<const std::uint8_t*>(cache.LayerValues(1)) + slot * 8;
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < 4; ++j) {
      const int e = h * 4 + j;
      EXPECT_EQ(keys[e],
                F32ToFp8(k[e] / testing::TestScale(1, h, false), Fp8Format::kE4M3, Fp8Overflow::kSaturate));
      EXPECT_EQ(values[e],
                F32ToFp8(v[e] / testing::TestScale(1, h, true), Fp8Format::kE4M3, Fp8Overflow::kSaturate));
    }
  }
  EXPECT_EQ(keys[1], 0xFE);  // -448
  // The view decodes code · scale.
  EXPECT_EQ(ReadKv(seq.Layer(1), 2, 1, true)[3], 448.0f * testing::TestScale(1, 1, true));
}

TEST(PagedKvCache, BadCallsNameTheValue) {
  PagedKvCache cache(TestConfig(KvDtype::kF32, 4, 8, 10));
  const SeqId a = cache.Add();
  ASSERT_TRUE(Extend(cache, a, Range(1, 3)));
  KvSequence& seq = cache.Sequence(a);
  for (SeqId bad : {SeqId{0}, SeqId{77}}) {
    const std::string id = "unknown sequence id " + std::to_string(bad);
    ExpectMessageHas(ErrorOf([&] { cache.Free(bad); }), {id});
    ExpectMessageHas(ErrorOf([&] { cache.Fork(bad); }), {id});
    ExpectMessageHas(ErrorOf([&] { cache.Sequence(bad); }), {id});
    ExpectMessageHas(ErrorOf([&] { cache.Tokens(bad); }), {id});
    ExpectMessageHas(ErrorOf([&] { cache.BlockTable(bad); }), {id});
    ExpectMessageHas(ErrorOf([&] { cache.BlocksToGrow(bad, 1); }), {id});
    ExpectMessageHas(ErrorOf([&] { cache.SlotMapping(bad, 0, 1); }), {id});
    const std::vector<SeqId> ids = {a, bad};
    ExpectMessageHas(ErrorOf([&] { cache.FlashInferPages(ids); }), {id});
  }
  EXPECT_FALSE(cache.Contains(77));
  EXPECT_TRUE(cache.Contains(a));
  ExpectMessageHas(ErrorOf([&] { seq.Reserve(8); }), {"holds 3 positions", "8 more", "max_positions 10"});
  ExpectMessageHas(ErrorOf([&] { seq.Reserve(-1); }), {"Reserve(-1)"});
  const float kv[8] = {};
  ExpectMessageHas(ErrorOf([&] { seq.Write(0, 3, kv, kv); }), {"position 3", "reserved [3, 3)"});
  seq.Reserve(2);
  ExpectMessageHas(ErrorOf([&] { seq.Write(0, 2, kv, kv); }), {"position 2", "[3, 5)"});
  ExpectMessageHas(ErrorOf([&] { seq.Write(0, 5, kv, kv); }), {"position 5", "[3, 5)"});
  ExpectMessageHas(ErrorOf([&] { seq.Write(2, 3, kv, kv); }), {"layer 2", "[0, 2)"});
  ExpectMessageHas(ErrorOf([&] { seq.Layer(-1); }), {"layer -1"});
  ExpectMessageHas(ErrorOf([&] { cache.LayerKeys(2); }), {"layer 2"});
  ExpectMessageHas(ErrorOf([&] { seq.Commit(Ids{1, 2, 3}); }), {"Commit of 3 tokens", "only 2"});
  ExpectMessageHas(ErrorOf([&] { cache.SlotMapping(a, 4, 2); }), {"positions [4, 6)", "[0, 5)"});
  ExpectMessageHas(ErrorOf([&] { cache.SlotMapping(a, -1, 1); }), {"positions [-1, 0)"});
  ExpectMessageHas(ErrorOf([&] { cache.Add(Range(0, 11)); }), {"11 tokens", "max_positions 10"});
  ExpectMessageHas(ErrorOf([&] { cache.BlocksToGrow(a, -2); }), {"-2"});
  cache.CheckInvariants();
}

}  // namespace
}  // namespace plumb
