// GGUF (llama.cpp's names and layout) → ModelConfig and ModelWeights.
//
// Quantized matrices are used where they lie in the mapped file; only attn_q and attn_k are copied, because
// llama.cpp's converter reorders their rows for its adjacent-pair RoPE and plumb's RoPE is Hugging Face's
// rotate-half (docs/formats.md "RoPE pairing").
#include <cstring>
#include <string>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/core/extent.h"
#include "plumb/formats/gguf.h"
#include "plumb/formats/gguf_blocks.h"
#include "plumb/model/config.h"
#include "plumb/model/weights.h"

namespace plumb {
namespace {

// Reads an integer hyper-parameter that must fit an int and be positive.
int PositiveInt(const GgufFile& file, const std::string& key, std::optional<int> fallback = std::nullopt) {
  std::optional<std::uint64_t> value = file.FindUint(key);
  if (!value) {
    if (fallback) return *fallback;
    throw MakeError(file.path(), ": metadata key '", key, "' is missing");
  }
  if (*value == 0 || *value > (1u << 30)) {
    throw MakeError(file.path(), ": metadata key '", key, "' = ", *value, " is out of range");
  }
  return static_cast<int>(*value);
}

// Where a tensor comes from, for error messages.
std::string Where(const GgufFile& file, const GgufTensorInfo& t) {
  return file.path() + ": tensor '" + t.name + "' (offset " + std::to_string(t.file_offset) + ")";
}

const GgufTensorInfo& Require(const GgufFile& file, const std::string& name) {
  const GgufTensorInfo* t = file.FindTensor(name);
  if (t == nullptr) throw MakeError(file.path(), ": missing tensor '", name, "'");
  return *t;
}

std::string Dims(const std::vector<std::uint64_t>& dims) {
  std::string s = "{";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "}";
}

void CheckDims(const GgufFile& file, const GgufTensorInfo& t, std::vector<std::uint64_t> expected) {
  if (t.dims != expected) {
    throw MakeError(Where(file, t), ": dims ", Dims(t.dims), ", expected ", Dims(expected),
                    " (GGUF lists the innermost dimension first)");
  }
  if (!CanDequantize(t.type)) {
    throw MakeError(Where(file, t), ": tensor type ", GgmlTypeName(t.type), " is not supported");
  }
}

std::vector<float> Vector(const GgufFile& file, const std::string& name, int length) {
  const GgufTensorInfo& t = Require(file, name);
  CheckDims(file, t, {static_cast<std::uint64_t>(length)});
  std::vector<float> values(length);
  DequantizeRow(t.type, t.data, values.data(), length);
  return values;
}

// A [rows][cols] matrix (GGUF dims {cols, rows}), used in place.
WeightMatrix Matrix(const std::shared_ptr<const GgufFile>& file, const std::string& name, int rows,
                    int cols) {
  const GgufTensorInfo& t = Require(*file, name);
  CheckDims(*file, t, {static_cast<std::uint64_t>(cols), static_cast<std::uint64_t>(rows)});
  return WeightMatrix::View(t.type, rows, cols, t.data, file);
}

// llama.cpp's converter permutes the rows of attn_q / attn_k (and their biases) so that RoPE's pairs
// (j, j + head_dim/2) become adjacent: within each head, Hugging Face row s·(head_dim/2) + j (s = 0, 1) is
// stored as GGUF row 2j + s. Returns the GGUF row that holds Hugging Face row `hf_row`.
int GgufRowOf(int hf_row, int head_dim) {
  const int half = head_dim / 2;
  const int head = hf_row / head_dim;
  const int s = hf_row % head_dim / half;
  const int j = hf_row % half;
  return head * head_dim + 2 * j + s;
}

// Moving whole rows is exact for every type: a block never spans two rows.
WeightMatrix UnpermuteRopeRows(const WeightMatrix& gguf, int head_dim) {
  std::vector<std::uint8_t> bytes(gguf.Bytes());
  for (int r = 0; r < gguf.rows; ++r) {
    std::memcpy(bytes.data() + Extent(r, gguf.row_bytes), gguf.Row(GgufRowOf(r, head_dim)), gguf.row_bytes);
  }
  return WeightMatrix::FromBytes(gguf.type, gguf.rows, gguf.cols, std::move(bytes));
}

std::vector<float> UnpermuteRopeBias(const std::vector<float>& gguf, int head_dim) {
  std::vector<float> hf(gguf.size());
  for (std::size_t r = 0; r < hf.size(); ++r) hf[r] = gguf[GgufRowOf(static_cast<int>(r), head_dim)];
  return hf;
}

// Gemma 3's hyper-parameters as llama.cpp reads them (llama_model::load_hparams, LLM_ARCH_GEMMA3): what the
// file does not say is fixed by the architecture. docs/models.md "Gemma 3".
void ReadGemma3(const GgufFile& file, ModelConfig& c) {
  // Five local layers, then a global one; the local layers rotate with base 10000, the global ones with
  // gemma3.rope.freq_base (1e6).
  const std::uint64_t window = file.FindUint("gemma3.attention.sliding_window").value_or(0);
  if (window > (1u << 30)) {
    throw MakeError(file.path(), ": metadata key 'gemma3.attention.sliding_window' = ", window,
                    " is out of range");
  }
  SetGemma3Architecture(c, static_cast<int>(window));
  if (const std::optional<double> cap = file.FindFloat("gemma3.final_logit_softcapping")) {
    if (!(*cap >= 0.0 && *cap < 1e30)) {
      throw MakeError(file.path(), ": metadata key 'gemma3.final_logit_softcapping' = ", *cap,
                      " must be a non-negative number");
    }
    c.final_logit_softcap = static_cast<float>(*cap);
  }
  if (file.FindFloat("gemma3.attn_logit_softcapping").value_or(0.0) > 0.0) {
    throw MakeError(file.path(),
                    ": gemma3.attn_logit_softcapping is not supported (Gemma 2's attention "
                    "soft-capping; Gemma 3 has none)");
  }
  // llama.cpp scales queries by 1/√head_dim for every Gemma 3 but the 27B (62 layers), which uses
  // 1/√(d / n_heads); plumb's attention scales by 1/√head_dim only.
  if (c.num_layers == 62 && c.hidden_size / c.num_heads != c.head_dim) {
    throw MakeError(file.path(), ": Gemma 3 27B's query scale 1/sqrt(d / n_heads) is not supported");
  }
}

}  // namespace

ModelConfig ConfigFromGguf(const GgufFile& file) {
  const std::string& arch = file.GetString("general.architecture");
  if (arch != "llama" && arch != "qwen2" && arch != "gemma3") {
    throw MakeError(file.path(), ": general.architecture '", arch,
                    "' is not supported (plumb runs 'llama', 'qwen2' and 'gemma3')");
  }
  const std::string p = arch + ".";
  if (file.FindUint(p + "expert_count").value_or(0) > 0) {
    throw MakeError(file.path(), ": mixture-of-experts models (", p, "expert_count) are not supported");
  }
  if (std::optional<std::string> scaling = file.FindString(p + "rope.scaling.type");
      scaling && *scaling != "none") {
    throw MakeError(file.path(), ": ", p, "rope.scaling.type '", *scaling, "' is not supported yet");
  }
  ModelConfig c;
  c.model_type = arch;
  c.hidden_size = PositiveInt(file, p + "embedding_length");
  c.intermediate_size = PositiveInt(file, p + "feed_forward_length");
  c.num_layers = PositiveInt(file, p + "block_count");
  c.num_heads = PositiveInt(file, p + "attention.head_count");
  c.num_kv_heads = PositiveInt(file, p + "attention.head_count_kv", c.num_heads);
  c.head_dim = PositiveInt(file, p + "attention.key_length", c.hidden_size / c.num_heads);
  if (const std::optional<std::uint64_t> rot = file.FindUint(p + "rope.dimension_count");
      rot && *rot != static_cast<std::uint64_t>(c.head_dim)) {
    throw MakeError(file.path(), ": ", p, "rope.dimension_count = ", *rot, " differs from the head size ",
                    c.head_dim, " (partial rotary embeddings are not supported)");
  }
  c.rms_norm_eps = static_cast<float>(file.GetFloat(p + "attention.layer_norm_rms_epsilon"));
  c.rope_theta = static_cast<float>(file.FindFloat(p + "rope.freq_base").value_or(10000.0));
  c.max_position_embeddings = PositiveInt(file, p + "context_length");
  const GgufTensorInfo& embedding = Require(file, "token_embd.weight");
  const int embedding_rows =
      embedding.dims.size() == 2 && embedding.dims[1] <= (1u << 30) ? static_cast<int>(embedding.dims[1]) : 0;
  c.vocab_size = PositiveInt(file, p + "vocab_size", embedding_rows);
  c.tie_word_embeddings = file.FindTensor("output.weight") == nullptr;
  if (arch == "gemma3") ReadGemma3(file, c);
  c.attention_bias = file.FindTensor("blk.0.attn_q.bias") != nullptr;
  if (std::optional<std::uint64_t> bos = file.FindUint("tokenizer.ggml.bos_token_id"))
    c.bos_token_id = static_cast<int>(std::min<std::uint64_t>(*bos, 1u << 30));
  if (std::optional<std::uint64_t> eos = file.FindUint("tokenizer.ggml.eos_token_id"))
    c.eos_token_ids.push_back(static_cast<int>(std::min<std::uint64_t>(*eos, 1u << 30)));
  ValidateConfig(c, file.path());
  return c;
}

ModelWeights LoadGgufWeights(const ModelConfig& c, const std::shared_ptr<const GgufFile>& file) {
  const GgufFile& f = *file;
  const int d = c.hidden_size;
  // llama.cpp's converter permutes Q/K rows for Llama only; Qwen2 and Gemma 3 GGUFs keep Hugging Face's
  // order and llama.cpp runs them with its NEOX (rotate-half) RoPE.
  const bool permuted_rope_rows = c.model_type == "llama";
  ModelWeights w;
  w.token_embedding = Matrix(file, "token_embd.weight", c.vocab_size, d);
  w.layers.resize(c.num_layers);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights& l = w.layers[i];
    l.attn_norm = Vector(f, p + "attn_norm.weight", d);
    l.wq = Matrix(file, p + "attn_q.weight", c.QueryDim(), d);
    l.wk = Matrix(file, p + "attn_k.weight", c.KvDim(), d);
    if (permuted_rope_rows) {
      l.wq = UnpermuteRopeRows(l.wq, c.head_dim);
      l.wk = UnpermuteRopeRows(l.wk, c.head_dim);
    }
    l.wv = Matrix(file, p + "attn_v.weight", c.KvDim(), d);
    if (c.attention_bias) {
      l.bq = Vector(f, p + "attn_q.bias", c.QueryDim());
      l.bk = Vector(f, p + "attn_k.bias", c.KvDim());
      l.bv = Vector(f, p + "attn_v.bias", c.KvDim());
      if (permuted_rope_rows) {
        l.bq = UnpermuteRopeBias(l.bq, c.head_dim);
        l.bk = UnpermuteRopeBias(l.bk, c.head_dim);
      }
    }
    l.wo = Matrix(file, p + "attn_output.weight", d, c.QueryDim());
    if (c.qk_norm) {
      l.q_norm = Vector(f, p + "attn_q_norm.weight", c.head_dim);
      l.k_norm = Vector(f, p + "attn_k_norm.weight", c.head_dim);
    }
    if (c.sandwich_norm) {
      l.post_attn_norm = Vector(f, p + "post_attention_norm.weight", d);
      l.post_mlp_norm = Vector(f, p + "post_ffw_norm.weight", d);
    }
    l.mlp_norm = Vector(f, p + "ffn_norm.weight", d);
    l.w_gate = Matrix(file, p + "ffn_gate.weight", c.intermediate_size, d);
    l.w_up = Matrix(file, p + "ffn_up.weight", c.intermediate_size, d);
    l.w_down = Matrix(file, p + "ffn_down.weight", d, c.intermediate_size);
  }
  w.final_norm = Vector(f, "output_norm.weight", d);
  if (!c.tie_word_embeddings) w.lm_head = Matrix(file, "output.weight", c.vocab_size, d);
  return w;
}

}  // namespace plumb
