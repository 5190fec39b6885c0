// ModelConfig: the hyper-parameters of a Llama-family decoder, read from a Hugging Face config.json.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "plumb/model/packing.h"

namespace plumb {

struct ModelConfig {
  std::string model_type;     // "llama", "qwen2", ...
  int hidden_size = 0;        // d
  int intermediate_size = 0;  // MLP width
  int num_layers = 0;         // num_hidden_layers
  int num_heads = 0;          // num_attention_heads
  int num_kv_heads = 0;       // num_key_value_heads (defaults to num_heads); divides num_heads
  int head_dim = 0;           // head_dim if present, else hidden_size / num_heads
  float rms_norm_eps = 1e-6f;
  float rope_theta = 10000.0f;
  int vocab_size = 0;
  int max_position_embeddings = 0;   // the context length plumb allows
  bool tie_word_embeddings = false;  // LM head = token embedding matrix
  bool attention_bias = false;       // Q/K/V projections carry biases (Qwen2)
  int bos_token_id = -1;             // -1: none
  std::vector<int> eos_token_ids;    // config's eos_token_id, a number or a list
  // A packed checkpoint's FP8 / INT4 storage (config.json "quantization_config", docs/formats.md "Packed
  // checkpoints"); absent for plain F32/F16/BF16 checkpoints and for GGUF.
  std::optional<WeightPacking> packing;

  int QueryDim() const { return num_heads * head_dim; }
  int KvDim() const { return num_kv_heads * head_dim; }
};

// Parses config.json text; `source` names the file in error messages. Throws plumb::Error naming the field
// for a missing or ill-typed required field and for inconsistent values (e.g. heads not divisible).
ModelConfig ParseConfigJson(const std::string& json_text, const std::string& source);
ModelConfig LoadConfigJson(const std::string& path);

// config.json text for `config` (the Hugging Face keys ParseConfigJson reads, "architectures", and a
// quantization_config when config.packing is set), so that ParseConfigJson gives `config` back. Keys sorted,
// two-space indent: the same config always gives the same bytes.
std::string ConfigToJson(const ModelConfig& config);

class GgufFile;
// Reads the hyper-parameters of a GGUF model from its `<arch>.*` metadata (llama.cpp's keys; arch is
// "llama" or "qwen2"): e.g. llama.block_count, llama.attention.head_count_kv. A GGUF has no tie flag: a
// missing output.weight tensor means the LM head is the token embedding. Errors name the file and key.
ModelConfig ConfigFromGguf(const GgufFile& file);

// Checks the invariants the forward pass relies on; throws plumb::Error naming the offending field.
void ValidateConfig(const ModelConfig& config, const std::string& source);

}  // namespace plumb
