// ContiguousKvCache: the FP32 key/value cache of one sequence, one flat buffer per tensor.
//
// Layout of keys and of values, each:   [layer][kv_head][position][head_dim]   (row-major, FP32)
//   element (l, h, p, j) is at ((l · n_kv_heads + h) · max_positions + p) · head_dim + j
// Keys are stored after RoPE, so attention reads them as they are. Positions of one head are contiguous,
// which makes attention of one query head over the cache a sequential read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace plumb {

class ContiguousKvCache {
 public:
  ContiguousKvCache(int n_layers, int n_kv_heads, int max_positions, int head_dim);

  int n_layers() const { return n_layers_; }
  int n_kv_heads() const { return n_kv_heads_; }
  int max_positions() const { return max_positions_; }
  int head_dim() const { return head_dim_; }

  // Positions [0, length) hold valid keys and values; the forward pass advances it.
  int length() const { return length_; }
  void set_length(int length);
  void Clear() { length_ = 0; }

  // One layer's block, [n_kv_heads][max_positions][head_dim].
  float* LayerKeys(int layer) { return keys_.data() + LayerOffset(layer); }
  float* LayerValues(int layer) { return values_.data() + LayerOffset(layer); }
  const float* LayerKeys(int layer) const { return keys_.data() + LayerOffset(layer); }
  const float* LayerValues(int layer) const { return values_.data() + LayerOffset(layer); }

  // The head_dim floats of one (layer, kv_head, position).
  float* Key(int layer, int kv_head, int pos) { return keys_.data() + Offset(layer, kv_head, pos); }
  float* Value(int layer, int kv_head, int pos) { return values_.data() + Offset(layer, kv_head, pos); }
  const float* Key(int layer, int kv_head, int pos) const {
    return keys_.data() + Offset(layer, kv_head, pos);
  }
  const float* Value(int layer, int kv_head, int pos) const {
    return values_.data() + Offset(layer, kv_head, pos);
  }

  // Bytes held by keys and values together: 2 · layers · kv_heads · max_positions · head_dim · 4.
  std::size_t Bytes() const { return (keys_.size() + values_.size()) * sizeof(float); }

 private:
  std::size_t LayerOffset(int layer) const {
    return static_cast<std::size_t>(layer) * n_kv_heads_ * max_positions_ * head_dim_;
  }
  std::size_t Offset(int layer, int kv_head, int pos) const {
    return LayerOffset(layer) + (static_cast<std::size_t>(kv_head) * max_positions_ + pos) * head_dim_;
  }

  int n_layers_;
  int n_kv_heads_;
  int max_positions_;
  int head_dim_;
  int length_ = 0;
  std::vector<float> keys_;    // [n_layers][n_kv_heads][max_positions][head_dim]
  std::vector<float> values_;  // [n_layers][n_kv_heads][max_positions][head_dim]
};

}  // namespace plumb
