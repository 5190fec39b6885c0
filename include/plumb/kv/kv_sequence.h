// The KV-cache interface the model computes against: one sequence's keys and values, whatever stores them.
//
// Two implementations: ContiguousKvCache (one flat buffer per tensor, one sequence) and the sequences of a
// PagedKvCache (fixed-size blocks from a shared pool, addressed through a block table). Attention never
// sees which: it reads a KvLayerView, a strided description of where position p of KV head h lives, that
// covers both layouts. Because the attention kernel is the same code for both, contiguous and paged
// attention give bitwise the same results for the same dtype.
//
// One forward step over a sequence:
//   kv.Reserve(n)                        room for n new positions (paged: allocate blocks, copy-on-write)
//   kv.Write(layer, kv.length()+i, k, v) for each layer and each new position i < n
//   kv.Layer(layer)                      attention reads positions [0, length()+n) of the view
//   kv.Commit(tokens)                    the n positions (whose token ids are `tokens`) join the sequence
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "plumb/formats/kv_dtype.h"
#include "plumb/kernels/kv_layer_view.h"

namespace plumb {

class KvSequence {
 public:
  virtual ~KvSequence() = default;

  virtual int n_layers() const = 0;
  virtual int n_kv_heads() const = 0;
  virtual int head_dim() const = 0;
  virtual KvDtype dtype() const = 0;

  // Positions [0, length()) hold the keys and values of committed tokens.
  virtual int length() const = 0;
  // How many positions this sequence can ever hold (contiguous: its size; paged: the model's context).
  virtual int max_positions() const = 0;

  // Makes room for positions [length(), length() + n). Throws plumb::Error (the cache is full: which cache,
  // how many positions or blocks were asked for and how many are free) and changes nothing when there is no
  // room. May be called again before Commit with a larger n.
  virtual void Reserve(int n) = 0;
  // Stores the keys and values of one reserved position of one layer, each [n_kv_heads · head_dim] FP32,
  // converted to dtype() by EncodeKv.
  virtual void Write(int layer, int pos, const float* k, const float* v) = 0;
  // The same with the elements already in dtype(): k, v are [n_kv_heads · head_dim] elements of
  // KvDtypeBytes(dtype()) bytes each, copied as they are (a KV hand-off file's bytes, kv/kv_handoff.h).
  virtual void WriteStored(int layer, int pos, const void* k, const void* v) = 0;
  // The view of one layer; its length is length() plus the positions reserved so far (written or not).
  virtual KvLayerView Layer(int layer) const = 0;
  // The reserved positions [length(), length() + tokens.size()) become committed; tokens are their ids (the
  // paged cache hashes full blocks of them for prefix sharing; the contiguous cache ignores them).
  virtual void Commit(std::span<const int> tokens) = 0;
};

}  // namespace plumb
