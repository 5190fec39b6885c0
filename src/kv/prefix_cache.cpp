// The prefix cache of a PagedKvCache: docs/kv-cache.md, "Prefix caching".
#include "prefix_cache.h"

#include <algorithm>

#include "plumb/core/extent.h"

namespace plumb::kv_detail {
namespace {

// splitmix64's finalizer: every input bit affects every output bit.
std::uint64_t Mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

std::uint64_t ChainBlockHash(std::uint64_t parent_hash, std::span<const int> tokens) {
  std::uint64_t h = Mix(parent_hash);
  for (int t : tokens) h = Mix(h ^ static_cast<std::uint32_t>(t));
  return h;
}

PrefixKey EmptyPrefix() {
  return PrefixKey{Mix(0), 0};
}

PrefixCache::PrefixCache(int num_blocks, int block_size, BlockHashFn hash)
    : block_size_(block_size),
      hash_fn_(hash),
      in_cache_(static_cast<std::size_t>(num_blocks), 0),
      hash_(static_cast<std::size_t>(num_blocks), 0),
      id_(static_cast<std::size_t>(num_blocks), 0),
      parent_id_(static_cast<std::size_t>(num_blocks), 0),
      tokens_(Extent(num_blocks, block_size), 0) {}

std::span<const int> PrefixCache::TokensOf(int block) const {
  return std::span<const int>(tokens_).subspan(Extent(block, block_size_),
                                               static_cast<std::size_t>(block_size_));
}

int PrefixCache::FindExact(std::uint64_t hash, std::uint64_t parent_id, std::span<const int> tokens) const {
  const auto [first, last] = by_hash_.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    const int block = it->second;
    const auto b = static_cast<std::size_t>(block);
    if (parent_id_[b] == parent_id && std::ranges::equal(TokensOf(block), tokens)) return block;
  }
  return -1;
}

int PrefixCache::Find(const PrefixKey& parent, std::span<const int> tokens, PrefixKey* key) const {
  const std::uint64_t hash = hash_fn_(parent.hash, tokens);
  const int block = FindExact(hash, parent.id, tokens);
  if (block >= 0) *key = PrefixKey{hash, id_[static_cast<std::size_t>(block)]};
  return block;
}

PrefixKey PrefixCache::Insert(const PrefixKey& parent, std::span<const int> tokens, int block) {
  const std::uint64_t hash = hash_fn_(parent.hash, tokens);
  const int same = FindExact(hash, parent.id, tokens);
  const std::uint64_t id = same >= 0 ? id_[static_cast<std::size_t>(same)] : next_id_++;
  const auto b = static_cast<std::size_t>(block);
  in_cache_[b] = 1;
  hash_[b] = hash;
  id_[b] = id;
  parent_id_[b] = parent.id;
  std::ranges::copy(tokens, tokens_.begin() + static_cast<std::ptrdiff_t>(b * block_size_));
  by_hash_.emplace(hash, block);
  return PrefixKey{hash, id};
}

void PrefixCache::Erase(int block) {
  const auto b = static_cast<std::size_t>(block);
  const auto [first, last] = by_hash_.equal_range(hash_[b]);
  for (auto it = first; it != last; ++it) {
    if (it->second == block) {
      by_hash_.erase(it);
      break;
    }
  }
  in_cache_[b] = 0;
}

}  // namespace plumb::kv_detail
