// ContiguousKvCache: the key/value cache of one sequence, one flat buffer per tensor (a KvSequence).
//
// Layout of keys and of values, each:   [layer][kv_head][position][head_dim]   elements of dtype()
//   element (l, h, p, j) is at ((l · n_kv_heads + h) · max_positions + p) · head_dim + j
// Keys are stored after RoPE. Positions of one head are contiguous, so attention of one query head over the
// cache is a sequential read. As a KvLayerView (kernels/kv_layer_view.h) a layer is one block of
// max_positions positions: block_table {0}, position_stride head_dim, head_stride max_positions · head_dim.
// Elements are stored through EncodeKv and read through DecodeKv (formats/kv_dtype.h): f32 (the default)
// as is, f16/bf16 rounded to nearest even, fp8 with a per-(layer, KV head) scale.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "plumb/core/extent.h"
#include "plumb/kv/kv_sequence.h"

namespace plumb {

class ContiguousKvCache final : public KvSequence {
 public:
  // k_scales, v_scales: FP8 only, [n_layers][n_kv_heads] (a per-tensor scale repeated per head); empty
  // means 1. Throws plumb::Error for a non-positive dimension or scales of the wrong size or not positive.
  ContiguousKvCache(int n_layers, int n_kv_heads, int max_positions, int head_dim,
                    KvDtype dtype = KvDtype::kF32, std::vector<float> k_scales = {},
                    std::vector<float> v_scales = {});

  int n_layers() const override { return n_layers_; }
  int n_kv_heads() const override { return n_kv_heads_; }
  int head_dim() const override { return head_dim_; }
  KvDtype dtype() const override { return dtype_; }
  int length() const override { return length_; }
  int max_positions() const override { return max_positions_; }

  void Reserve(int n) override;
  void Write(int layer, int pos, const float* k, const float* v) override;
  void WriteStored(int layer, int pos, const void* k, const void* v) override;
  KvLayerView Layer(int layer) const override;
  void Commit(std::span<const int> tokens) override;

  // Positions [0, length) become the committed ones and any reservation is dropped: rewinds (a chat that
  // re-prefills) or, over positions already written, replays (benchmarks decoding at a fixed position).
  void set_length(int length);
  void Clear() { set_length(0); }

  // The head_dim floats of one (layer, kv_head, position) of an f32 cache (tests read the cache through
  // these); throws plumb::Error for another dtype.
  const float* Key(int layer, int kv_head, int pos) const;
  const float* Value(int layer, int kv_head, int pos) const;

  // Bytes held by keys and values together: 2 · layers · kv_heads · max_positions · head_dim · element size.
  std::size_t Bytes() const { return keys_.size() + values_.size(); }

 private:
  std::size_t Offset(int layer, int kv_head, int pos) const {  // in elements
    return ((Extent(layer, n_kv_heads_) + kv_head) * max_positions_ + pos) * head_dim_;
  }
  void CheckWrite(int layer, int pos) const;  // throws unless a reserved position of a layer
  const float* F32At(const std::vector<std::uint8_t>& data, int layer, int kv_head, int pos) const;

  int n_layers_;
  int n_kv_heads_;
  int max_positions_;
  int head_dim_;
  KvDtype dtype_;
  int length_ = 0;
  int reserved_ = 0;                  // positions past length_ that Reserve made room for
  std::vector<std::uint8_t> keys_;    // [n_layers][n_kv_heads][max_positions][head_dim] elements of dtype_
  std::vector<std::uint8_t> values_;  // [n_layers][n_kv_heads][max_positions][head_dim] elements of dtype_
  std::vector<float> k_scales_;       // [n_layers][n_kv_heads] (FP8), or empty: 1
  std::vector<float> v_scales_;       // [n_layers][n_kv_heads] (FP8), or empty: 1
};

}  // namespace plumb
