// GGUF (llama.cpp's names and layout) → ModelConfig and ModelWeights.
//
// Quantized matrices are used where they lie in the mapped file; only attn_q and attn_k of the llama and
// smollm3 archs are copied, because llama.cpp's converter reorders their rows for its adjacent-pair RoPE and
// plumb's RoPE is Hugging Face's rotate-half (docs/formats.md "RoPE pairing"). The archs and what each reads:
// tools/reference/export_gguf.py's docstring, which writes them from Hugging Face checkpoints.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "families.h"
#include "plumb/core/error.h"
#include "plumb/core/extent.h"
#include "plumb/formats/gguf.h"
#include "plumb/formats/gguf_blocks.h"
#include "plumb/model/config.h"
#include "plumb/model/weights.h"

namespace plumb {
namespace {

constexpr const char* kRopeFreqs = "rope_freqs.weight";  // llama.cpp's LLM_TENSOR_ROPE_FREQS
// Phi-3's LongRoPE divisors (LLM_TENSOR_ROPE_FACTORS_LONG / _SHORT), one per rotated pair.
constexpr const char* kRopeFactorsLong = "rope_factors_long.weight";
constexpr const char* kRopeFactorsShort = "rope_factors_short.weight";

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

// The tensors of a file as the loader takes them, each name noted, so that a tensor nobody took (a part of
// the model plumb does not compute) is refused by name rather than silently left out, as llama.cpp refuses a
// file whose tensor count differs from what it loaded.
class TensorReader {
 public:
  explicit TensorReader(std::shared_ptr<const GgufFile> file) : file_(std::move(file)) {}

  std::vector<float> Vector(const std::string& name, int length) {
    used_.insert(name);
    return plumb::Vector(*file_, name, length);
  }

  // A [rows][cols] matrix (GGUF dims {cols, rows}), used in place.
  WeightMatrix Matrix(const std::string& name, int rows, int cols) {
    return MatrixRows(name, rows, cols, 0, rows);
  }

  // Rows [first, first + rows) of a [total_rows][cols] matrix that fuses several (Phi-3's attn_qkv and its
  // ffn_up holding gate and up), used in place: a block never spans two rows, so each part starts on a row.
  WeightMatrix MatrixRows(const std::string& name, int total_rows, int cols, int first, int rows) {
    used_.insert(name);
    const GgufTensorInfo& t = Require(*file_, name);
    CheckDims(*file_, t, {static_cast<std::uint64_t>(cols), static_cast<std::uint64_t>(total_rows)});
    return WeightMatrix::View(t.type, rows, cols, t.data + Extent(first, GgmlRowBytes(t.type, cols)), file_);
  }

  // A [experts][rows][cols] stack of matrices (GGUF dims {cols, rows, experts}: llama.cpp's ffn_*_exps),
  // each expert's rows used in place. A block never spans two rows, so each expert starts on a row.
  std::vector<WeightMatrix> Experts(const std::string& name, int experts, int rows, int cols) {
    used_.insert(name);
    const GgufTensorInfo& t = Require(*file_, name);
    CheckDims(*file_, t,
              {static_cast<std::uint64_t>(cols), static_cast<std::uint64_t>(rows),
               static_cast<std::uint64_t>(experts)});
    const std::size_t expert_bytes = Extent(rows, GgmlRowBytes(t.type, cols));
    std::vector<WeightMatrix> out;
    for (int e = 0; e < experts; ++e) {
      out.push_back(WeightMatrix::View(t.type, rows, cols, t.data + Extent(e, expert_bytes), file_));
    }
    return out;
  }

  // A tensor read elsewhere (ConfigFromGguf's rope_freqs.weight).
  void Note(const std::string& name) { used_.insert(name); }

  // Throws naming the first tensor of the file that was not taken.
  void RequireAllUsed(const std::string& arch) const {
    for (const GgufTensorInfo& t : file_->tensors()) {
      if (used_.count(t.name) == 0) {
        throw MakeError(Where(*file_, t), " is not part of the ", arch,
                        " model plumb computes; refusing a file it does not fully understand (docs/models.md "
                        "\"What plumb refuses\")");
      }
    }
  }

 private:
  std::shared_ptr<const GgufFile> file_;
  std::set<std::string> used_;
};

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

// A float key that must be a number in [0, 1e30), or nullopt when absent.
std::optional<float> OptionalNonNegative(const GgufFile& file, const std::string& key) {
  const std::optional<double> value = file.FindFloat(key);
  if (!value) return std::nullopt;
  if (!(*value >= 0.0 && *value < 1e30)) {
    throw MakeError(file.path(), ": metadata key '", key, "' = ", *value, " must be a non-negative number");
  }
  return static_cast<float>(*value);
}

// `<arch>.attention.scale`: the query scale where it is not 1/sqrt(head_dim). llama.cpp defines the key (for
// Granite and others) but derives Gemma's from the model size; export_gguf.py writes it for a Gemma whose
// query_pre_attn_scalar is not head_dim, which llama.cpp's layout cannot say otherwise.
void ReadAttentionScale(const GgufFile& file, const std::string& arch, ModelConfig& c) {
  if (const std::optional<float> scale = OptionalNonNegative(file, arch + ".attention.scale")) {
    if (*scale == 0.0f) throw MakeError(file.path(), ": metadata key '", arch, ".attention.scale' = 0");
    c.attention_scale = *scale;
  }
}

// `<arch>.attention.sliding_window_pattern` as a period (llama.cpp's set_swa_pattern: layer i is local unless
// (i + 1) is a multiple of it), where a Gemma's differs from llama.cpp's fixed one.
void ReadSwaPattern(const GgufFile& file, const std::string& arch, ModelConfig& c) {
  const std::string key = arch + ".attention.sliding_window_pattern";
  const GgufValue* v = file.FindValue(key);
  if (v == nullptr) return;
  if (v->type == GgufValueType::ARRAY) {
    throw MakeError(file.path(), ": metadata key '", key,
                    "' is a per-layer array; plumb reads a period (an unsigned integer)");
  }
  c.sliding_window_pattern = PositiveInt(file, key);
}

// A window on the local layers with a full one every period (Gemma 2 and 3) as llama.cpp reads it:
// <arch>.attention.sliding_window (the family's default where absent; 0: no window), the family's period
// unless <arch>.attention.sliding_window_pattern says, and, where the family has one, the local layers' RoPE
// base (the converter's <arch>.rope.freq_base_swa where written, else the family's: 10000 for Gemma 3).
void ReadPeriodicWindow(const GgufFile& file, const Family& family, ModelConfig& c) {
  const std::string arch = family.gguf_arch, key = arch + ".attention.sliding_window";
  const std::uint64_t window =
      file.FindUint(key).value_or(static_cast<std::uint64_t>(family.gguf_default_window));
  if (window > (1u << 30))
    throw MakeError(file.path(), ": metadata key '", key, "' = ", window, " is out of range");
  if (window == 0) return;
  c.sliding_window = static_cast<int>(window);
  c.sliding_window_pattern = family.window_period;
  ReadSwaPattern(file, arch, c);
  if (family.local_rope_theta > 0.0f) {
    c.rope_theta_local = family.local_rope_theta;
    if (const std::optional<float> base = OptionalNonNegative(file, arch + ".rope.freq_base_swa")) {
      if (*base == 0.0f) throw MakeError(file.path(), ": metadata key '", arch, ".rope.freq_base_swa' = 0");
      c.rope_theta_local = *base;
    }
  }
}

// Gemma's query scale and soft-caps as llama.cpp reads them (llama_model::load_hparams): the caps the file
// says, else the family's defaults (llama_hparams': Gemma 2's 50 and 30); 1/√(hidden_size / num_heads) for
// the sizes llama.cpp scales so (Family::hidden_per_head_block_counts), else 1/√head_dim;
// <arch>.attention.scale over both.
void ReadQueryScaleAndSoftcaps(const GgufFile& file, const Family& family, ModelConfig& c) {
  const std::string arch = family.gguf_arch;
  if (family.softcaps) {
    const std::string attn_key = arch + ".attn_logit_softcapping";
    if (family.gguf_reads_attn_softcap) {
      c.attn_logit_softcap = OptionalNonNegative(file, attn_key).value_or(family.default_attn_softcap);
    } else if (file.FindFloat(attn_key).value_or(0.0) > 0.0) {
      throw MakeError(file.path(), ": ", attn_key, " is not supported (llama.cpp's ", arch,
                      " has no attention soft-capping)");
    }
    c.final_logit_softcap =
        OptionalNonNegative(file, arch + ".final_logit_softcapping").value_or(family.default_final_softcap);
  }
  if (family.query_scale != QueryScaleRule::kGemmaQueryPreAttnScalar) return;
  if (std::ranges::find(family.hidden_per_head_block_counts, c.num_layers) !=
      family.hidden_per_head_block_counts.end()) {
    c.attention_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.hidden_size / c.num_heads)));
  }
  ReadAttentionScale(file, arch, c);
}

// The `<arch>.*` keys plumb reads or checks (llama.cpp's names, without the prefix). Any other key of the
// architecture's own namespace may change the math (an attention or embedding scale, clamping, YaRN's
// parameters, ...), so a file with one is refused naming it: the hyper-parameters live in that namespace,
// while general.*, tokenizer.* and quantize.* say nothing about the forward pass.
constexpr const char* kKnownArchKeys[] = {"context_length",
                                          "embedding_length",
                                          "block_count",
                                          "feed_forward_length",
                                          "vocab_size",
                                          "attention.head_count",
                                          "attention.head_count_kv",
                                          "attention.key_length",
                                          "attention.value_length",
                                          "attention.layer_norm_rms_epsilon",
                                          "rope.freq_base",
                                          "rope.dimension_count",
                                          "rope.scaling.type",
                                          "rope.scaling.factor",
                                          "rope.scaling.attn_factor",
                                          "rope.scaling.original_context_length",
                                          "rope.scaling.finetuned",
                                          "expert_count",
                                          "expert_used_count",
                                          "expert_feed_forward_length"};
// And those of some families alone: the keys each row's switches read.
bool IsFamilyKey(const Family& family, std::string_view key) {
  const bool periodic = family.window == WindowRule::kPeriodic;
  return ((periodic || family.gguf_window_key) && key == "attention.sliding_window") ||
         (periodic && key == "attention.sliding_window_pattern") ||
         (family.query_scale == QueryScaleRule::kGemmaQueryPreAttnScalar && key == "attention.scale") ||
         (family.softcaps && (key == "final_logit_softcapping" || key == "attn_logit_softcapping")) ||
         (family.local_rope_theta > 0.0f && key == "rope.freq_base_swa");
}

// A window on every layer: Mistral's, which export_gguf.py writes as llama.attention.sliding_window
// (llama.cpp's llama arch has no window and ignores the key), and Phi-3's phi3.attention.sliding_window (0:
// none, as the converter writes for a config.json without one). Both run as transformers runs them.
void ReadSlidingWindow(const GgufFile& file, const std::string& arch, ModelConfig& c) {
  const std::string key = arch + ".attention.sliding_window";
  const std::optional<std::uint64_t> window = file.FindUint(key);
  if (!window || *window == 0) return;
  c.sliding_window = PositiveInt(file, key);
  c.sliding_window_pattern = 0;
}

std::string ValueText(const GgufValue& v) {
  if (v.type == GgufValueType::STRING) return "'" + v.string + "'";
  if (v.type == GgufValueType::ARRAY) return "an array of " + std::to_string(v.elements.size());
  if (v.type == GgufValueType::BOOL) return v.boolean ? "true" : "false";
  if (v.type == GgufValueType::FLOAT32 || v.type == GgufValueType::FLOAT64) {
    std::ostringstream out;
    out << v.number;
    return out.str();
  }
  if (v.type == GgufValueType::UINT64) return std::to_string(static_cast<std::uint64_t>(v.integer));
  return std::to_string(v.integer);
}

void RefuseUnknownArchKeys(const GgufFile& file, const Family& family) {
  const std::string p = std::string(family.gguf_arch) + ".";
  for (const auto& [key, value] : file.metadata()) {
    if (!key.starts_with(p)) continue;
    const std::string_view rest = std::string_view(key).substr(p.size());
    const auto is_rest = [&](const char* k) { return rest == k; };
    const bool known = std::ranges::any_of(kKnownArchKeys, is_rest) || IsFamilyKey(family, rest);
    if (!known) {
      throw MakeError(file.path(), ": metadata key '", key, "' = ", ValueText(value),
                      " is not one plumb implements (it may change the math; docs/models.md \"What plumb "
                      "refuses\")");
    }
  }
  if (file.FindUint("split.count").value_or(1) > 1) {
    throw MakeError(file.path(), ": split.count = ", *file.FindUint("split.count"),
                    ": a GGUF split into several files is not supported (merge it with llama-gguf-split)");
  }
}

// One of Phi-3's LongRoPE tensors: F32, a divisor per rotated pair, each positive.
std::vector<float> ReadRopeFactors(const GgufFile& file, const char* name, int pairs) {
  const GgufTensorInfo& t = Require(file, name);
  if (t.type != GgmlType::F32) {
    throw MakeError(Where(file, t), ": tensor type ", GgmlTypeName(t.type), ", expected F32");
  }
  CheckDims(file, t, {static_cast<std::uint64_t>(pairs)});
  std::vector<float> factors(static_cast<std::size_t>(pairs));
  DequantizeRow(t.type, t.data, factors.data(), pairs);
  for (int i = 0; i < pairs; ++i) {
    if (!(factors[i] > 0.0f) || !std::isfinite(factors[i])) {
      throw MakeError(Where(file, t), ": factor ", i, " = ", factors[i], " must be a positive number");
    }
  }
  return factors;
}

// Phi-3's LongRoPE as llama.cpp's converter writes it: rope_factors_long.weight and
// rope_factors_short.weight, phi3.rope.scaling.attn_factor (sqrt(1 + ln(scale) / ln(original)), by the
// converter) and the original context. llama.cpp picks the long factors for the whole run when its context
// exceeds the original; plumb picks them per forward pass by the sequence's length, as transformers and vLLM
// do (docs/models.md "RoPE scaling"), the same choice for every pass of a sequence that stays on one side.
void ReadLongRope(const GgufFile& file, ModelConfig& c) {
  RopeScaling s;
  s.type = RopeScalingType::kLongRope;
  const int pairs = c.RotaryDim() / 2;
  for (auto [name, out] :
       {std::pair{kRopeFactorsShort, &s.short_factor}, std::pair{kRopeFactorsLong, &s.long_factor}}) {
    for (float f : ReadRopeFactors(file, name, pairs)) out->push_back(f);
  }
  s.original_max_position_embeddings = PositiveInt(file, "phi3.rope.scaling.original_context_length");
  s.attention_factor = file.FindFloat("phi3.rope.scaling.attn_factor").value_or(1.0);
  if (!(s.attention_factor > 0.0 && s.attention_factor < 1e30)) {
    throw MakeError(file.path(), ": phi3.rope.scaling.attn_factor = ", s.attention_factor,
                    " must be a positive number");
  }
  SetRopeScaling(c, s);
}

// RoPE scaling as llama.cpp reads it: rope.scaling.factor divides every frequency (llama.cpp's
// freq_scale = 1 / factor, for type none or linear alike), and a Llama's rope_freqs.weight divides each
// pair's (llama.cpp's converter writes Llama 3.1's rule so). YaRN and the rest are refused by name.
void ReadRopeScaling(const GgufFile& file, const Family& family, ModelConfig& c) {
  const std::string arch = family.gguf_arch, p = arch + ".rope.scaling.";
  const std::string type = file.FindString(p + "type").value_or("none");
  if (type != "none" && type != "linear") {
    throw MakeError(file.path(), ": ", p, "type '", type,
                    "' is not supported (plumb implements 'none' and 'linear')");
  }
  if (family.longrope && file.FindTensor(kRopeFactorsLong) != nullptr) return ReadLongRope(file, c);
  if (const std::optional<double> attn = file.FindFloat(p + "attn_factor"); attn && *attn != 1.0) {
    throw MakeError(file.path(), ": ", p, "attn_factor = ", *attn, " is not supported (1 only, but with ",
                    "Phi-3's LongRoPE factors)");
  }
  const double factor = file.FindFloat(p + "factor").value_or(0.0);  // llama.cpp: 0 means none
  if (!(factor >= 0.0 && factor < 1e30)) {
    throw MakeError(file.path(), ": ", p, "factor = ", factor, " must be a non-negative number");
  }
  const GgufTensorInfo* freqs = file.FindTensor(kRopeFreqs);
  if (freqs != nullptr && !family.gguf_rope_freqs) {
    throw MakeError(Where(file, *freqs), ": a '", arch, "' model has no per-pair RoPE factors in llama.cpp");
  }
  if (freqs != nullptr && factor != 0.0 && factor != 1.0) {
    throw MakeError(file.path(), ": both ", kRopeFreqs, " and ", p, "factor = ", factor,
                    " (two scalings at once)");
  }
  if (freqs != nullptr) {
    if (freqs->type != GgmlType::F32) {
      throw MakeError(Where(file, *freqs), ": tensor type ", GgmlTypeName(freqs->type), ", expected F32");
    }
    CheckDims(file, *freqs, {static_cast<std::uint64_t>(c.head_dim / 2)});
    c.rope_scaling.type = RopeScalingType::kFactors;
    c.rope_freq_factors.resize(static_cast<std::size_t>(c.head_dim / 2));
    DequantizeRow(freqs->type, freqs->data, c.rope_freq_factors.data(), c.head_dim / 2);
  } else if (factor != 0.0 && factor != 1.0) {
    SetRopeScaling(c, {RopeScalingType::kLinear, factor});
  }
}

// Mixture of experts as llama.cpp runs Qwen3-MoE (LLM_ARCH_QWEN3MOE) and a llama with llama.expert_count
// (Mixtral): every layer MoE, softmax routing, the chosen weights always renormalized (llama.cpp passes
// norm_w = true; Qwen3-MoE's checkpoints set norm_topk_prob, Mixtral's router always renormalizes). A Mixtral
// expert is as wide as feed_forward_length; a Qwen3-MoE one says its width in expert_feed_forward_length.
void ReadExperts(const GgufFile& file, const std::string& arch, ModelConfig& c) {
  const std::string p = arch + ".";
  c.num_experts = PositiveInt(file, p + "expert_count");
  if (!file.FindValue(p + "expert_used_count")) {
    throw MakeError(file.path(), ": a mixture-of-experts '", arch, "' model (", p,
                    "expert_count = ", c.num_experts, ") needs ", p, "expert_used_count");
  }
  c.experts_per_token = PositiveInt(file, p + "expert_used_count");
  c.moe_intermediate_size = PositiveInt(file, p + "expert_feed_forward_length", c.intermediate_size);
  if (c.experts_per_token > c.num_experts) {
    throw MakeError(file.path(), ": ", p, "expert_used_count = ", c.experts_per_token, " exceeds ", p,
                    "expert_count = ", c.num_experts);
  }
  c.moe_routing = MoeRouting::kSoftmaxTopK;
  c.moe_renormalize = true;
}

}  // namespace

ModelConfig ConfigFromGguf(const GgufFile& file) {
  const std::string& arch = file.GetString("general.architecture");
  const Family* family = FindFamilyByGgufArch(arch);
  if (family == nullptr) {
    throw MakeError(file.path(), ": general.architecture '", arch, "' is not supported (plumb runs ",
                    GgufArchNames(), "; docs/models.md)");
  }
  RefuseUnknownArchKeys(file, *family);
  const std::string p = arch + ".";
  // llama.cpp's llama arch is Mixtral when it has experts; qwen3moe always has them; the others never.
  const bool moe = family->experts != ExpertLayout::kNone ||
                   (family->gguf_experts && file.FindUint(p + "expert_count").value_or(0) > 0);
  for (const char* key : {"expert_count", "expert_used_count", "expert_feed_forward_length"}) {
    if (!moe && file.FindUint(p + key).value_or(0) > 0) {
      throw MakeError(file.path(), ": mixture-of-experts '", arch, "' models (", p, key, " = ",
                      *file.FindUint(p + key), ") are not supported (plumb runs ",
                      GgufArchNames(&Family::gguf_experts), " ones)");
    }
  }
  ModelConfig c;
  ApplyFamily(*family, c);
  c.hidden_size = PositiveInt(file, p + "embedding_length");
  // A MoE model's dense MLP width says nothing when every layer is MoE (llama.cpp reads it as optional).
  c.intermediate_size =
      PositiveInt(file, p + "feed_forward_length",
                  family->experts == ExpertLayout::kQwen3Moe
                      ? std::optional<int>(PositiveInt(file, p + "expert_feed_forward_length"))
                      : std::nullopt);
  c.num_layers = PositiveInt(file, p + "block_count");
  c.num_heads = PositiveInt(file, p + "attention.head_count");
  c.num_kv_heads = PositiveInt(file, p + "attention.head_count_kv", c.num_heads);
  c.head_dim = PositiveInt(file, p + "attention.key_length", c.hidden_size / c.num_heads);
  if (const std::optional<std::uint64_t> v = file.FindUint(p + "attention.value_length");
      v && *v != static_cast<std::uint64_t>(c.head_dim)) {
    throw MakeError(file.path(), ": ", p, "attention.value_length = ", *v,
                    " differs from attention.key_length = ", c.head_dim,
                    " (plumb's value heads are as long as its key heads)");
  }
  // Phi-3 turns only the first rope.dimension_count dims of each head (Phi-4-mini: 3/4 of them), as the
  // converter writes it (int(partial_rotary_factor * n_embd) // n_head); every other arch turns them all.
  if (const std::optional<std::uint64_t> rot = file.FindUint(p + "rope.dimension_count");
      rot && *rot != static_cast<std::uint64_t>(c.head_dim)) {
    if (!family->partial_rotary || *rot == 0 || *rot > static_cast<std::uint64_t>(c.head_dim) ||
        *rot % 2 != 0) {
      throw MakeError(file.path(), ": ", p, "rope.dimension_count = ", *rot, " differs from the head size ",
                      c.head_dim,
                      family->partial_rotary
                          ? " and is not an even number below it"
                          : " (partial rotary embeddings are not supported for '" + arch +
                                "'; plumb reads them for " + GgufArchNames(&Family::partial_rotary) + ")");
    }
    c.rotary_dim = static_cast<int>(*rot);
  }
  c.rms_norm_eps = static_cast<float>(file.GetFloat(p + "attention.layer_norm_rms_epsilon"));
  c.rope_theta = static_cast<float>(file.FindFloat(p + "rope.freq_base").value_or(10000.0));
  ReadRopeScaling(file, *family, c);
  c.max_position_embeddings = PositiveInt(file, p + "context_length");
  const GgufTensorInfo& embedding = Require(file, "token_embd.weight");
  const int embedding_rows =
      embedding.dims.size() == 2 && embedding.dims[1] <= (1u << 30) ? static_cast<int>(embedding.dims[1]) : 0;
  c.vocab_size = PositiveInt(file, p + "vocab_size", embedding_rows);
  c.tie_word_embeddings = file.FindTensor("output.weight") == nullptr;
  if (family->window == WindowRule::kPeriodic) ReadPeriodicWindow(file, *family, c);
  if (family->gguf_window_key) ReadSlidingWindow(file, arch, c);
  ReadQueryScaleAndSoftcaps(file, *family, c);
  if (family->nope_layers) {
    // llama.cpp skips RoPE on every nope_interval-th layer (n_no_rope_layer_step = 4, which no GGUF key
    // sets).
    for (int layer = family->nope_interval - 1; layer < c.num_layers; layer += family->nope_interval) {
      c.nope_layers.push_back(layer);
    }
  }
  if (moe) ReadExperts(file, arch, c);
  c.attention_bias = file.FindTensor("blk.0.attn_q.bias") != nullptr;
  if (std::optional<std::uint64_t> bos = file.FindUint("tokenizer.ggml.bos_token_id"))
    c.bos_token_id = static_cast<int>(std::min<std::uint64_t>(*bos, 1u << 30));
  if (std::optional<std::uint64_t> eos = file.FindUint("tokenizer.ggml.eos_token_id"))
    c.eos_token_ids.push_back(static_cast<int>(std::min<std::uint64_t>(*eos, 1u << 30)));
  ValidateConfig(c, file.path());
  return c;
}

ModelWeights LoadGgufWeights(const ModelConfig& c, const std::shared_ptr<const GgufFile>& file) {
  TensorReader f(file);
  const int d = c.hidden_size;
  const Family& family = FamilyOf(c);
  const bool permuted_rope_rows = family.gguf_rope_rows == GgufRopeRows::kPermuted;
  const bool fused = family.fused_projections;  // attn_qkv, and ffn_up holding gate then up
  ModelWeights w;
  w.token_embedding = f.Matrix("token_embd.weight", c.vocab_size, d);
  w.layers.resize(c.num_layers);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights& l = w.layers[i];
    if (c.pre_norm) l.attn_norm = f.Vector(p + "attn_norm.weight", d);
    if (fused) {
      const int rows = c.QueryDim() + 2 * c.KvDim();
      l.wq = f.MatrixRows(p + "attn_qkv.weight", rows, d, 0, c.QueryDim());
      l.wk = f.MatrixRows(p + "attn_qkv.weight", rows, d, c.QueryDim(), c.KvDim());
      l.wv = f.MatrixRows(p + "attn_qkv.weight", rows, d, c.QueryDim() + c.KvDim(), c.KvDim());
    } else {
      l.wq = f.Matrix(p + "attn_q.weight", c.QueryDim(), d);
      l.wk = f.Matrix(p + "attn_k.weight", c.KvDim(), d);
      l.wv = f.Matrix(p + "attn_v.weight", c.KvDim(), d);
    }
    if (permuted_rope_rows) {
      l.wq = UnpermuteRopeRows(l.wq, c.head_dim);
      l.wk = UnpermuteRopeRows(l.wk, c.head_dim);
    }
    if (c.attention_bias) {
      l.bq = f.Vector(p + "attn_q.bias", c.QueryDim());
      l.bk = f.Vector(p + "attn_k.bias", c.KvDim());
      l.bv = f.Vector(p + "attn_v.bias", c.KvDim());
      if (permuted_rope_rows) {
        l.bq = UnpermuteRopeBias(l.bq, c.head_dim);
        l.bk = UnpermuteRopeBias(l.bk, c.head_dim);
      }
    }
    l.wo = f.Matrix(p + "attn_output.weight", d, c.QueryDim());
    if (c.qk_norm) {  // per head, or OLMo 2's over the whole projection
      l.q_norm = f.Vector(p + "attn_q_norm.weight", c.qk_norm_whole ? c.QueryDim() : c.head_dim);
      l.k_norm = f.Vector(p + "attn_k_norm.weight", c.qk_norm_whole ? c.KvDim() : c.head_dim);
    }
    if (c.sandwich_norm) {
      l.post_attn_norm = f.Vector(p + "post_attention_norm.weight", d);
      l.post_mlp_norm = f.Vector(p + "post_ffw_norm.weight", d);
    }
    if (c.pre_norm) l.mlp_norm = f.Vector(p + "ffn_norm.weight", d);
    if (c.IsMoeLayer(i)) {
      const int e = c.num_experts, ffn = c.moe_intermediate_size;
      l.router = f.Matrix(p + "ffn_gate_inp.weight", e, d);
      const std::vector<WeightMatrix> gate = f.Experts(p + "ffn_gate_exps.weight", e, ffn, d),
                                      up = f.Experts(p + "ffn_up_exps.weight", e, ffn, d),
                                      down = f.Experts(p + "ffn_down_exps.weight", e, d, ffn);
      for (int x = 0; x < e; ++x) l.experts.push_back({gate[x], up[x], down[x]});
      continue;
    }
    const int ffn = c.intermediate_size;
    if (fused) {  // llama.cpp's swiglu over the fused ffn_up: silu of the first half times the second
      l.w_gate = f.MatrixRows(p + "ffn_up.weight", 2 * ffn, d, 0, ffn);
      l.w_up = f.MatrixRows(p + "ffn_up.weight", 2 * ffn, d, ffn, ffn);
    } else {
      l.w_gate = f.Matrix(p + "ffn_gate.weight", ffn, d);
      l.w_up = f.Matrix(p + "ffn_up.weight", ffn, d);
    }
    l.w_down = f.Matrix(p + "ffn_down.weight", d, ffn);
  }
  w.final_norm = f.Vector("output_norm.weight", d);
  if (!c.tie_word_embeddings) w.lm_head = f.Matrix("output.weight", c.vocab_size, d);
  if (c.rope_scaling.type == RopeScalingType::kFactors) f.Note(kRopeFreqs);  // ConfigFromGguf read it
  if (c.rope_scaling.type == RopeScalingType::kLongRope) {                   // and these
    f.Note(kRopeFactorsLong);
    f.Note(kRopeFactorsShort);
  }
  f.RequireAllUsed(c.model_type);
  return w;
}

}  // namespace plumb
