// The free list and the cached queue of a PagedKvCache: docs/kv-cache.md, "Blocks: used, cached, free".
#include "block_allocator.h"

namespace plumb::kv_detail {

BlockAllocator::BlockAllocator(int num_blocks)
    : ref_(static_cast<std::size_t>(num_blocks), 0),
      prev_(static_cast<std::size_t>(num_blocks), -1),
      next_(static_cast<std::size_t>(num_blocks), -1),
      in_queue_(static_cast<std::size_t>(num_blocks), 0) {
  // Pushed in reverse so that a fresh pool hands out blocks 0, 1, 2, ...: block tables of a test or a
  // fixture then read in order.
  free_.reserve(static_cast<std::size_t>(num_blocks));
  for (int b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

int BlockAllocator::Allocate(int* evicted) {
  int block;
  *evicted = -1;
  if (!free_.empty()) {
    block = free_.back();
    free_.pop_back();
  } else {
    block = head_;
    Unlink(block);
    *evicted = block;
  }
  ref_[block] = 1;
  return block;
}

void BlockAllocator::AddRef(int block) {
  if (ref_[block] == 0 && in_queue_[block]) Unlink(block);  // a cached block is used again
  ++ref_[block];
}

void BlockAllocator::Release(int block, bool cacheable) {
  if (--ref_[block] > 0) return;
  if (!cacheable) {
    free_.push_back(block);
    return;
  }
  prev_[block] = tail_;
  next_[block] = -1;
  if (tail_ >= 0) {
    next_[tail_] = block;
  } else {
    head_ = block;
  }
  tail_ = block;
  in_queue_[block] = 1;
  ++cached_count_;
}

void BlockAllocator::Unlink(int block) {
  const int p = prev_[block];
  const int n = next_[block];
  if (p >= 0) {
    next_[p] = n;
  } else {
    head_ = n;
  }
  if (n >= 0) {
    prev_[n] = p;
  } else {
    tail_ = p;
  }
  prev_[block] = next_[block] = -1;
  in_queue_[block] = 0;
  --cached_count_;
}

std::vector<int> BlockAllocator::CachedBlocks() const {
  std::vector<int> blocks;
  for (int b = head_; b >= 0; b = next_[b]) blocks.push_back(b);
  return blocks;
}

std::vector<int> BlockAllocator::FreeBlocks() const {
  return std::vector<int>(free_.rbegin(), free_.rend());
}

}  // namespace plumb::kv_detail
