// The paged cache's private PrefixCache and BlockAllocator (src/kv/), tested directly: the prefix cache with
// a hash that collides on purpose, which the public API cannot force (docs/kv-cache.md, "Prefix caching").
#include "../../src/kv/prefix_cache.h"

#include <gtest/gtest.h>

#include <vector>

#include "../../src/kv/block_allocator.h"

namespace plumb::kv_detail {
namespace {

using Ids = std::vector<int>;

std::uint64_t Collide(std::uint64_t, std::span<const int>) {
  return 42;
}

TEST(PrefixCache, ACollisionNeverMatchesOtherTokens) {
  PrefixCache cache(8, 2, &Collide);  // every block hashes the same
  const PrefixKey root = EmptyPrefix();
  const PrefixKey a = cache.Insert(root, Ids{1, 2}, 0);
  PrefixKey key;
  EXPECT_EQ(cache.Find(root, Ids{1, 3}, &key), -1);
  EXPECT_EQ(cache.Find(root, Ids{2, 1}, &key), -1);
  ASSERT_EQ(cache.Find(root, Ids{1, 2}, &key), 0);
  EXPECT_EQ(key.id, a.id);
  EXPECT_EQ(key.hash, 42u);
}

TEST(PrefixCache, ACollisionNeverMatchesAnotherPrefix) {
  PrefixCache cache(8, 2, &Collide);
  const PrefixKey root = EmptyPrefix();
  const PrefixKey a = cache.Insert(root, Ids{1, 2}, 0);
  const PrefixKey b = cache.Insert(root, Ids{3, 4}, 1);
  EXPECT_NE(a.id, b.id);
  cache.Insert(a, Ids{5, 6}, 2);  // [1 2][5 6]
  PrefixKey key;
  EXPECT_EQ(cache.Find(b, Ids{5, 6}, &key), -1);  // [3 4][5 6]: same ids, same hash, other prefix
  EXPECT_EQ(cache.Find(a, Ids{5, 6}, &key), 2);
}

TEST(PrefixCache, EqualPrefixesShareAnIdAndDuplicatesOutliveEachOther) {
  PrefixCache cache(8, 2);
  const PrefixKey root = EmptyPrefix();
  const PrefixKey a = cache.Insert(root, Ids{1, 2}, 0);
  const PrefixKey dup = cache.Insert(root, Ids{1, 2}, 3);  // computed again by another sequence
  EXPECT_EQ(dup.id, a.id);
  EXPECT_EQ(dup.hash, a.hash);
  cache.Insert(dup, Ids{5, 6}, 4);  // extends the duplicate: found after either copy of [1 2]
  EXPECT_EQ(cache.size(), 3);
  cache.Erase(0);
  EXPECT_FALSE(cache.Contains(0));
  PrefixKey key;
  EXPECT_EQ(cache.Find(root, Ids{1, 2}, &key), 3);
  EXPECT_EQ(cache.Find(key, Ids{5, 6}, &key), 4);
  cache.Erase(3);
  EXPECT_EQ(cache.Find(root, Ids{1, 2}, &key), -1);
  // Once no block holds [1 2], it is a new prefix: what extended the old one is not found through it.
  const PrefixKey fresh = cache.Insert(root, Ids{1, 2}, 5);
  EXPECT_NE(fresh.id, a.id);
  EXPECT_EQ(cache.Find(fresh, Ids{5, 6}, &key), -1);
  EXPECT_EQ(cache.size(), 2);
}

TEST(PrefixCache, TheChainedHashDependsOnOrderAndParent) {
  const std::uint64_t root = EmptyPrefix().hash;
  EXPECT_NE(ChainBlockHash(root, Ids{1, 2}), ChainBlockHash(root, Ids{2, 1}));
  EXPECT_NE(ChainBlockHash(root, Ids{1, 2}), ChainBlockHash(ChainBlockHash(root, Ids{0, 0}), Ids{1, 2}));
  EXPECT_EQ(ChainBlockHash(root, Ids{1, 2}), ChainBlockHash(root, Ids{1, 2}));
}

TEST(BlockAllocator, FreeFirstThenCachedOldestFirst) {
  BlockAllocator blocks(4);
  int evicted;
  EXPECT_EQ(blocks.Allocate(&evicted), 0);
  EXPECT_EQ(blocks.Allocate(&evicted), 1);
  EXPECT_EQ(blocks.Allocate(&evicted), 2);
  EXPECT_EQ(evicted, -1);
  blocks.Release(1, /*cacheable=*/true);
  blocks.Release(0, /*cacheable=*/true);
  blocks.Release(2, /*cacheable=*/false);
  EXPECT_EQ(blocks.CachedBlocks(), Ids({1, 0}));
  EXPECT_EQ(blocks.FreeBlocks(), Ids({2, 3}));
  EXPECT_EQ(blocks.available(), 4);
  blocks.AddRef(1);  // a prefix hit takes a cached block back
  EXPECT_EQ(blocks.ref(1), 1);
  EXPECT_EQ(blocks.CachedBlocks(), Ids({0}));
  EXPECT_EQ(blocks.Allocate(&evicted), 2);
  EXPECT_EQ(blocks.Allocate(&evicted), 3);
  EXPECT_EQ(blocks.Allocate(&evicted), 0);
  EXPECT_EQ(evicted, 0);
  EXPECT_EQ(blocks.available(), 0);
  EXPECT_EQ(blocks.used_count(), 4);
}

}  // namespace
}  // namespace plumb::kv_detail
