// PagedKvCache: docs/kv-cache.md is the specification ("Layout", "Blocks: used, cached, free",
// "Copy-on-write", "Prefix caching", "Accounting").
#include "plumb/kv/paged_kv_cache.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "block_allocator.h"
#include "plumb/core/error.h"
#include "plumb/core/extent.h"
#include "prefix_cache.h"

namespace plumb {
namespace {

using kv_detail::BlockAllocator;
using kv_detail::PrefixCache;
using kv_detail::PrefixKey;

bool IsPowerOfTwo(int x) {
  return x > 0 && (x & (x - 1)) == 0;
}

// The dimensions BytesPerToken and BlocksForBudget rely on.
void CheckShape(const PagedKvConfig& c) {
  if (c.n_layers <= 0 || c.n_kv_heads <= 0 || c.head_dim <= 0) {
    throw MakeError("paged KV cache: every dimension must be positive (layers ", c.n_layers, ", kv_heads ",
                    c.n_kv_heads, ", head_dim ", c.head_dim, ")");
  }
  if (!IsPowerOfTwo(c.block_size) || c.block_size > 256) {
    throw MakeError("paged KV cache: block_size ", c.block_size, " is not a power of two from 1 to 256");
  }
}

void CheckScales(const PagedKvConfig& c, const std::vector<float>& scales, const char* name) {
  const std::size_t want = Extent(c.n_layers, c.n_kv_heads);
  if (!scales.empty() && scales.size() != want) {
    throw MakeError("paged KV cache: ", name, " has ", scales.size(),
                    " values, want 0 or n_layers · n_kv_heads = ", want);
  }
  for (std::size_t i = 0; i < scales.size(); ++i) {
    if (!std::isfinite(scales[i]) || scales[i] <= 0.0f) {
      throw MakeError("paged KV cache: ", name, "[", i, "] (layer ",
                      i / static_cast<std::size_t>(c.n_kv_heads), ", kv head ",
                      i % static_cast<std::size_t>(c.n_kv_heads), ") is ", scales[i],
                      ", want a finite value > 0");
    }
  }
}

void CheckConfig(const PagedKvConfig& c) {
  CheckShape(c);
  if (c.num_blocks < 1) throw MakeError("paged KV cache: num_blocks ", c.num_blocks, " is less than 1");
  if (c.max_positions < 1)
    throw MakeError("paged KV cache: max_positions ", c.max_positions, " is less than 1");
  KvDtypeBytes(c.dtype);  // throws for a value outside the enum
  CheckScales(c, c.k_scales, "k_scales");
  CheckScales(c, c.v_scales, "v_scales");
}

int CeilDiv(int a, int b) {
  return static_cast<int>((static_cast<std::int64_t>(a) + b - 1) / b);
}

}  // namespace

std::size_t PagedKvConfig::BytesPerToken() const {
  return 2 * Extent(n_layers, n_kv_heads) * static_cast<std::size_t>(head_dim) * KvDtypeBytes(dtype);
}

int PagedKvConfig::BlocksForBudget(std::size_t bytes) const {
  CheckShape(*this);
  const std::size_t blocks = bytes / BytesPerBlock();
  if (blocks < 1) {
    throw MakeError("paged KV cache: a budget of ", bytes, " bytes holds no block of ", BytesPerBlock(),
                    " bytes (", block_size, " positions of ", BytesPerToken(), " bytes)");
  }
  return static_cast<int>(std::min<std::size_t>(blocks, INT_MAX));
}

// ---- the pool and its sequences -------------------------------------------------------------------------

struct PagedKvCache::State {
  class Seq;

  explicit State(const PagedKvConfig& c);

  // Takes a block for new contents; an evicted cached block's contents are forgotten.
  int Allocate();
  // Drops one reference to each block of `table`, last block first: a sequence's tail is then evicted before
  // its head, which more prompts share (vLLM frees in the same order).
  void Release(std::span<const int> table);
  Seq& Get(SeqId id) const;
  // Byte offset of slot `slot` (= block · block_size + offset) in one layer's keys or values.
  std::size_t SlotBytes(std::int64_t slot) const { return Extent(slot, slot_bytes); }

  const PagedKvConfig& config;
  std::size_t elem_bytes;
  std::size_t slot_bytes;  // one position of one layer: n_kv_heads · head_dim elements
  // Per layer, [num_blocks][block_size][n_kv_heads][head_dim] elements of the dtype, keys and values.
  std::vector<std::vector<std::uint8_t>> keys;    // [n_layers][...]
  std::vector<std::vector<std::uint8_t>> values;  // [n_layers][...]
  std::vector<float> k_scales;                    // [n_layers][n_kv_heads], all 1 when the config gives none
  std::vector<float> v_scales;                    // [n_layers][n_kv_heads]
  BlockAllocator blocks;
  PrefixCache prefix;
  std::unordered_map<SeqId, std::unique_ptr<Seq>> sequences;
  SeqId next_id = 1;
};

// One sequence: its block table, its token ids and how far it has reserved.
class PagedKvCache::State::Seq final : public KvSequence {
 public:
  Seq(State* state, SeqId id) : state_(state), id_(id) {
    // Room for the longest sequence up front, so that Layer()'s span of the table survives Reserve.
    table_.reserve(static_cast<std::size_t>(CeilDiv(config().max_positions, config().block_size)));
  }

  int n_layers() const override { return config().n_layers; }
  int n_kv_heads() const override { return config().n_kv_heads; }
  int head_dim() const override { return config().head_dim; }
  KvDtype dtype() const override { return config().dtype; }
  int length() const override { return length_; }
  int max_positions() const override { return config().max_positions; }

  void Reserve(int n) override;
  void Write(int layer, int pos, const float* k, const float* v) override;
  void WriteStored(int layer, int pos, const void* k, const void* v) override;
  KvLayerView Layer(int layer) const override;
  void Commit(std::span<const int> tokens) override;

  // New blocks plus a copy-on-write that Reserve(n) would take now.
  int BlocksToGrow(int n) const;
  // Positions [0, end()) are committed or reserved; the table covers exactly them.
  int end() const { return length_ + reserved_; }

  State* state_;
  SeqId id_;
  std::vector<int> table_;        // [ceil(end() / block_size)] physical block of each logical block
  std::vector<int> tokens_;       // [length()] committed token ids
  std::vector<PrefixKey> chain_;  // [length() / block_size] prefix-cache key of each full block
  int length_ = 0;
  int reserved_ = 0;

 private:
  const PagedKvConfig& config() const { return state_->config; }
  void CheckLayer(int layer) const;
  // Replaces the shared partial last block by a copy of its valid slots (all layers, K and V).
  void CopyOnWrite();
  std::size_t WriteOffset(int layer, int pos) const;  // bytes into a layer's tensors; throws unless reserved
  bool LastBlockShared() const;
};

PagedKvCache::State::State(const PagedKvConfig& c)
    : config(c),
      elem_bytes(KvDtypeBytes(c.dtype)),
      slot_bytes(Extent(c.n_kv_heads, c.head_dim, elem_bytes)),
      blocks(c.num_blocks),
      prefix(c.num_blocks, c.block_size) {
  const std::size_t layer_bytes = Extent(c.num_blocks, c.block_size, slot_bytes);
  keys.assign(static_cast<std::size_t>(c.n_layers), std::vector<std::uint8_t>(layer_bytes));
  values.assign(static_cast<std::size_t>(c.n_layers), std::vector<std::uint8_t>(layer_bytes));
  const std::size_t n_scales = Extent(c.n_layers, c.n_kv_heads);
  k_scales = c.k_scales.empty() ? std::vector<float>(n_scales, 1.0f) : c.k_scales;
  v_scales = c.v_scales.empty() ? std::vector<float>(n_scales, 1.0f) : c.v_scales;
}

int PagedKvCache::State::Allocate() {
  int evicted;
  const int block = blocks.Allocate(&evicted);
  if (evicted >= 0) prefix.Erase(evicted);
  return block;
}

void PagedKvCache::State::Release(std::span<const int> table) {
  for (auto it = table.rbegin(); it != table.rend(); ++it) blocks.Release(*it, prefix.Contains(*it));
}

PagedKvCache::State::Seq& PagedKvCache::State::Get(SeqId id) const {
  const auto it = sequences.find(id);
  if (it == sequences.end()) throw MakeError("paged KV cache: unknown sequence id ", id);
  return *it->second;
}

void PagedKvCache::State::Seq::CheckLayer(int layer) const {
  if (layer < 0 || layer >= config().n_layers) {
    throw MakeError("paged KV cache: layer ", layer, " outside [0, ", config().n_layers, ")");
  }
}

bool PagedKvCache::State::Seq::LastBlockShared() const {
  // Only a partial block is ever written after it is shared; a full one is never written again.
  if (length_ % config().block_size == 0) return false;
  return state_->blocks.ref(table_[static_cast<std::size_t>(length_ / config().block_size)]) > 1;
}

int PagedKvCache::State::Seq::BlocksToGrow(int n) const {
  const int new_end = length_ + n;
  if (new_end <= end()) return 0;
  const int grow = CeilDiv(new_end, config().block_size) - static_cast<int>(table_.size());
  return grow + (LastBlockShared() ? 1 : 0);
}

void PagedKvCache::State::Seq::CopyOnWrite() {
  const auto index = static_cast<std::size_t>(length_ / config().block_size);
  const int old_block = table_[index];
  const int new_block = state_->Allocate();
  const std::int64_t bs = config().block_size;
  const std::size_t valid_bytes = state_->SlotBytes(length_ % config().block_size);
  for (int l = 0; l < config().n_layers; ++l) {
    for (auto* pool : {&state_->keys, &state_->values}) {
      std::uint8_t* data = (*pool)[static_cast<std::size_t>(l)].data();
      std::memcpy(data + state_->SlotBytes(new_block * bs), data + state_->SlotBytes(old_block * bs),
                  valid_bytes);
    }
  }
  table_[index] = new_block;
  state_->blocks.Release(old_block, state_->prefix.Contains(old_block));
}

void PagedKvCache::State::Seq::Reserve(int n) {
  if (n < 0) throw MakeError("paged KV cache: sequence ", id_, ": Reserve(", n, ") of a negative count");
  if (n > config().max_positions - length_) {
    throw MakeError("paged KV cache: sequence ", id_, " holds ", length_, " positions; ", n,
                    " more exceed max_positions ", config().max_positions);
  }
  if (length_ + n <= end()) return;  // within what is already reserved
  const int need = BlocksToGrow(n);
  const int available = state_->blocks.available();
  if (need > available) {
    throw MakeError("paged KV cache full: sequence ", id_, " needs ", need, " blocks for positions [",
                    length_, ", ", length_ + n, ") and ", available, " are available (",
                    state_->blocks.free_count(), " free + ", state_->blocks.cached_count(), " cached of ",
                    config().num_blocks, ")");
  }
  if (LastBlockShared()) CopyOnWrite();
  const int blocks_needed = CeilDiv(length_ + n, config().block_size);
  while (static_cast<int>(table_.size()) < blocks_needed) table_.push_back(state_->Allocate());
  reserved_ = n;
}

std::size_t PagedKvCache::State::Seq::WriteOffset(int layer, int pos) const {
  CheckLayer(layer);
  if (pos < length_ || pos >= end()) {
    throw MakeError("paged KV cache: sequence ", id_, ": Write at position ", pos, " outside the reserved [",
                    length_, ", ", end(), ")");
  }
  const int bs = config().block_size;
  const std::int64_t slot =
      static_cast<std::int64_t>(table_[static_cast<std::size_t>(pos / bs)]) * bs + pos % bs;
  return state_->SlotBytes(slot);
}

// A slot's heads are adjacent ([n_kv_heads][head_dim]), so one position is one copy per tensor.
void PagedKvCache::State::Seq::WriteStored(int layer, int pos, const void* k, const void* v) {
  const std::size_t offset = WriteOffset(layer, pos);
  const std::size_t bytes = Extent(config().n_kv_heads, config().head_dim) * state_->elem_bytes;
  const auto l = static_cast<std::size_t>(layer);
  std::memcpy(state_->keys[l].data() + offset, k, bytes);
  std::memcpy(state_->values[l].data() + offset, v, bytes);
}

void PagedKvCache::State::Seq::Write(int layer, int pos, const float* k, const float* v) {
  const std::size_t offset = WriteOffset(layer, pos);
  const auto l = static_cast<std::size_t>(layer);
  const int hd = config().head_dim;
  for (int h = 0; h < config().n_kv_heads; ++h) {
    const std::size_t head = Extent(h, hd);
    const std::size_t scale = l * static_cast<std::size_t>(config().n_kv_heads) + static_cast<std::size_t>(h);
    EncodeKv(config().dtype, k + head, hd, state_->k_scales[scale],
             state_->keys[l].data() + offset + head * state_->elem_bytes);
    EncodeKv(config().dtype, v + head, hd, state_->v_scales[scale],
             state_->values[l].data() + offset + head * state_->elem_bytes);
  }
}

KvLayerView PagedKvCache::State::Seq::Layer(int layer) const {
  CheckLayer(layer);
  const PagedKvConfig& c = config();
  const auto l = static_cast<std::size_t>(layer);
  KvLayerView view;
  view.dtype = c.dtype;
  view.keys = state_->keys[l].data();
  view.values = state_->values[l].data();
  view.block_table = table_;
  view.block_size = c.block_size;
  view.position_stride = static_cast<std::int64_t>(c.n_kv_heads) * c.head_dim;
  view.head_stride = c.head_dim;
  view.block_stride = c.block_size * view.position_stride;
  view.n_kv_heads = c.n_kv_heads;
  view.head_dim = c.head_dim;
  if (IsFp8(c.dtype)) {
    view.k_scales = state_->k_scales.data() + l * static_cast<std::size_t>(c.n_kv_heads);
    view.v_scales = state_->v_scales.data() + l * static_cast<std::size_t>(c.n_kv_heads);
  }
  view.length = end();
  return view;
}

void PagedKvCache::State::Seq::Commit(std::span<const int> tokens) {
  if (tokens.size() > static_cast<std::size_t>(reserved_)) {
    throw MakeError("paged KV cache: sequence ", id_, ": Commit of ", tokens.size(), " tokens, but only ",
                    reserved_, " positions are reserved");
  }
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  length_ += static_cast<int>(tokens.size());
  reserved_ -= static_cast<int>(tokens.size());
  if (!config().prefix_caching) return;
  // Blocks this commit filled join the prefix cache. They are this sequence's alone (a block with reserved
  // slots is never shared), so no other sequence reads them with different contents.
  const int bs = config().block_size;
  const std::span<const int> all(tokens_);
  for (auto i = chain_.size(); i < static_cast<std::size_t>(length_ / bs); ++i) {
    const PrefixKey parent = i == 0 ? kv_detail::EmptyPrefix() : chain_[i - 1];
    chain_.push_back(state_->prefix.Insert(
        parent, all.subspan(i * static_cast<std::size_t>(bs), static_cast<std::size_t>(bs)), table_[i]));
  }
}

// ---- PagedKvCache ----------------------------------------------------------------------------------------

PagedKvCache::PagedKvCache(PagedKvConfig config) : config_(std::move(config)) {
  CheckConfig(config_);
  state_ = std::make_unique<State>(config_);
}

PagedKvCache::~PagedKvCache() = default;

SeqId PagedKvCache::Add(std::span<const int> prompt) {
  if (prompt.size() > static_cast<std::size_t>(config_.max_positions)) {
    throw MakeError("paged KV cache: a prompt of ", prompt.size(), " tokens exceeds max_positions ",
                    config_.max_positions);
  }
  const SeqId id = state_->next_id++;
  auto seq = std::make_unique<State::Seq>(state_.get(), id);
  if (config_.prefix_caching && !prompt.empty()) {
    // Full blocks only, and never the whole prompt: its last token must still run through the model.
    const std::size_t bs = static_cast<std::size_t>(config_.block_size);
    const std::size_t max_blocks = (prompt.size() - 1) / bs;
    PrefixKey key = kv_detail::EmptyPrefix();
    for (std::size_t i = 0; i < max_blocks; ++i) {
      const int block = state_->prefix.Find(key, prompt.subspan(i * bs, bs), &key);
      if (block < 0) break;
      state_->blocks.AddRef(block);
      seq->table_.push_back(block);
      seq->chain_.push_back(key);
    }
    seq->length_ = static_cast<int>(seq->table_.size() * bs);
    seq->tokens_.assign(prompt.begin(), prompt.begin() + seq->length_);
  }
  state_->sequences.emplace(id, std::move(seq));
  return id;
}

SeqId PagedKvCache::Fork(SeqId parent) {
  const State::Seq& from = state_->Get(parent);
  if (from.reserved_ > 0) {
    throw MakeError("paged KV cache: cannot fork sequence ", parent, " while it has ", from.reserved_,
                    " reserved, uncommitted positions (commit them first)");
  }
  const SeqId id = state_->next_id++;
  auto seq = std::make_unique<State::Seq>(state_.get(), id);
  seq->table_ = from.table_;
  seq->tokens_ = from.tokens_;
  seq->chain_ = from.chain_;
  seq->length_ = from.length_;
  for (int block : seq->table_) state_->blocks.AddRef(block);
  state_->sequences.emplace(id, std::move(seq));
  return id;
}

void PagedKvCache::Free(SeqId id) {
  state_->Release(state_->Get(id).table_);
  state_->sequences.erase(id);
}

bool PagedKvCache::Contains(SeqId id) const {
  return state_->sequences.contains(id);
}

KvSequence& PagedKvCache::Sequence(SeqId id) {
  return state_->Get(id);
}

const KvSequence& PagedKvCache::Sequence(SeqId id) const {
  return state_->Get(id);
}

std::span<const int> PagedKvCache::Tokens(SeqId id) const {
  return state_->Get(id).tokens_;
}

std::span<const int> PagedKvCache::BlockTable(SeqId id) const {
  return state_->Get(id).table_;
}

int PagedKvCache::AvailableBlocks() const {
  return state_->blocks.available();
}

int PagedKvCache::BlocksToGrow(SeqId id, int n) const {
  if (n < 0) throw MakeError("paged KV cache: BlocksToGrow(", id, ", ", n, ") of a negative count");
  return state_->Get(id).BlocksToGrow(n);
}

PagedKvUsage PagedKvCache::Usage() const {
  PagedKvUsage usage;
  usage.total_blocks = config_.num_blocks;
  usage.used_blocks = state_->blocks.used_count();
  usage.cached_blocks = state_->blocks.cached_count();
  usage.free_blocks = state_->blocks.free_count();
  usage.sequences = static_cast<int>(state_->sequences.size());
  // A shared block holds the same committed positions for every sequence that can read them; count it once,
  // with the most any holder has committed in it.
  std::vector<int> stored(static_cast<std::size_t>(config_.num_blocks), 0);  // [num_blocks]
  const int bs = config_.block_size;
  for (const auto& [id, seq] : state_->sequences) {
    for (std::size_t i = 0; i < seq->table_.size(); ++i) {
      const int in_block = std::clamp(seq->length_ - static_cast<int>(i) * bs, 0, bs);
      int& s = stored[static_cast<std::size_t>(seq->table_[i])];
      s = std::max(s, in_block);
    }
  }
  for (int s : stored) usage.stored_positions += s;
  usage.fragmented_positions = static_cast<std::int64_t>(usage.used_blocks) * bs - usage.stored_positions;
  return usage;
}

PagedKvCache::FlashInferView PagedKvCache::FlashInferPages(std::span<const SeqId> ids) const {
  FlashInferView view;
  view.indptr.push_back(0);
  const int bs = config_.block_size;
  for (SeqId id : ids) {
    const State::Seq& seq = state_->Get(id);
    const int pages = CeilDiv(seq.end(), bs);
    view.indices.insert(view.indices.end(), seq.table_.begin(), seq.table_.begin() + pages);
    view.indptr.push_back(static_cast<int>(view.indices.size()));
    view.last_page_len.push_back(pages == 0 ? 0 : seq.end() - (pages - 1) * bs);
  }
  return view;
}

std::vector<std::int64_t> PagedKvCache::SlotMapping(SeqId id, int first, int count) const {
  const State::Seq& seq = state_->Get(id);
  if (first < 0 || count < 0 || count > seq.end() - first) {
    throw MakeError("paged KV cache: sequence ", id, ": slots of positions [", first, ", ",
                    static_cast<std::int64_t>(first) + count, ") outside the reserved [0, ", seq.end(), ")");
  }
  std::vector<std::int64_t> slots(static_cast<std::size_t>(count));
  const int bs = config_.block_size;
  for (int i = 0; i < count; ++i) {
    const int p = first + i;
    slots[static_cast<std::size_t>(i)] =
        static_cast<std::int64_t>(seq.table_[static_cast<std::size_t>(p / bs)]) * bs + p % bs;
  }
  return slots;
}

const void* PagedKvCache::LayerKeys(int layer) const {
  if (layer < 0 || layer >= config_.n_layers) {
    throw MakeError("paged KV cache: layer ", layer, " outside [0, ", config_.n_layers, ")");
  }
  return state_->keys[static_cast<std::size_t>(layer)].data();
}

const void* PagedKvCache::LayerValues(int layer) const {
  if (layer < 0 || layer >= config_.n_layers) {
    throw MakeError("paged KV cache: layer ", layer, " outside [0, ", config_.n_layers, ")");
  }
  return state_->values[static_cast<std::size_t>(layer)].data();
}

void PagedKvCache::CheckInvariants() const {
  const BlockAllocator& blocks = state_->blocks;
  const PrefixCache& prefix = state_->prefix;
  const int bs = config_.block_size;
  const auto n = static_cast<std::size_t>(config_.num_blocks);
  auto fail = [](auto&&... what) { throw MakeError("paged KV cache invariant: ", what...); };

  std::vector<int> holders(n, 0);   // [num_blocks] tables holding the block
  std::vector<char> full_of(n, 0);  // [num_blocks] 1 when some holder has committed all its positions
  for (const auto& [id, seq] : state_->sequences) {
    if (seq->table_.size() != static_cast<std::size_t>(CeilDiv(seq->end(), bs))) {
      fail("sequence ", id, " has ", seq->table_.size(), " blocks for ", seq->end(), " positions");
    }
    if (seq->tokens_.size() != static_cast<std::size_t>(seq->length_)) {
      fail("sequence ", id, " has ", seq->tokens_.size(), " token ids for length ", seq->length_);
    }
    const std::size_t full = config_.prefix_caching ? static_cast<std::size_t>(seq->length_ / bs) : 0;
    if (seq->chain_.size() != full)
      fail("sequence ", id, " has ", seq->chain_.size(), " prefix keys, want ", full);
    for (std::size_t i = 0; i < seq->table_.size(); ++i) {
      const auto b = static_cast<std::size_t>(seq->table_[i]);
      if (std::count(seq->table_.begin(), seq->table_.end(), seq->table_[i]) != 1) {
        fail("sequence ", id, " holds block ", b, " twice");
      }
      ++holders[b];
      if (seq->length_ >= static_cast<int>(i + 1) * bs) full_of[b] = 1;
      // A block with a reserved slot is written next: nobody else may read it.
      if (static_cast<int>(i + 1) * bs > seq->length_ && seq->reserved_ > 0 &&
          blocks.ref(static_cast<int>(b)) != 1) {
        fail("sequence ", id, " has reserved slots in block ", b, " with ", blocks.ref(static_cast<int>(b)),
             " references");
      }
    }
  }
  std::vector<char> place(n, 0);  // [num_blocks] 1 used, 2 cached, 3 free
  for (std::size_t b = 0; b < n; ++b) {
    if (blocks.ref(static_cast<int>(b)) != holders[b]) {
      fail("block ", b, " has reference count ", blocks.ref(static_cast<int>(b)), " but ", holders[b],
           " tables hold it");
    }
    if (holders[b] > 0) place[b] = 1;
  }
  for (int b : blocks.CachedBlocks()) {
    if (place[static_cast<std::size_t>(b)] != 0) fail("cached block ", b, " is also used or cached twice");
    if (!prefix.Contains(b)) fail("cached block ", b, " is not in the prefix cache");
    place[static_cast<std::size_t>(b)] = 2;
  }
  for (int b : blocks.FreeBlocks()) {
    if (place[static_cast<std::size_t>(b)] != 0)
      fail("free block ", b, " is also used, cached or free twice");
    if (prefix.Contains(b)) fail("free block ", b, " is still in the prefix cache");
    place[static_cast<std::size_t>(b)] = 3;
  }
  int in_prefix = 0;
  for (std::size_t b = 0; b < n; ++b) {
    if (place[b] == 0) fail("block ", b, " is neither used, cached nor free");
    if (!prefix.Contains(static_cast<int>(b))) continue;
    ++in_prefix;
    if (place[b] == 1 && !full_of[b]) fail("block ", b, " is in the prefix cache but not full");
  }
  if (in_prefix != prefix.size())
    fail("the prefix cache has ", prefix.size(), " entries for ", in_prefix, " blocks");
}

}  // namespace plumb
