// Test helpers for the paged KV cache: the keys and values a "model" writes for a token prefix, and reading
// one position back through a KvLayerView.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/formats/kv_dtype.h"
#include "plumb/kernels/kv_layer_view.h"
#include "plumb/kv/paged_kv_cache.h"

namespace plumb::testing {

inline std::uint64_t MixBits(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The hash of token ids [0, p] from the hash of [0, p-1] (start from 0): a real model's K/V at position p is
// a function of exactly these ids, so two sequences may share a block exactly when these hashes agree.
inline std::uint64_t NextPrefixHash(std::uint64_t prefix_hash, int token) {
  return MixBits(prefix_hash ^ (static_cast<std::uint64_t>(static_cast<std::uint32_t>(token)) << 1));
}

// Element j of KV head h at the position whose prefix hash is `prefix_hash`: a multiple of 1/4 in [-2, 2]
// times the head's scale. Exact in every KV dtype when the scale is a power of two (x / scale has at most 4
// significant bits and a small exponent), so a read-back must equal it bit for bit.
inline float KvValue(std::uint64_t prefix_hash, int layer, int head, int j, bool value, float scale) {
  const std::uint64_t h = MixBits(prefix_hash + static_cast<std::uint64_t>(layer) * 1000003u +
                                  static_cast<std::uint64_t>(head) * 1009u +
                                  static_cast<std::uint64_t>(j) * 2u + (value ? 1u : 0u));
  return static_cast<float>(static_cast<int>(h % 17) - 8) * 0.25f * scale;
}

// The FP8 scale a test config gives (layer, head): powers of two, different per head.
inline float TestScale(int layer, int head, bool value) {
  static constexpr float kScales[] = {0.5f, 1.0f, 2.0f, 4.0f, 0.25f};
  return kScales[(layer * 3 + head + (value ? 2 : 0)) % 5];
}

inline PagedKvConfig TestConfig(KvDtype dtype, int block_size, int num_blocks, int max_positions,
                                int n_layers = 2, int n_kv_heads = 2, int head_dim = 4) {
  PagedKvConfig c;
  c.n_layers = n_layers;
  c.n_kv_heads = n_kv_heads;
  c.head_dim = head_dim;
  c.block_size = block_size;
  c.num_blocks = num_blocks;
  c.max_positions = max_positions;
  c.dtype = dtype;
  if (IsFp8(dtype)) {
    for (int l = 0; l < n_layers; ++l) {
      for (int h = 0; h < n_kv_heads; ++h) {
        c.k_scales.push_back(TestScale(l, h, false));
        c.v_scales.push_back(TestScale(l, h, true));
      }
    }
  }
  return c;
}

inline float ScaleOf(const PagedKvConfig& c, int layer, int head, bool value) {
  return IsFp8(c.dtype) ? TestScale(layer, head, value) : 1.0f;
}

// Writes (every layer, with KvValue of each position's prefix) `tokens` as the reserved positions
// [length(), length() + tokens.size()) of `id`, after its committed ids; commits nothing.
inline void WriteTokens(PagedKvCache& cache, SeqId id, std::span<const int> tokens) {
  KvSequence& seq = cache.Sequence(id);
  const PagedKvConfig& c = cache.config();
  std::uint64_t hash = 0;
  for (int t : cache.Tokens(id)) hash = NextPrefixHash(hash, t);
  std::vector<float> k(static_cast<std::size_t>(c.n_kv_heads * c.head_dim));  // [n_kv_heads][head_dim]
  std::vector<float> v(k.size());                                             // [n_kv_heads][head_dim]
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    hash = NextPrefixHash(hash, tokens[i]);
    for (int l = 0; l < c.n_layers; ++l) {
      for (int h = 0; h < c.n_kv_heads; ++h) {
        for (int j = 0; j < c.head_dim; ++j) {
          const auto e = static_cast<std::size_t>(h * c.head_dim + j);
          k[e] = KvValue(hash, l, h, j, false, ScaleOf(c, l, h, false));
          v[e] = KvValue(hash, l, h, j, true, ScaleOf(c, l, h, true));
        }
      }
      seq.Write(l, seq.length() + static_cast<int>(i), k.data(), v.data());
    }
  }
}

// Reserves, writes and commits `tokens` as the next positions of `id`, as one model step would. Returns
// false (writing nothing) when Reserve throws.
inline bool Extend(PagedKvCache& cache, SeqId id, std::span<const int> tokens) {
  try {
    cache.Sequence(id).Reserve(static_cast<int>(tokens.size()));
  } catch (const Error&) {
    return false;
  }
  WriteTokens(cache, id, tokens);
  cache.Sequence(id).Commit(tokens);
  return true;
}

// The head_dim keys (or values) of (pos, head) as a view reads them, decoded to FP32 into out[head_dim].
inline void ReadKvInto(const KvLayerView& view, int pos, int head, bool value, float* out) {
  const auto* base = static_cast<const std::uint8_t*>(value ? view.values : view.keys);
  const std::int64_t element = view.Element(pos, head);
  DecodeKv(view.dtype, base + element * static_cast<std::int64_t>(KvDtypeBytes(view.dtype)), view.head_dim,
           value ? view.VScale(head) : view.KScale(head), out);
}

inline std::vector<float> ReadKv(const KvLayerView& view, int pos, int head, bool value) {
  std::vector<float> out(static_cast<std::size_t>(view.head_dim));
  ReadKvInto(view, pos, head, value, out.data());
  return out;
}

// Number of mismatching elements between what `id` holds and what KvValue says its tokens give.
inline int CountMismatches(const PagedKvCache& cache, SeqId id) {
  const PagedKvConfig& c = cache.config();
  const KvSequence& seq = cache.Sequence(id);
  const std::span<const int> tokens = cache.Tokens(id);
  std::vector<float> got(static_cast<std::size_t>(c.head_dim));  // [head_dim]
  int bad = 0;
  for (int l = 0; l < c.n_layers; ++l) {
    const KvLayerView view = seq.Layer(l);
    std::uint64_t hash = 0;
    for (int p = 0; p < seq.length(); ++p) {
      hash = NextPrefixHash(hash, tokens[static_cast<std::size_t>(p)]);
      for (int h = 0; h < c.n_kv_heads; ++h) {
        for (bool value : {false, true}) {
          ReadKvInto(view, p, h, value, got.data());
          for (int j = 0; j < c.head_dim; ++j) {
            const float want = KvValue(hash, l, h, j, value, ScaleOf(c, l, h, value));
            if (got[static_cast<std::size_t>(j)] != want) ++bad;
          }
        }
      }
    }
  }
  return bad;
}

}  // namespace plumb::testing
