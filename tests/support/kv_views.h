// KV-cache views and sequences for the attention and model tests: a contiguous FP32 view over plain arrays,
// and PagedTestKv, a small paged KvSequence over a block pool with a shuffled block table, written here
// (not PagedKvCache) so the attention kernel and the model are tested against the layout alone.
//
// PagedTestKv's pool, per layer, keys and values each: [num_blocks][block_size][n_kv_heads][head_dim]
// elements of the dtype (the paged layout of kernels/kv_layer_view.h). Every element starts as NaN, so a
// kernel that reads a slot past a sequence's length, or a block the table does not reference, poisons its
// result.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/kernels/kernels.h"
#include "plumb/kernels/kv_layer_view.h"
#include "plumb/kv/kv_sequence.h"

namespace plumb::testing {

// The contiguous layout [kv_head][max_positions][head_dim] of FP32 keys and values as a KvLayerView.
inline KvLayerView ContiguousF32View(const float* keys, const float* values, int n_kv_heads,
                                     int max_positions, int head_dim, int length) {
  static constexpr int kOnlyBlock[] = {0};
  KvLayerView view;
  view.keys = keys;
  view.values = values;
  view.block_table = kOnlyBlock;
  view.block_size = max_positions;
  view.position_stride = head_dim;
  view.head_stride = static_cast<std::int64_t>(max_positions) * head_dim;
  view.n_kv_heads = n_kv_heads;
  view.head_dim = head_dim;
  view.length = length;
  return view;
}

// One pool of blocks shared by several PagedTestKv sequences (shared prefix blocks are simply the same
// block numbers in two tables).
class TestBlockPool {
 public:
  TestBlockPool(int n_layers, int n_kv_heads, int head_dim, int block_size, int num_blocks, KvDtype dtype,
                std::vector<float> k_scales = {}, std::vector<float> v_scales = {})
      : n_layers_(n_layers),
        n_kv_heads_(n_kv_heads),
        head_dim_(head_dim),
        block_size_(block_size),
        num_blocks_(num_blocks),
        dtype_(dtype),
        k_scales_(std::move(k_scales)),
        v_scales_(std::move(v_scales)) {
    const std::size_t elements = LayerElements() * n_layers;
    const std::size_t bytes = KvDtypeBytes(dtype);
    std::vector<std::uint8_t> nan(bytes);
    const float f32_nan = std::numeric_limits<float>::quiet_NaN();
    EncodeKv(dtype, &f32_nan, 1, 1.0f, nan.data());
    keys_.resize(elements * bytes);
    for (std::size_t i = 0; i < elements; ++i) std::copy(nan.begin(), nan.end(), keys_.begin() + i * bytes);
    values_ = keys_;
    // Free blocks in a shuffled order, so consecutive logical blocks land on scattered physical ones.
    free_.resize(num_blocks);
    std::iota(free_.begin(), free_.end(), 0);
    std::shuffle(free_.begin(), free_.end(), std::mt19937(block_size * 7919 + num_blocks));
  }

  int TakeBlock() {
    if (free_.empty()) throw MakeError("test block pool exhausted");
    const int block = free_.back();
    free_.pop_back();
    return block;
  }

  std::size_t LayerElements() const {
    return static_cast<std::size_t>(num_blocks_) * block_size_ * n_kv_heads_ * head_dim_;
  }
  std::uint8_t* Keys(int layer) { return keys_.data() + LayerElements() * layer * KvDtypeBytes(dtype_); }
  std::uint8_t* Values(int layer) { return values_.data() + LayerElements() * layer * KvDtypeBytes(dtype_); }
  float KScale(int layer, int h) const {
    return k_scales_.empty() ? 1.0f : k_scales_[layer * n_kv_heads_ + h];
  }
  float VScale(int layer, int h) const {
    return v_scales_.empty() ? 1.0f : v_scales_[layer * n_kv_heads_ + h];
  }
  const float* KScales(int layer) const {
    return k_scales_.empty() ? nullptr : k_scales_.data() + layer * n_kv_heads_;
  }
  const float* VScales(int layer) const {
    return v_scales_.empty() ? nullptr : v_scales_.data() + layer * n_kv_heads_;
  }

  int n_layers_, n_kv_heads_, head_dim_, block_size_, num_blocks_;
  KvDtype dtype_;
  std::vector<float> k_scales_, v_scales_;   // [n_layers][n_kv_heads] or empty
  std::vector<std::uint8_t> keys_, values_;  // [n_layers][num_blocks][block_size][n_kv_heads][head_dim]
  std::vector<int> free_;                    // blocks not yet taken, popped from the back
};

// A paged sequence over a TestBlockPool. Blocks are taken lazily by Reserve; ShareBlocksOf copies another
// sequence's first full blocks into this table (a shared prefix: those slots are never written again).
class PagedTestKv final : public KvSequence {
 public:
  PagedTestKv(TestBlockPool& pool, int max_positions) : pool_(pool), max_positions_(max_positions) {}

  void ShareBlocksOf(const PagedTestKv& other, int blocks) {
    if (length_ != 0 || blocks * pool_.block_size_ > other.length_) throw MakeError("bad shared prefix");
    table_.assign(other.table_.begin(), other.table_.begin() + blocks);
    length_ = blocks * pool_.block_size_;
  }
  std::span<const int> table() const { return table_; }

  int n_layers() const override { return pool_.n_layers_; }
  int n_kv_heads() const override { return pool_.n_kv_heads_; }
  int head_dim() const override { return pool_.head_dim_; }
  KvDtype dtype() const override { return pool_.dtype_; }
  int length() const override { return length_; }
  int max_positions() const override { return max_positions_; }

  void Reserve(int n) override {
    if (length_ + n > max_positions_) throw MakeError("paged test KV: ", n, " positions do not fit");
    reserved_ = std::max(reserved_, n);
    while (static_cast<int>(table_.size()) * pool_.block_size_ < length_ + reserved_) {
      table_.push_back(pool_.TakeBlock());
    }
  }
  void Write(int layer, int pos, const float* k, const float* v) override {
    if (pos < length_ || pos >= length_ + reserved_) throw MakeError("paged test KV: write outside reserve");
    const KvLayerView view = Layer(layer);
    const std::size_t bytes = KvDtypeBytes(pool_.dtype_);
    for (int h = 0; h < pool_.n_kv_heads_; ++h) {
      const std::size_t at = static_cast<std::size_t>(view.Element(pos, h)) * bytes;
      const std::size_t src = static_cast<std::size_t>(h) * pool_.head_dim_;
      EncodeKv(pool_.dtype_, k + src, pool_.head_dim_, pool_.KScale(layer, h), pool_.Keys(layer) + at);
      EncodeKv(pool_.dtype_, v + src, pool_.head_dim_, pool_.VScale(layer, h), pool_.Values(layer) + at);
    }
  }
  void WriteStored(int layer, int pos, const void* k, const void* v) override {
    if (pos < length_ || pos >= length_ + reserved_) throw MakeError("paged test KV: write outside reserve");
    const KvLayerView view = Layer(layer);
    const std::size_t bytes = KvDtypeBytes(pool_.dtype_) * pool_.n_kv_heads_ * pool_.head_dim_;
    const std::size_t at = static_cast<std::size_t>(view.Element(pos, 0)) * KvDtypeBytes(pool_.dtype_);
    std::memcpy(pool_.Keys(layer) + at, k, bytes);
    std::memcpy(pool_.Values(layer) + at, v, bytes);
  }
  KvLayerView Layer(int layer) const override {
    const int heads = pool_.n_kv_heads_, hd = pool_.head_dim_;
    KvLayerView view;
    view.dtype = pool_.dtype_;
    view.keys = pool_.Keys(layer);
    view.values = pool_.Values(layer);
    view.block_table = table_;
    view.block_size = pool_.block_size_;
    view.block_stride = static_cast<std::int64_t>(pool_.block_size_) * heads * hd;
    view.position_stride = static_cast<std::int64_t>(heads) * hd;
    view.head_stride = hd;
    view.n_kv_heads = heads;
    view.head_dim = hd;
    view.k_scales = pool_.KScales(layer);
    view.v_scales = pool_.VScales(layer);
    view.length = length_ + reserved_;
    return view;
  }
  void Commit(std::span<const int> tokens) override {
    const int n = static_cast<int>(tokens.size());
    if (n > reserved_) throw MakeError("paged test KV: commit past the reserve");
    length_ += n;
    reserved_ -= n;
  }

 private:
  TestBlockPool& pool_;
  int max_positions_;
  int length_ = 0;
  int reserved_ = 0;
  std::vector<int> table_;  // physical block of each logical block
};

// kernels::CausalAttention of one sequence's `rows` query rows at first_pos.. over `view` (with a sliding
// window of `window` positions, 0: none), into a fresh output filled with −1 (so an element the kernel never
// writes shows).
inline std::vector<float> Attend(const std::vector<float>& q, int rows, int first_pos,
                                 const KvLayerView& view, int n_heads, int window = 0) {
  std::vector<float> out(q.size(), -1.0f);
  kernels::CausalAttention(q.data(), rows, first_pos, view, n_heads, out.data(), window);
  return out;
}

// Bitwise equality of two attention results (NaN included: a NaN anywhere fails, since none is expected and
// one means a NaN-poisoned slot past a sequence's length was read).
inline void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& expected,
                           const std::string& what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << what << ": NaN at " << i << " (a slot past the length was read)";
    std::uint32_t a, b;
    std::memcpy(&a, &got[i], 4);
    std::memcpy(&b, &expected[i], 4);
    ASSERT_EQ(a, b) << what << ": element " << i << ": " << got[i] << " != " << expected[i];
  }
}

}  // namespace plumb::testing
