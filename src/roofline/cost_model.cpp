// The roofline cost model (include/plumb/roofline/cost_model.h; formulas: docs/roofline.md "The cost
// model").
#include "plumb/roofline/cost_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <sstream>

#include "plumb/core/error.h"
#include "plumb/model/packing.h"

namespace plumb::roofline {
namespace {

// The GGUF types that are weight formats (blocks or 16/32-bit floats), by ggml id.
bool IsWeightGgmlType(GgmlType type) {
  switch (type) {
    case GgmlType::I8:
    case GgmlType::I16:
    case GgmlType::I32:
    case GgmlType::I64:
    case GgmlType::F64:
      return false;
    default:
      return true;
  }
}

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

WeightDtype Plain(const std::string& name, double bytes) {
  WeightDtype d;
  d.name = name;
  d.kind = WeightDtype::Kind::kPlain;
  d.element_bytes = bytes;
  return d;
}

std::string Shape(int rows, int in, int out) {
  std::ostringstream s;
  s << rows << "×" << in << " · " << in << "×" << out;
  return s.str();
}

std::string Rows(int rows, int width) {
  std::ostringstream s;
  s << rows << "×" << width;
  return s.str();
}

// MLA's widths: the query (all heads, RoPE part included), the cached latent and RoPE key, kv_b_proj's
// output (each head's key without RoPE and its value) and the attention output (all value heads).
struct MlaDims {
  int q = 0, latent = 0, kv_up = 0, v = 0;
};

MlaDims Mla(const ModelConfig& c) {
  return {c.num_heads * (c.qk_nope_head_dim + c.qk_rope_head_dim), c.kv_lora_rank + c.qk_rope_head_dim,
          c.num_heads * (c.qk_nope_head_dim + c.v_head_dim), c.num_heads * c.v_head_dim};
}

// Layers with a dense MLP: all of a dense model's; of a MoE model's, those ModelConfig::IsMoeLayer leaves
// dense (DeepSeek's first first_dense_layers, Qwen3-MoE's mlp_only_layers).
int DenseLayers(const ModelConfig& c) {
  return c.num_layers - c.MoeLayerCount();
}

}  // namespace

double WeightDtype::MatrixBytes(int rows, int cols) const {
  const double r = rows;
  switch (kind) {
    case Kind::kPlain:
      return r * cols * element_bytes;
    case Kind::kGgml: {
      const GgmlTypeTraits t = GgmlTraits(ggml);
      const double blocks = std::ceil(static_cast<double>(cols) / t.block_elements);
      return r * blocks * t.block_bytes;
    }
    case Kind::kFp8:
      return r * (cols + 4.0);  // one code per element and an FP32 scale per row
    case Kind::kInt4: {
      const double groups = Int4Groups(cols, int4.group_size);
      return r * (static_cast<double>(Int4RowBytes(cols)) + groups * 2.0 +
                  static_cast<double>(Int4ZeroRowBytes(int4, cols)));
    }
    case Kind::kMicroscaled:  // the codes and a one-byte scale per block (NVFP4's FP32 tensor scale vanishes)
      return r * (static_cast<double>(MicroscaledRowBytes(mx, cols)) + MicroscaledBlocks(mx, cols));
    case Kind::kBlockFp8:  // one code per element and an FP32 scale per 128 x 128 block
      return r * cols + 4.0 * Fp8BlockCount(rows) * Fp8BlockCount(cols);
  }
  return 0;
}

double WeightDtype::BytesPerParameter() const {
  // A row of 2^20 elements: a whole number of every block and group, and a per-row scale that vanishes.
  constexpr int kLong = 1 << 20;
  if (kind == Kind::kFp8) return 1.0;
  if (kind == Kind::kBlockFp8) return 1.0 + 4.0 / (kFp8BlockSize * kFp8BlockSize);  // a scale per 16384
  return MatrixBytes(1, kLong) / kLong;
}

WeightDtype ParseWeightDtype(std::string_view text) {
  const std::string name = Lower(text);
  if (name == "f32" || name == "fp32") return Plain("f32", 4);
  if (name == "f16" || name == "fp16") return Plain("f16", 2);
  if (name == "bf16") return Plain("bf16", 2);
  if (name == "int8") return Plain("int8", 1);
  if (name == "int4") return Plain("int4", 0.5);
  if (name == "fp8" || name == "fp8-e4m3" || name == "fp8-e5m2") {
    WeightDtype d;
    d.name = name == "fp8" ? "fp8-e4m3" : name;
    d.kind = WeightDtype::Kind::kFp8;
    d.element_bytes = 1;
    return d;
  }
  if (const std::optional<PackFormat> pack = ParsePackFormat(name); pack && pack->kind == PackKind::kInt4) {
    WeightDtype d;
    d.name = name;
    d.kind = WeightDtype::Kind::kInt4;
    d.int4 = pack->int4;
    return d;
  }
  if (const std::optional<PackFormat> pack = ParsePackFormat(name);
      pack && pack->kind == PackKind::kMicroscaled) {
    WeightDtype d;
    d.name = name;
    d.kind = WeightDtype::Kind::kMicroscaled;
    d.mx = pack->mx;
    return d;
  }
  if (name == "fp8-block128") {
    WeightDtype d;
    d.name = name;
    d.kind = WeightDtype::Kind::kBlockFp8;
    return d;
  }
  for (std::uint32_t id = 0; id < 64; ++id) {
    const std::optional<GgmlTypeTraits> traits = FindGgmlType(id);
    if (!traits || !IsWeightGgmlType(static_cast<GgmlType>(id)) || Lower(traits->name) != name) continue;
    WeightDtype d;
    d.name = name;
    d.kind = WeightDtype::Kind::kGgml;
    d.ggml = static_cast<GgmlType>(id);
    return d;
  }
  throw MakeError("unknown weight dtype '", text, "' (choices: ", WeightDtypeChoices(), ")");
}

std::string WeightDtypeChoices() {
  std::string out = "f32, f16, bf16, fp8-e4m3, fp8-e5m2, int8, int4";
  for (const std::string& name : PackFormatNames()) {
    if (name.rfind("int4-", 0) == 0) out += ", " + name;
  }
  for (const MicroscalingScheme scheme : kMicroscalingSchemes) {
    if (scheme != MicroscalingScheme::kMxfp4) out += ", " + std::string(MicroscalingSchemeName(scheme));
  }
  out += ", fp8-block128";
  for (std::uint32_t id = 0; id < 64; ++id) {
    const std::optional<GgmlTypeTraits> traits = FindGgmlType(id);
    if (traits && traits->block_elements > 1) out += ", " + Lower(traits->name);
  }
  return out;
}

double WeightBytes::Stored() const {
  return q + k + v + o + gate + up + down + router + qkv_bias + attn_norm + mlp_norm + qk_norm + post_norm +
         final_norm + embedding + (tied ? 0 : lm_head);
}

WeightBytes WeightBytesFor(const ModelConfig& c, const WeightDtype& dtype, double vector_bytes) {
  const double layers = c.num_layers;
  const int d = c.hidden_size;
  WeightBytes w;
  if (c.IsMla()) {  // q_a and q_b (or one q_proj), kv_a_proj_with_mqa, kv_b_proj, o_proj
    const MlaDims m = Mla(c);
    w.q = layers * (c.q_lora_rank > 0
                        ? dtype.MatrixBytes(c.q_lora_rank, d) + dtype.MatrixBytes(m.q, c.q_lora_rank)
                        : dtype.MatrixBytes(m.q, d));
    w.k = layers * dtype.MatrixBytes(m.latent, d);
    w.v = layers * dtype.MatrixBytes(m.kv_up, c.kv_lora_rank);
    w.o = layers * dtype.MatrixBytes(d, m.v);
  } else {
    w.q = layers * dtype.MatrixBytes(c.QueryDim(), d);
    w.k = layers * dtype.MatrixBytes(c.KvDim(), d);
    w.v = layers * dtype.MatrixBytes(c.KvDim(), d);
    w.o = layers * dtype.MatrixBytes(d, c.QueryDim());
  }
  const double dense = DenseLayers(c), moe = layers - dense;
  w.gate = dense * dtype.MatrixBytes(c.intermediate_size, d);
  w.up = dense * dtype.MatrixBytes(c.intermediate_size, d);
  w.down = dense * dtype.MatrixBytes(d, c.intermediate_size);
  if (c.IsMoe()) {  // every routed and shared expert, and a [E][d] router per MoE layer
    const double experts = moe * (c.num_experts + c.num_shared_experts);
    w.expert_gate = dtype.MatrixBytes(c.moe_intermediate_size, d);
    w.expert_up = w.expert_gate;
    w.expert_down = dtype.MatrixBytes(d, c.moe_intermediate_size);
    w.gate += experts * w.expert_gate;
    w.up += experts * w.expert_up;
    w.down += experts * w.expert_down;
    w.router = moe * dtype.MatrixBytes(c.num_experts, d);
  }
  w.qkv_bias = c.attention_bias ? layers * (c.QueryDim() + 2.0 * c.KvDim()) * vector_bytes : 0;
  w.attn_norm = layers * d * vector_bytes;
  w.mlp_norm = w.attn_norm;
  w.qk_norm = c.qk_norm ? layers * 2.0 * c.head_dim * vector_bytes : 0;
  if (c.IsMla()) w.qk_norm = layers * (c.q_lora_rank + c.kv_lora_rank) * vector_bytes;  // q_a, kv_a norms
  w.post_norm = c.sandwich_norm ? 2 * w.attn_norm : 0;
  w.final_norm = d * vector_bytes;
  w.embedding = dtype.MatrixBytes(c.vocab_size, d);
  w.embedding_row = dtype.MatrixBytes(1, d);
  w.tied = c.tie_word_embeddings;
  w.lm_head = w.embedding;
  return w;
}

WeightBytes WeightBytesOf(const ModelWeights& weights) {
  WeightBytes w;
  auto vector_bytes = [](const std::vector<float>& v) {
    return static_cast<double>(v.size() * sizeof(float));
  };
  for (const LayerWeights& l : weights.layers) {
    w.q += static_cast<double>(l.wq.Bytes());
    w.k += static_cast<double>(l.wk.Bytes());
    w.v += static_cast<double>(l.wv.Bytes());
    w.o += static_cast<double>(l.wo.Bytes());
    w.gate += static_cast<double>(l.w_gate.Bytes());
    w.up += static_cast<double>(l.w_up.Bytes());
    w.down += static_cast<double>(l.w_down.Bytes());
    w.qkv_bias += vector_bytes(l.bq) + vector_bytes(l.bk) + vector_bytes(l.bv);
    w.attn_norm += vector_bytes(l.attn_norm);
    w.mlp_norm += vector_bytes(l.mlp_norm);
    w.qk_norm += vector_bytes(l.q_norm) + vector_bytes(l.k_norm);
    w.post_norm += vector_bytes(l.post_attn_norm) + vector_bytes(l.post_mlp_norm);
  }
  w.final_norm = vector_bytes(weights.final_norm);
  w.embedding = static_cast<double>(weights.token_embedding.Bytes());
  w.embedding_row = static_cast<double>(weights.token_embedding.row_bytes);
  w.tied = weights.lm_head.rows == 0;
  w.lm_head = static_cast<double>(weights.LmHead().Bytes());
  return w;
}

double ParameterCount(const ModelConfig& c) {
  const double d = c.hidden_size;
  if (!c.IsMoe() && !c.IsMla()) {
    const double per_layer = d * c.QueryDim() * 2 + d * c.KvDim() * 2 + 3 * d * c.intermediate_size + 2 * d +
                             (c.attention_bias ? c.QueryDim() + 2.0 * c.KvDim() : 0);
    return c.num_layers * per_layer + d + d * c.vocab_size * (c.tie_word_embeddings ? 1 : 2);
  }
  // Matrix by matrix, every expert, router and norm: the bytes of the model in F32 ÷ 4.
  return WeightBytesFor(c, ParseWeightDtype("f32"), 4).Stored() / 4;
}

double ActiveParameterCount(const ModelConfig& c) {
  const double d = c.hidden_size;
  const double moe_layers = c.num_layers - DenseLayers(c);
  const double idle_experts = c.IsMoe() ? c.num_experts - c.experts_per_token : 0;
  return ParameterCount(c) - moe_layers * idle_experts * 3 * d * c.moe_intermediate_size -
         (c.tie_word_embeddings ? 0 : d * c.vocab_size);
}

double ExpertsTouched(int experts, int chosen, double tokens) {
  if (experts <= 0) return 0;
  const double E = experts;
  return E * (1 - std::pow(1 - std::min<double>(chosen, E) / E, tokens));
}

double KvBytesPerToken(const ModelConfig& c, double kv_element_bytes) {
  if (c.IsMla()) return 1.0 * c.num_layers * (c.kv_lora_rank + c.qk_rope_head_dim) * kv_element_bytes;
  return 2.0 * c.num_layers * c.KvDim() * kv_element_bytes;
}

double KernelCost::Intensity() const {
  return Bytes() > 0 ? flops / Bytes() : 0;
}

const KernelCost& PassCost::Kernel(ForwardKernel kernel) const {
  for (const KernelCost& k : kernels) {
    if (k.kernel == kernel) return k;
  }
  throw MakeError("cost model: no kernel ", ForwardKernelName(kernel), " in the pass");
}

double PassCost::Flops() const {
  double total = 0;
  for (const KernelCost& k : kernels) total += k.instances * k.flops;
  return total;
}

double PassCost::Bytes() const {
  double total = 0;
  for (const KernelCost& k : kernels) total += k.instances * k.Bytes();
  return total;
}

double PassCost::WeightBytes() const {
  double total = 0;
  for (const KernelCost& k : kernels) total += k.instances * k.weight_bytes;
  return total;
}

double PassCost::KvBytes() const {
  double total = 0;
  for (const KernelCost& k : kernels) total += k.instances * k.kv_bytes;
  return total;
}

namespace {

// What attention reads in one layer: (query, key) pairs per query head and cached positions read once each,
// summed over the sequences.
struct AttentionSpan {
  double pairs = 0;
  double positions = 0;
};

// "9h×71q×36 keys avg": heads × queries × the keys a query sees (the mean, for a causal prefill).
std::string AttentionShape(const ModelConfig& c, int rows, const AttentionSpan& span, ForwardPhase phase) {
  std::ostringstream shape;
  shape << c.num_heads << "h×" << rows << "q×"
        << static_cast<long long>(std::llround(span.pairs / std::max(1, rows))) << " keys"
        << (phase == ForwardPhase::kPrefill && rows > 1 ? " avg" : "");
  return shape.str();
}

using AddKernel = std::function<void(ForwardKernel, int, std::string, double, double, double, double)>;

// MLA (DeepSeek-V2/V3) in the absorbed-weights form its decode kernels use: the cache holds per position
// only the latent c (kv_lora_rank r) and one RoPE key (rope), shared by all H heads. q_nope is taken into
// latent space by kv_b's key half (W_UK, per head nope → r) and the attention output out of it by the value
// half (W_UV, r → v), so keys and values are never expanded: per (head, query, key) pair q·[c, k_rope] and
// p·c, 2·(2r + rope) FLOPs. q_proj: q_a (d → q_lora) and q_b (→ H·(nope + rope)); k_proj: kv_a (d → r +
// rope); v_proj: W_UK and W_UV applied to each row; qk_norm: the q_a and kv_a RMSNorms.
void MlaAttention(const ModelConfig& c, const WeightBytes& w, int rows, const AttentionSpan& span,
                  ForwardPhase phase, double a, double kvb, const AddKernel& add) {
  const MlaDims m = Mla(c);
  const double L = c.num_layers, R = rows, d = c.hidden_size, H = c.num_heads;
  const double r = c.kv_lora_rank, rope = c.qk_rope_head_dim, nope = c.qk_nope_head_dim, ql = c.q_lora_rank;
  const int layers = c.num_layers;
  const double q_flops = ql > 0 ? 2 * R * (d * ql + ql * m.q) : 2 * R * d * m.q;
  add(ForwardKernel::kQProj, layers,
      ql > 0 ? Shape(rows, c.hidden_size, c.q_lora_rank) + " · " + std::to_string(c.q_lora_rank) + "×" +
                   std::to_string(m.q)
             : Shape(rows, c.hidden_size, m.q),
      q_flops, w.q / L, R * (d + ql + m.q) * a, 0);
  add(ForwardKernel::kKProj, layers, Shape(rows, c.hidden_size, m.latent), 2 * R * d * m.latent, w.k / L,
      R * (d + m.latent) * a, 0);
  add(ForwardKernel::kVProj, layers,
      std::to_string(c.num_heads) + "h × (" + std::to_string(c.qk_nope_head_dim) + "→" +
          std::to_string(c.kv_lora_rank) + ", " + std::to_string(c.kv_lora_rank) + "→" +
          std::to_string(c.v_head_dim) + ")",
      2 * R * H * r * (nope + c.v_head_dim), w.v / L, R * H * (nope + 2 * r + c.v_head_dim) * a, 0);
  add(ForwardKernel::kQkNorm, layers, Rows(rows, c.q_lora_rank + c.kv_lora_rank), 4 * R * (ql + r),
      w.qk_norm / L, 2 * R * (ql + r) * a, 0);
  add(ForwardKernel::kRope, layers, Rows(rows, c.num_heads * c.qk_rope_head_dim + c.qk_rope_head_dim),
      3 * R * (H + 1) * rope, 0, 2 * R * (H + 1) * rope * a, 0);
  add(ForwardKernel::kKvWrite, layers, Rows(rows, m.latent), 0, 0, R * m.latent * a, R * m.latent * kvb);
  add(ForwardKernel::kAttention, layers, AttentionShape(c, rows, span, phase),
      2 * (2 * r + rope) * H * span.pairs, 0, R * H * (m.latent + r) * a, span.positions * m.latent * kvb);
}

// A MoE layer's experts, as gate_proj, up_proj, swiglu and down_proj kernels of `moe_layers` instances: each
// of the R rows goes through k routed and the shared experts (the FLOPs), and the step reads every expert
// that some row chose, ExpertsTouched(E, k, R) of the routed ones if rows route independently and
// uniformly, and the shared ones (the bytes). gate_proj includes the router: a [E][d] projection of each row.
void MoeExperts(const ModelConfig& c, const WeightBytes& w, int rows, int moe_layers, double a,
                const AddKernel& add) {
  const double R = rows, d = c.hidden_size, mf = c.moe_intermediate_size, E = c.num_experts;
  const double per_row = c.experts_per_token + c.num_shared_experts;  // experts each row passes through
  const double read = ExpertsTouched(c.num_experts, c.experts_per_token, R) + c.num_shared_experts;
  std::ostringstream shape;
  shape.precision(3);
  shape << Shape(rows, c.hidden_size, c.moe_intermediate_size) << " ×" << per_row << "/row, " << read
        << " of " << c.num_experts + c.num_shared_experts << " read";
  add(ForwardKernel::kGateProj, moe_layers, shape.str() + " + router",
      2 * R * per_row * d * mf + 2 * R * d * E, read * w.expert_gate + w.router / moe_layers,
      R * (per_row * (d + mf) + d + E) * a, 0);
  add(ForwardKernel::kUpProj, moe_layers, shape.str(), 2 * R * per_row * d * mf, read * w.expert_up,
      R * per_row * (d + mf) * a, 0);
  add(ForwardKernel::kSwiGlu, moe_layers, Rows(rows, static_cast<int>(per_row * mf)), 5 * R * per_row * mf, 0,
      3 * R * per_row * mf * a, 0);
  // Each expert's output weighted and summed into the residual: a multiply-add per expert and element.
  add(ForwardKernel::kDownProj, moe_layers, shape.str(), 2 * R * per_row * mf * d + 2 * R * per_row * d,
      read * w.expert_down, R * (per_row * (mf + d) + 2 * d) * a, 0);
}

// The pass of `rows` tokens of `batch` sequences; `global` is the attention of a layer that sees the whole
// cache, `local` of one with a sliding window (Gemma 3; unused without one); `logit_rows` rows reach the LM
// head. docs/roofline.md "The cost model" has the same formulas as a table.
PassCost Pass(const ModelConfig& c, const WeightBytes& w, const CostOptions& o, ForwardPhase phase, int batch,
              int rows, int context, AttentionSpan global, AttentionSpan local, int logit_rows) {
  const double L = c.num_layers;
  const double d = c.hidden_size, qd = c.QueryDim(), kvd = c.KvDim(), f = c.intermediate_size;
  const double V = c.vocab_size, R = rows, a = o.activation_bytes, kvb = o.kv_element_bytes;
  const double bias_q = c.attention_bias ? w.qkv_bias / L * qd / (qd + 2 * kvd) : 0;
  const double bias_kv = c.attention_bias ? w.qkv_bias / L * kvd / (qd + 2 * kvd) : 0;
  const int layers = c.num_layers;
  PassCost p;
  p.phase = phase;
  p.batch = batch;
  p.rows = rows;
  p.context = context;
  auto add = [&p](ForwardKernel k, int instances, std::string shape, double flops, double weight,
                  double activation, double kv) {
    p.kernels.push_back({k, instances, std::move(shape), flops, weight, activation, kv});
  };
  // A GEMM [R][in] · [in][out] (+ bias, + a residual add): 2·R·in·out FLOPs; the weights once, the input
  // rows read and the output rows written.
  // `weight` is the bytes of all `instances` (the layers) together.
  auto projection = [&](ForwardKernel k, double in, double out, double weight, double bias, bool residual,
                        int instances = -1) {
    instances = instances < 0 ? layers : instances;
    if (instances == 0) return;
    add(k, instances, Shape(rows, static_cast<int>(in), static_cast<int>(out)),
        2 * R * in * out + (bias > 0 ? R * out : 0) + (residual ? R * out : 0), weight / instances + bias,
        R * (in + out + (residual ? out : 0)) * a, 0);
  };
  // RMSNorm of R rows of d: square, sum, scale by 1/rms and by the weight, 4 FLOPs an element.
  auto norm = [&](ForwardKernel k, int instances, double norm_rows, double weight) {
    add(k, instances, Rows(static_cast<int>(norm_rows), c.hidden_size), 4 * norm_rows * d, weight,
        2 * norm_rows * d * a, 0);
  };
  add(ForwardKernel::kEmbedding, 1, Rows(rows, c.hidden_size), 0, R * w.embedding_row, R * d * a, 0);
  norm(ForwardKernel::kAttnNorm, layers, R, w.attn_norm / L);
  if (o.int8_activations && rows == 1) {
    // The inputs of q/k/v, o, gate/up and down, each rounded to int8 once: |x|, the block's max, × 1/d, the
    // rounding and the block sum, 5 FLOPs an element; each float read, its int8 code written, and two floats
    // (d, s) per block of 32.
    const double e = 2 * d + qd + f;
    add(ForwardKernel::kQuantize, layers, Rows(rows, static_cast<int>(e)), 5 * e, 0,
        e * a + e * (1 + 2 * 4.0 / 32), 0);
  }
  if (c.IsMla()) {
    MlaAttention(c, w, rows, global, phase, a, kvb, add);
  } else {
    projection(ForwardKernel::kQProj, d, qd, w.q, bias_q, false);
    projection(ForwardKernel::kKProj, d, kvd, w.k, bias_kv, false);
    projection(ForwardKernel::kVProj, d, kvd, w.v, bias_kv, false);
    if (c.qk_norm) {  // RMSNorm of every q and k head: as an RMSNorm of R rows of qd + kvd
      add(ForwardKernel::kQkNorm, layers, Rows(rows, c.QueryDim() + c.KvDim()), 4 * R * (qd + kvd),
          w.qk_norm / L, 2 * R * (qd + kvd) * a, 0);
    }
    // RoPE rotates pairs: 4 multiplies and 2 adds a pair, 3 FLOPs an element of q and k.
    add(ForwardKernel::kRope, layers, Rows(rows, c.QueryDim() + c.KvDim()), 3 * R * (qd + kvd), 0,
        2 * R * (qd + kvd) * a, 0);
    add(ForwardKernel::kKvWrite, layers, Rows(rows, 2 * c.KvDim()), 0, 0, 2 * R * kvd * a, 2 * R * kvd * kvb);
  }
  // Attention: q·k and p·v, 2·head_dim FLOPs each, per (query head, query, key) pair; softmax left out
  // (a few FLOPs per score against 4·head_dim). Each KV head's cache is read once per sequence: the query
  // heads of a group share it. Sliding-window layers (Gemma 3) are window_attention, with their own span.
  auto attention = [&](int instances, const AttentionSpan& span) {
    if (instances == 0) return;
    add(&span == &local ? ForwardKernel::kWindowAttention : ForwardKernel::kAttention, instances,
        AttentionShape(c, rows, span, phase), 4.0 * c.head_dim * c.num_heads * span.pairs, 0, 2 * R * qd * a,
        2 * span.positions * kvd * kvb);
  };
  if (!c.IsMla()) {
    int local_layers = 0;
    for (int l = 0; l < layers; ++l) local_layers += c.IsLocalLayer(l) ? 1 : 0;
    attention(layers - local_layers, global);
    attention(local_layers, local);
  }
  projection(ForwardKernel::kOProj, c.IsMla() ? Mla(c).v : qd, d, w.o, 0, !c.sandwich_norm);
  auto post_norm = [&](ForwardKernel k) {  // x += RMSNorm(the block's output): the norm and the residual add
    add(k, layers, Rows(rows, c.hidden_size), 5 * R * d, w.post_norm / (2 * L), 3 * R * d * a, 0);
  };
  if (c.sandwich_norm) post_norm(ForwardKernel::kPostAttnNorm);
  norm(ForwardKernel::kMlpNorm, layers, R, w.mlp_norm / L);
  // The dense layers' MLP (every layer of a dense model), then the MoE layers' experts.
  const int dense_layers = DenseLayers(c), moe_layers = layers - dense_layers;
  const double experts = moe_layers * (c.num_experts + c.num_shared_experts);
  projection(ForwardKernel::kGateProj, d, f, w.gate - experts * w.expert_gate, 0, false, dense_layers);
  projection(ForwardKernel::kUpProj, d, f, w.up - experts * w.expert_up, 0, false, dense_layers);
  // silu(g)·u = g / (1 + exp(−g)) · u: counted as 5 FLOPs an element (exp as one); GELU's tanh form as
  // g / (1 + exp(c·(g + k·g³))) · u, 9.
  const bool gelu = c.mlp_activation == MlpActivation::kGeluTanh;
  if (dense_layers > 0) {
    add(gelu ? ForwardKernel::kGeGlu : ForwardKernel::kSwiGlu, dense_layers, Rows(rows, c.intermediate_size),
        (gelu ? 9 : 5) * R * f, 0, 3 * R * f * a, 0);
  }
  projection(ForwardKernel::kDownProj, f, d, w.down - experts * w.expert_down, 0, !c.sandwich_norm,
             dense_layers);
  if (moe_layers > 0) MoeExperts(c, w, rows, moe_layers, a, add);
  if (c.sandwich_norm) post_norm(ForwardKernel::kPostMlpNorm);
  norm(ForwardKernel::kFinalNorm, 1, logit_rows, w.final_norm);
  add(ForwardKernel::kLmHead, 1, Shape(logit_rows, c.hidden_size, c.vocab_size), 2.0 * logit_rows * d * V,
      w.lm_head, logit_rows * (d + V) * a, 0);
  return p;
}

}  // namespace

PassCost DecodeStepCost(const ModelConfig& config, const WeightBytes& weights, const CostOptions& options,
                        int batch, int context) {
  if (batch < 1) throw MakeError("cost model: batch must be at least 1, got ", batch);
  if (context < 0) throw MakeError("cost model: context must be at least 0, got ", context);
  const double positions = static_cast<double>(batch) * (context + 1.0);  // each row sees context + 1 keys
  // In a sliding-window layer, at most `window` of them.
  const double windowed = config.sliding_window > 0 ? static_cast<double>(batch) *
                                                          std::min(context + 1.0, 1.0 * config.sliding_window)
                                                    : positions;
  return Pass(config, weights, options, ForwardPhase::kDecode, batch, batch, context, {positions, positions},
              {windowed, windowed}, batch);
}

PassCost PrefillCost(const ModelConfig& config, const WeightBytes& weights, const CostOptions& options,
                     int prompt) {
  if (prompt < 1) throw MakeError("cost model: prompt must be at least 1 token, got ", prompt);
  const double p = prompt;
  // Causal: query i sees keys 0..i, P(P+1)/2 pairs; the P cached positions are read once (a tiled kernel
  // keeps a block of keys on chip for many queries).
  // With a window W < P, query i sees min(i + 1, W) keys: W(W+1)/2 for the first W, then W each.
  const double w = config.sliding_window > 0 ? std::min(p, 1.0 * config.sliding_window) : p;
  const double windowed_pairs = w * (w + 1) / 2 + (p - w) * w;
  return Pass(config, weights, options, ForwardPhase::kPrefill, 1, prompt, 0, {p * (p + 1) / 2, p},
              {windowed_pairs, p}, 1);
}

double Roof::Seconds(double flops, double bytes) const {
  return std::max(bytes / bandwidth, flops / peak_flops);
}

long long ComputeBoundBatch(const ModelConfig& config, const WeightBytes& weights, const CostOptions& options,
                            int context, const Roof& roof) {
  if (config.IsMoe()) {
    // The weights read grow with B (the experts touched) towards all of them, so FLOPs·bandwidth − bytes·peak
    // is convex in B and negative at B = 0: once a step is compute-bound every larger one is. Double, then
    // bisect; never if B = 2^24 is not (the KV and activation reads then outgrow the FLOPs, as for a dense
    // model).
    auto bound = [&](long long b) {
      const PassCost p = DecodeStepCost(config, weights, options, static_cast<int>(b), context);
      return roof.ComputeBound(p.Flops(), p.Bytes());
    };
    constexpr long long kMax = 1LL << 24;
    long long hi = 1;
    while (hi < kMax && !bound(hi)) hi *= 2;
    if (!bound(hi)) return -1;
    long long lo = hi / 2;  // not compute-bound (or 0)
    while (hi - lo > 1) {
      const long long mid = lo + (hi - lo) / 2;
      (bound(mid) ? hi : lo) = mid;
    }
    return hi;
  }
  const PassCost one = DecodeStepCost(config, weights, options, 1, context);
  const PassCost two = DecodeStepCost(config, weights, options, 2, context);
  const double per_seq_bytes = two.Bytes() - one.Bytes();
  const double fixed_bytes = one.Bytes() - per_seq_bytes;  // the weights, read once per step
  const double per_seq_flops = two.Flops() - one.Flops();
  // B·f / peak ≥ (W + B·b) / bandwidth  ⇔  B · (f − b·ridge) ≥ W·ridge.
  const double margin = per_seq_flops - per_seq_bytes * roof.Ridge();
  if (margin <= 0) return -1;
  return static_cast<long long>(std::ceil(fixed_bytes * roof.Ridge() / margin));
}

}  // namespace plumb::roofline
