#include "plumb/kv/contiguous_kv_cache.h"

#include "plumb/core/error.h"

namespace plumb {

ContiguousKvCache::ContiguousKvCache(int n_layers, int n_kv_heads, int max_positions, int head_dim)
    : n_layers_(n_layers), n_kv_heads_(n_kv_heads), max_positions_(max_positions), head_dim_(head_dim) {
  if (n_layers <= 0 || n_kv_heads <= 0 || max_positions <= 0 || head_dim <= 0) {
    throw MakeError("KV cache: every dimension must be positive (layers ", n_layers, ", kv_heads ",
                    n_kv_heads, ", positions ", max_positions, ", head_dim ", head_dim, ")");
  }
  const std::size_t floats = static_cast<std::size_t>(n_layers) * n_kv_heads * max_positions * head_dim;
  keys_.assign(floats, 0.0f);
  values_.assign(floats, 0.0f);
}

void ContiguousKvCache::set_length(int length) {
  if (length < 0 || length > max_positions_) {
    throw MakeError("KV cache: length ", length, " outside [0, ", max_positions_, "]");
  }
  length_ = length;
}

}  // namespace plumb
