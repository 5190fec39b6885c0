// The contiguous KV cache: layout in include/plumb/kv/contiguous_kv_cache.h.
#include "plumb/kv/contiguous_kv_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "plumb/core/error.h"
#include "plumb/core/extent.h"

namespace plumb {
namespace {

// The contiguous layout is one block holding every position.
constexpr int kOnlyBlock[] = {0};

void CheckScales(const std::vector<float>& scales, const char* name, std::size_t expected) {
  if (scales.empty()) return;
  if (scales.size() != expected) {
    throw MakeError("KV cache: ", name, " holds ", scales.size(),
                    " scales, expected layers · kv_heads = ", expected);
  }
  for (std::size_t i = 0; i < scales.size(); ++i) {
    if (!(scales[i] > 0.0f) || !std::isfinite(scales[i])) {
      throw MakeError("KV cache: ", name, "[", i, "] = ", scales[i], " is not a positive finite scale");
    }
  }
}

}  // namespace

ContiguousKvCache::ContiguousKvCache(int n_layers, int n_kv_heads, int max_positions, int head_dim,
                                     KvDtype dtype, std::vector<float> k_scales, std::vector<float> v_scales)
    : n_layers_(n_layers),
      n_kv_heads_(n_kv_heads),
      max_positions_(max_positions),
      head_dim_(head_dim),
      dtype_(dtype),
      k_scales_(std::move(k_scales)),
      v_scales_(std::move(v_scales)) {
  if (n_layers <= 0 || n_kv_heads <= 0 || max_positions <= 0 || head_dim <= 0) {
    throw MakeError("KV cache: every dimension must be positive (layers ", n_layers, ", kv_heads ",
                    n_kv_heads, ", positions ", max_positions, ", head_dim ", head_dim, ")");
  }
  const std::size_t heads = Extent(n_layers, n_kv_heads);
  CheckScales(k_scales_, "k_scales", heads);
  CheckScales(v_scales_, "v_scales", heads);
  const std::size_t bytes = heads * max_positions * head_dim * KvDtypeBytes(dtype);
  keys_.assign(bytes, 0);
  values_.assign(bytes, 0);
}

void ContiguousKvCache::Reserve(int n) {
  if (n < 0) throw MakeError("KV cache: cannot reserve ", n, " positions");
  if (n > max_positions_ - length_) {
    throw MakeError("contiguous KV cache full: ", n, " positions asked for after ", length_, " held, ",
                    max_positions_ - length_, " free of ", max_positions_);
  }
  reserved_ = std::max(reserved_, n);
}

void ContiguousKvCache::CheckWrite(int layer, int pos) const {
  if (layer < 0 || layer >= n_layers_ || pos < length_ || pos >= length_ + reserved_) {
    throw MakeError("KV cache: write of layer ", layer, " position ", pos, " outside layers [0, ", n_layers_,
                    ") and reserved positions [", length_, ", ", length_ + reserved_, ")");
  }
}

void ContiguousKvCache::WriteStored(int layer, int pos, const void* k, const void* v) {
  CheckWrite(layer, pos);
  const std::size_t head_bytes = Extent(head_dim_, KvDtypeBytes(dtype_));
  for (int h = 0; h < n_kv_heads_; ++h) {
    const std::size_t at = Offset(layer, h, pos) * KvDtypeBytes(dtype_);
    std::memcpy(keys_.data() + at, static_cast<const std::uint8_t*>(k) + Extent(h, head_bytes), head_bytes);
    std::memcpy(values_.data() + at, static_cast<const std::uint8_t*>(v) + Extent(h, head_bytes), head_bytes);
  }
}

void ContiguousKvCache::Write(int layer, int pos, const float* k, const float* v) {
  CheckWrite(layer, pos);
  const std::size_t element_bytes = KvDtypeBytes(dtype_);
  for (int h = 0; h < n_kv_heads_; ++h) {
    const std::size_t head = Extent(layer, n_kv_heads_) + h;
    const float k_scale = k_scales_.empty() ? 1.0f : k_scales_[head];
    const float v_scale = v_scales_.empty() ? 1.0f : v_scales_[head];
    const std::size_t at = Offset(layer, h, pos) * element_bytes;
    const std::size_t src = Extent(h, head_dim_);
    EncodeKv(dtype_, k + src, head_dim_, k_scale, keys_.data() + at);
    EncodeKv(dtype_, v + src, head_dim_, v_scale, values_.data() + at);
  }
}

KvLayerView ContiguousKvCache::Layer(int layer) const {
  if (layer < 0 || layer >= n_layers_)
    throw MakeError("KV cache: layer ", layer, " outside [0, ", n_layers_, ")");
  const std::size_t element_bytes = KvDtypeBytes(dtype_);
  const std::size_t heads = Extent(layer, n_kv_heads_);
  KvLayerView view;
  view.dtype = dtype_;
  view.keys = keys_.data() + Offset(layer, 0, 0) * element_bytes;
  view.values = values_.data() + Offset(layer, 0, 0) * element_bytes;
  view.block_table = kOnlyBlock;
  view.block_size = max_positions_;
  view.block_stride = 0;
  view.position_stride = head_dim_;
  view.head_stride = static_cast<std::int64_t>(max_positions_) * head_dim_;
  view.n_kv_heads = n_kv_heads_;
  view.head_dim = head_dim_;
  view.k_scales = k_scales_.empty() ? nullptr : k_scales_.data() + heads;
  view.v_scales = v_scales_.empty() ? nullptr : v_scales_.data() + heads;
  view.length = length_ + reserved_;
  return view;
}

void ContiguousKvCache::Commit(std::span<const int> tokens) {
  const auto n = static_cast<std::int64_t>(tokens.size());
  if (n > reserved_) {
    throw MakeError("KV cache: commit of ", n, " positions, only ", reserved_, " reserved");
  }
  length_ += static_cast<int>(n);
  reserved_ -= static_cast<int>(n);
}

void ContiguousKvCache::set_length(int length) {
  if (length < 0 || length > max_positions_) {
    throw MakeError("KV cache: length ", length, " outside [0, ", max_positions_, "]");
  }
  length_ = length;
  reserved_ = 0;
}

const float* ContiguousKvCache::F32At(const std::vector<std::uint8_t>& data, int layer, int kv_head,
                                      int pos) const {
  if (dtype_ != KvDtype::kF32) {
    throw MakeError("KV cache: Key/Value read FP32 elements; this cache holds ", KvDtypeName(dtype_));
  }
  if (layer < 0 || layer >= n_layers_ || kv_head < 0 || kv_head >= n_kv_heads_ || pos < 0 ||
      pos >= max_positions_) {
    throw MakeError("KV cache: (layer ", layer, ", kv_head ", kv_head, ", position ", pos, ") out of range");
  }
  return reinterpret_cast<const float*>(data.data()) + Offset(layer, kv_head, pos);
}

const float* ContiguousKvCache::Key(int layer, int kv_head, int pos) const {
  return F32At(keys_, layer, kv_head, pos);
}

const float* ContiguousKvCache::Value(int layer, int kv_head, int pos) const {
  return F32At(values_, layer, kv_head, pos);
}

}  // namespace plumb
