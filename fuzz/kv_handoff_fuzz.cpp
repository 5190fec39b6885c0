// Feeds the input to ParseKvHandoff (kv/kv_handoff.h) as a whole KV hand-off file, the reader `plumb generate
// --load-kv` runs on a file another process wrote. For a file that parses: every count the reader promises
// (tokens, layers, bytes per layer, scales) is checked; the file is checked against its own model (must
// pass) and one with another fingerprint (must refuse); it is written again, and must read back to the same
// hand-off; and, for caches of up to 2^16 elements per layer, imported into a ContiguousKvCache and every
// element read back through DecodeKv. A plumb::Error is the expected answer to a malformed file; a finding
// is anything else: a crash, a sanitizer report, another exception, a hang or an allocation past the limit.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "fuzz_support.h"
#include "plumb/core/error.h"
#include "plumb/core/extent.h"
#include "plumb/kv/contiguous_kv_cache.h"
#include "plumb/kv/kv_handoff.h"

using plumb::fuzz::Expect;
using plumb::fuzz::sink;

namespace {

bool Same(const plumb::KvHandoff& a, const plumb::KvHandoff& b) {
  const plumb::KvHandoffModel &x = a.model, &y = b.model;
  return x.architecture == y.architecture && x.n_layers == y.n_layers && x.n_heads == y.n_heads &&
         x.n_kv_heads == y.n_kv_heads && x.head_dim == y.head_dim && x.hidden_size == y.hidden_size &&
         x.vocab_size == y.vocab_size && x.weights_sha256 == y.weights_sha256 && a.dtype == b.dtype &&
         a.tokens == b.tokens && a.next_token == b.next_token && a.keys == b.keys && a.values == b.values &&
         a.k_scales == b.k_scales && a.v_scales == b.v_scales;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace plumb;
  std::optional<KvHandoff> h;
  try {
    h.emplace(ParseKvHandoff(std::vector<std::uint8_t>(data, data + size), "fuzz.kvh"));
  } catch (const Error&) {
    return 0;
  }
  const KvHandoffModel& m = h->model;
  const std::size_t row = Extent(m.n_kv_heads, m.head_dim), layer_elements = row * Extent(h->length());
  const std::size_t scales = IsFp8(h->dtype) ? Extent(m.n_layers, m.n_kv_heads) : 0;
  if (h->length() < 1 || h->keys.size() != Extent(m.n_layers) || h->values.size() != h->keys.size() ||
      h->k_scales.size() != scales || h->v_scales.size() != scales)
    __builtin_trap();
  for (std::size_t l = 0; l < h->keys.size(); ++l) {
    if (h->keys[l].size() != layer_elements * KvDtypeBytes(h->dtype) ||
        h->values[l].size() != h->keys[l].size())
      __builtin_trap();
  }
  for (const int t : h->tokens)
    if (t < 0 || t >= m.vocab_size) __builtin_trap();
  if (h->next_token && (*h->next_token < 0 || *h->next_token >= m.vocab_size)) __builtin_trap();

  CheckKvHandoffModel(*h, m, "fuzz.kvh");  // its own identity: a throw here escapes, a finding
  KvHandoffModel other = m;
  other.weights_sha256 += "0";
  bool refused = false;
  try {
    CheckKvHandoffModel(*h, other, "fuzz.kvh");
  } catch (const Error&) {
    refused = true;
  }
  if (!refused) __builtin_trap();

  // The writer's bytes of what was read must read back to it (the metadata's plumb_version is not kept).
  if (!Same(ParseKvHandoff(SerializeKvHandoff(*h), "fuzz.kvh"), *h)) __builtin_trap();

  if (layer_elements > (1u << 16) || m.n_layers > 64) return 0;
  Expect([&] {
    ContiguousKvCache kv(m.n_layers, m.n_kv_heads, h->length(), m.head_dim, h->dtype, h->k_scales,
                         h->v_scales);
    ImportKv(*h, kv, "fuzz.kvh");
    if (kv.length() != h->length()) __builtin_trap();
    std::vector<float> out(static_cast<std::size_t>(m.head_dim));
    for (int l = 0; l < m.n_layers; ++l) {
      const KvLayerView view = kv.Layer(l);
      for (int p = 0; p < h->length(); ++p)
        for (int hd = 0; hd < m.n_kv_heads; ++hd) {
          const std::size_t at = static_cast<std::size_t>(view.Element(p, hd)) * KvDtypeBytes(h->dtype);
          DecodeKv(h->dtype, static_cast<const std::uint8_t*>(view.keys) + at, m.head_dim, view.KScale(hd),
                   out.data());
          sink = static_cast<std::uint8_t>(out.front() != out.back());
        }
    }
  });
  return 0;
}
