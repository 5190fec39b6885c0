// PagedKvCache: the KV cache of many sequences in one fixed pool of blocks, as vLLM and FlashInfer keep it.
//
// Physical layout, per layer, of keys and of values each (FlashInfer's "NHD", vLLM's flash backend):
//   [num_blocks][block_size][n_kv_heads][head_dim]   elements of the cache's KvDtype
// A sequence's block table maps its logical block i (positions i·block_size .. i·block_size+block_size-1) to
// a physical block; position p lives in slot = block_table[p / block_size] · block_size + p % block_size.
// Blocks are taken from a free list as tokens arrive, reference-counted, and shared: Fork shares all of a
// parent's blocks, and the prefix cache shares the full blocks of a prompt whose token ids (that block and
// every one before it) hash the same as a cached block's. A shared block is never written: a sequence that
// must write into one gets a copy first (copy-on-write). docs/kv-cache.md specifies all of it.
//
// Not thread-safe, with one exception: Write and Layer of different positions (any sequences) may run in
// parallel, since they touch no bookkeeping. Everything else (Add, Fork, Free, Reserve, Commit) runs alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "plumb/kv/kv_sequence.h"

namespace plumb {

struct PagedKvConfig {
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int block_size = 16;    // positions per block: a power of two from 1 to 256
  int num_blocks = 0;     // physical blocks in the pool
  int max_positions = 0;  // the most positions one sequence may hold (the model's context)
  KvDtype dtype = KvDtype::kF32;
  // FP8 only: [n_layers][n_kv_heads] scales (a per-tensor scale repeated per head); empty means all 1.
  std::vector<float> k_scales;
  std::vector<float> v_scales;
  bool prefix_caching = true;

  // 2 · n_layers · n_kv_heads · head_dim · KvDtypeBytes(dtype): what one cached token costs.
  std::size_t BytesPerToken() const;
  std::size_t BytesPerBlock() const { return BytesPerToken() * static_cast<std::size_t>(block_size); }
  // The number of blocks that fit in `bytes` (at least 1; throws plumb::Error when not even one does).
  int BlocksForBudget(std::size_t bytes) const;
};

using SeqId = std::int64_t;

// The pool's state, for `plumb generate` and the scheduler to report.
struct PagedKvUsage {
  int total_blocks = 0;
  int used_blocks = 0;    // referenced by at least one sequence
  int cached_blocks = 0;  // referenced by none, kept by the prefix cache; reusable (evicted when needed)
  int free_blocks = 0;    // neither: total - used - cached
  // Committed positions held by used blocks, each block counted once (with the most any holder has in it).
  std::int64_t stored_positions = 0;
  // used_blocks · block_size − stored_positions: the unused tail slots of last blocks, each block once (and
  // slots reserved but not yet committed). docs/kv-cache.md, "Accounting".
  std::int64_t fragmented_positions = 0;
  int sequences = 0;
};

class PagedKvCache {
 public:
  explicit PagedKvCache(PagedKvConfig config);
  ~PagedKvCache();
  PagedKvCache(const PagedKvCache&) = delete;
  PagedKvCache& operator=(const PagedKvCache&) = delete;

  const PagedKvConfig& config() const { return config_; }

  // A new sequence that will start with `prompt`. With prefix caching, its leading full blocks whose hashes
  // match cached blocks are shared and its length() starts at the number of tokens they hold, but never at
  // the whole prompt: at least one token is left to compute, so that the caller gets its logits.
  SeqId Add(std::span<const int> prompt = {});
  // A new sequence holding what `parent` holds: every block shared (reference counts + 1), its token ids
  // copied. The parent must have no reserved, uncommitted positions (plumb::Error otherwise): their slots may
  // lie in its partial last block, which the fork would share while the parent still writes into it.
  SeqId Fork(SeqId parent);
  // Drops the sequence; its blocks lose a reference, and those left unreferenced go to the free list (full
  // blocks known to the prefix cache stay there as cached blocks, reused first-in first-out when the free
  // list runs dry). Throws plumb::Error for an unknown id.
  void Free(SeqId id);
  bool Contains(SeqId id) const;

  // The sequence as the model computes against it; valid until Free(id). Its Layer() views stay valid until
  // the next Reserve of that sequence (a copy-on-write may replace a block) and Free.
  KvSequence& Sequence(SeqId id);
  const KvSequence& Sequence(SeqId id) const;
  // The token ids committed to the sequence so far.
  std::span<const int> Tokens(SeqId id) const;
  // Its physical blocks: ceil((length + reserved positions) / block_size) of them.
  std::span<const int> BlockTable(SeqId id) const;

  // Free + cached blocks: what Reserve may still take.
  int AvailableBlocks() const;
  // Blocks a Reserve(n) on this sequence would take now (new blocks plus a copy-on-write of its last block).
  int BlocksToGrow(SeqId id, int n) const;
  PagedKvUsage Usage() const;

  // FlashInfer's paged-KV description of a batch of sequences (each at its current reserved length):
  //   indptr[i]..indptr[i+1]: sequence i's pages in `indices`;  last_page_len[i]: positions in its last page.
  struct FlashInferView {
    std::vector<int> indptr, indices, last_page_len;
  };
  FlashInferView FlashInferPages(std::span<const SeqId> ids) const;
  // vLLM's slot mapping: slot of each of positions [first, first + count) of the sequence.
  std::vector<std::int64_t> SlotMapping(SeqId id, int first, int count) const;

  // One layer's raw storage, [num_blocks][block_size][n_kv_heads][head_dim] elements (tests, fixtures).
  const void* LayerKeys(int layer) const;
  const void* LayerValues(int layer) const;

  // Checks the bookkeeping (tests): every reference count equals the number of block tables holding the
  // block, every block is in exactly one of used / cached / free, the prefix cache holds only full committed
  // or cached blocks, a reserved slot lies in a block only its sequence holds. Throws plumb::Error naming the
  // first violation. Linear in the pool and the tables.
  void CheckInvariants() const;

 private:
  struct State;
  PagedKvConfig config_;
  std::unique_ptr<State> state_;
};

}  // namespace plumb
