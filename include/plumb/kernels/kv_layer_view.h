// KvLayerView: where one layer of a KV cache keeps its keys and values, as the attention kernels read it.
// It lives in kernels/ (below kv/, which fills it): the kernels know the layout, never the cache classes.
#pragma once

#include <cstdint>
#include <span>

#include "plumb/formats/kv_dtype.h"

namespace plumb {

// Where one layer's keys and values are. Element j of (position p, KV head h) of the keys is element
//   block_table[p / block_size] · block_stride + (p % block_size) · position_stride + h · head_stride + j
// of `keys` (of `values` likewise), each element KvDtypeBytes(dtype) bytes.
//   contiguous, [kv_head][position][head_dim]:
//     block_size = capacity, block_table = {0}, position_stride = head_dim, head_stride = capacity · head_dim
//   paged, [block][slot][kv_head][head_dim]:
//     block_stride = block_size · n_kv_heads · head_dim, position_stride = n_kv_heads · head_dim,
//     head_stride = head_dim
struct KvLayerView {
  KvDtype dtype = KvDtype::kF32;
  const void* keys = nullptr;
  const void* values = nullptr;
  std::span<const int> block_table;  // physical block of each logical block
  int block_size = 0;                // positions per block
  std::int64_t block_stride = 0;     // in elements
  std::int64_t position_stride = 0;  // in elements
  std::int64_t head_stride = 0;      // in elements
  int n_kv_heads = 0;
  int head_dim = 0;
  const float* k_scales = nullptr;  // [n_kv_heads], FP8 only (read = code · scale); nullptr means 1
  const float* v_scales = nullptr;
  int length = 0;  // positions [0, length) may be read

  std::int64_t Element(int pos, int kv_head) const {
    return block_table[pos / block_size] * block_stride +
           static_cast<std::int64_t>(pos % block_size) * position_stride +
           static_cast<std::int64_t>(kv_head) * head_stride;
  }
  float KScale(int kv_head) const { return k_scales ? k_scales[kv_head] : 1.0f; }
  float VScale(int kv_head) const { return v_scales ? v_scales[kv_head] : 1.0f; }
};

}  // namespace plumb
