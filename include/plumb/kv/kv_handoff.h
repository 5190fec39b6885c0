// The KV hand-off file: one sequence's KV cache, its token ids and the identity of the model that computed
// it, so that another process (a decode worker after a prefill worker: prefill/decode disaggregation)
// continues the sequence with logits bitwise equal to an uninterrupted run. docs/kv-cache.md, "KV hand-off
// format", specifies every tensor and metadata field.
//
//   export:  KvHandoff h = ExportKv(kv, tokens, model, next_token);  WriteKvHandoff(path, h);
//   import:  KvHandoff h = ReadKvHandoff(path);  CheckKvHandoffModel(h, model, path);
//            make a cache of h.dtype with h.k_scales / h.v_scales;  ImportKv(h, cache, path);
// Elements travel as stored (the cache's own bytes: FP8 stays FP8), so the imported cache holds exactly the
// exported bytes, whichever layout (contiguous, paged) either side uses.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "plumb/kv/kv_sequence.h"

namespace plumb {

inline constexpr const char* kKvHandoffFormat = "plumb.kv-handoff";
inline constexpr int kKvHandoffVersion = 1;

// What identifies the model a cache belongs to: the hyper-parameters that shape the cache or the step, and
// a fingerprint of the weights (engine/model_identity.h: the SHA-256 of the model's files).
struct KvHandoffModel {
  std::string architecture;  // ModelConfig::model_type: "llama", "qwen2", "gemma3"
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int hidden_size = 0;
  int vocab_size = 0;
  std::string weights_sha256;  // 64 lowercase hex digits
};

struct KvHandoff {
  KvHandoffModel model;
  KvDtype dtype = KvDtype::kF32;
  std::vector<int> tokens;        // [length]: the ids of positions 0 .. length-1
  std::optional<int> next_token;  // sampled from the last position's logits, not yet in the cache
  std::vector<float> k_scales;    // FP8: [n_layers][n_kv_heads]; other dtypes: empty
  std::vector<float> v_scales;
  // Per layer, [length][n_kv_heads][head_dim] elements of dtype as the cache stored them.
  std::vector<std::vector<std::uint8_t>> keys, values;

  int length() const { return static_cast<int>(tokens.size()); }
};

// The committed positions [0, kv.length()) of `kv`, byte for byte. tokens: their ids (kv.length() of them).
// Throws plumb::Error when the counts or the model's shape disagree with the cache.
KvHandoff ExportKv(const KvSequence& kv, std::span<const int> tokens, const KvHandoffModel& model,
                   std::optional<int> next_token = std::nullopt);

// The safetensors bytes of the hand-off (deterministic), and the same written to `path`.
std::vector<std::uint8_t> SerializeKvHandoff(const KvHandoff& handoff);
void WriteKvHandoff(const std::string& path, const KvHandoff& handoff);

// Reads and checks a hand-off file: a valid safetensors file (every offset inside it: a truncated file is
// refused), the format name and version, every metadata field present and well-formed, every tensor of the
// dtype and shape the metadata gives. Throws plumb::Error, one line naming the file and the field.
KvHandoff ReadKvHandoff(const std::string& path);
// The same over bytes in memory; `name` stands for the path in messages.
KvHandoff ParseKvHandoff(std::vector<std::uint8_t> bytes, const std::string& name);

// Throws plumb::Error naming `path`, the field, the file's value and the expected one when the file was made
// by another model (architecture, a shape field, or the weights' fingerprint).
void CheckKvHandoffModel(const KvHandoff& handoff, const KvHandoffModel& model, const std::string& path);

// Fills an empty sequence (length() 0) with the hand-off's positions: Reserve, WriteStored of every layer,
// Commit of the tokens. Throws plumb::Error naming `path` and the field when the cache's shape, dtype or FP8
// scales differ from the file's, when it is not empty, or when the length exceeds its max_positions().
void ImportKv(const KvHandoff& handoff, KvSequence& kv, const std::string& path);

}  // namespace plumb
