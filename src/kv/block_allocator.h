// BlockAllocator: which physical blocks of a PagedKvCache's pool are in use, cached or free
// (docs/kv-cache.md, "Blocks: used, cached, free").
//
// Every block is in exactly one of three places:
//   used    reference count > 0: held by that many block tables
//   cached  reference count 0, but its contents are known to the prefix cache, so a later prompt may take it
//           back; kept in a first-in first-out queue and evicted (reused for new contents) only when the free
//           list is empty
//   free    reference count 0 and nothing worth keeping
// The allocator knows nothing of contents or hashes: the caller says, when a block loses its last
// reference, whether it is worth caching, and hears back which cached block an allocation evicted.
#pragma once

#include <vector>

namespace plumb::kv_detail {

class BlockAllocator {
 public:
  explicit BlockAllocator(int num_blocks);

  int total() const { return static_cast<int>(ref_.size()); }
  int free_count() const { return static_cast<int>(free_.size()); }
  int cached_count() const { return cached_count_; }
  int used_count() const { return total() - free_count() - cached_count(); }
  // What Allocate can still hand out: free blocks, then cached ones.
  int available() const { return free_count() + cached_count(); }

  int ref(int block) const { return ref_[block]; }
  bool is_cached(int block) const { return ref_[block] == 0 && in_queue_[block]; }

  // Takes a block with reference count 1: the free list's next block, or else the oldest cached block,
  // whose id is then also stored in *evicted (else *evicted = -1) so that the caller can forget its
  // contents. The caller checked available() > 0.
  int Allocate(int* evicted);
  // One more table holds `block`; a cached block leaves the queue and is used again.
  void AddRef(int block);
  // One table fewer holds `block`; at 0 it joins the cached queue's tail (`cacheable`) or the free list.
  void Release(int block, bool cacheable);

  // The cached queue, oldest first, and the free list, next-to-allocate first (invariant checks).
  std::vector<int> CachedBlocks() const;
  std::vector<int> FreeBlocks() const;

 private:
  void Unlink(int block);

  std::vector<int> ref_;        // [num_blocks] reference counts
  std::vector<int> free_;       // free block ids; the next to allocate is at the back
  std::vector<int> prev_;       // [num_blocks] cached queue links (-1: none), meaningful while queued
  std::vector<int> next_;       // [num_blocks]
  std::vector<char> in_queue_;  // [num_blocks] 1 while the block is in the cached queue
  int head_ = -1;               // oldest cached block (evicted first), -1 when the queue is empty
  int tail_ = -1;               // newest cached block
  int cached_count_ = 0;
};

}  // namespace plumb::kv_detail
