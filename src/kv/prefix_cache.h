// PrefixCache: which physical blocks hold the keys and values of which token prefix
// (docs/kv-cache.md, "Prefix caching").
//
// A full block is keyed as vLLM keys it: by a hash of its token ids chained with the hash of the block before
// it, so equal hashes mean (up to a collision) the same tokens from the start of the sequence. The hash only
// picks candidates: an entry matches only when its own token ids are equal and it extends the same prefix,
// which is decided exactly by prefix ids: the id of a block's prefix is the id an existing entry with the
// same parent id and token ids already has, else a new one. By induction, two entries have the same id
// exactly when their whole token prefixes are equal, so a hash collision can never share wrong data.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace plumb::kv_detail {

// The prefix a full block completes: everything before it and the block itself.
struct PrefixKey {
  std::uint64_t hash = 0;  // chained hash of the token ids from position 0 to the end of the block
  std::uint64_t id = 0;    // identity of that exact token prefix; 0 is the empty prefix
};

// The hash of a block of `tokens` after a prefix whose hash is `parent_hash` (splitmix64 steps).
using BlockHashFn = std::uint64_t (*)(std::uint64_t parent_hash, std::span<const int> tokens);
std::uint64_t ChainBlockHash(std::uint64_t parent_hash, std::span<const int> tokens);
// The key of the empty prefix, which a sequence's first block extends.
PrefixKey EmptyPrefix();

class PrefixCache {
 public:
  // `hash` is replaceable so that tests can force collisions.
  PrefixCache(int num_blocks, int block_size, BlockHashFn hash = &ChainBlockHash);

  // A block holding `parent` followed by `tokens` (block_size ids), or -1; on a hit *key is its key.
  int Find(const PrefixKey& parent, std::span<const int> tokens, PrefixKey* key) const;
  // Records that `block` (not yet in the cache) holds `parent` followed by `tokens`; returns that prefix's
  // key. A prefix already cached in another block keeps its id: duplicates are kept, either may be found.
  PrefixKey Insert(const PrefixKey& parent, std::span<const int> tokens, int block);
  // Forgets what `block` holds (it is being reused for other contents).
  void Erase(int block);
  bool Contains(int block) const { return in_cache_[static_cast<std::size_t>(block)] != 0; }
  int size() const { return static_cast<int>(by_hash_.size()); }

 private:
  std::span<const int> TokensOf(int block) const;
  int FindExact(std::uint64_t hash, std::uint64_t parent_id, std::span<const int> tokens) const;

  int block_size_;
  BlockHashFn hash_fn_;
  std::unordered_multimap<std::uint64_t, int> by_hash_;  // chained hash -> block
  std::vector<char> in_cache_;                           // [num_blocks] 1 while the block has an entry
  std::vector<std::uint64_t> hash_;                      // [num_blocks] the entry's chained hash
  std::vector<std::uint64_t> id_;                        // [num_blocks] the entry's prefix id
  std::vector<std::uint64_t> parent_id_;                 // [num_blocks] the prefix id of the block before
  std::vector<int> tokens_;                              // [num_blocks][block_size] the entry's token ids
  std::uint64_t next_id_ = 1;
};

}  // namespace plumb::kv_detail
