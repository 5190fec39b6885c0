// The kernels of one forward pass, each reported as it finishes (src/model/forward_pass.h).
#include "forward_pass.h"

#include <algorithm>
#include <cmath>

#include "plumb/core/extent.h"

namespace plumb::detail {
namespace {

// x[r][i] += bias[i] for each of `rows` rows; no-op for a model without biases.
void AddBias(float* x, int rows, const std::vector<float>& bias) {
  if (bias.empty()) return;
  const std::size_t n = bias.size();
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
    for (std::size_t i = 0; i < n; ++i) x[r * n + i] += bias[i];
  }
}

void AddInPlace(float* x, const float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) x[i] += y[i];
}

template <class T>
void GrowTo(std::vector<T>& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace

void Activations::Grow(const ModelConfig& c, int new_rows, int logit_rows, std::size_t chunks) {
  if (new_rows > rows) {
    const auto grow = [new_rows](std::vector<float>& buffer, int width) {
      buffer.resize(Extent(new_rows, width));
    };
    grow(x, c.hidden_size);
    grow(x_norm, c.hidden_size);
    grow(q, c.QueryDim());
    grow(k, c.KvDim());
    grow(v, c.KvDim());
    grow(attention, c.QueryDim());
    grow(projected, c.hidden_size);
    grow(gate, c.intermediate_size);
    grow(up, c.intermediate_size);
    if (c.IsMoe()) {
      const int top_k = c.experts_per_token, entries = new_rows * top_k;
      grow(router_logits, c.num_experts);
      routed_ids.resize(Extent(new_rows, top_k));
      grow(routed_weights, top_k);
      expert_begin.resize(static_cast<std::size_t>(c.num_experts) + 1);
      entry_row.resize(static_cast<std::size_t>(entries));
      entry_weight.resize(static_cast<std::size_t>(entries));
      expert_in.resize(Extent(entries, c.hidden_size));
      expert_gate.resize(Extent(entries, c.moe_intermediate_size));
      expert_up.resize(Extent(entries, c.moe_intermediate_size));
      expert_out.resize(Extent(entries, c.hidden_size));
    }
    rows = new_rows;
  }
  GrowTo(head_input, Extent(logit_rows, c.hidden_size));
  GrowTo(logits, Extent(logit_rows, c.vocab_size));
  GrowTo(items, chunks);
}

ForwardPass::ForwardPass(const ModelConfig& config, std::span<const SequenceChunk> chunks,
                         Projection projection, Activations& a, ForwardObserver* observer, ForwardPhase phase)
    : c_(config), chunks_(chunks), projection_(projection), a_(a), observer_(observer) {
  for (const SequenceChunk& chunk : chunks_) {
    const int n = static_cast<int>(chunk.tokens.size());
    rows_ += n;
    logit_rows_ += chunk.all_logits ? n : 1;
    decodes_ += n == 1 ? 1 : 0;
  }
  if (!observer_) return;
  observer_->OnPassBegin(phase, rows_);
  last_ = Clock::now();
}

ForwardPass::~ForwardPass() {
  if (observer_) observer_->OnPassEnd();
}

void ForwardPass::Done(ForwardKernel kernel, int layer, int rows) {
  if (!observer_) return;
  const Clock::time_point now = Clock::now();
  observer_->OnKernel(
      {kernel, layer, rows < 0 ? rows_ : rows, std::chrono::duration<double>(now - last_).count()});
  last_ = Clock::now();
}

void ForwardPass::Observe(ActivationPoint point, int layer) {
  if (!observer_) return;
  observer_->OnActivation(point, layer, a_.x.data(), rows_, c_.hidden_size);
  last_ = Clock::now();  // the observer's own time is left out of the next kernel's
}

void ForwardPass::Multiply(const WeightMatrix& W, const float* in, int rows, float* out) const {
  switch (projection_) {
    case Projection::kGemvBatch:
      kernels::GemvBatch(W, in, rows, out);
      return;
    case Projection::kGemvOrGemm:
      if (rows == 1) return kernels::Gemv(W, in, out);
      // A step of decodes only (a token per sequence; rows == chunks): in the fast family, the int8 kernels
      // each decode would run alone, where they beat Gemm's decoded tiles (kernels::Int8BatchPays). A
      // prompt's chunk keeps Gemm's FP32 activations, as Prefill does.
      if (rows == static_cast<int>(chunks_.size()) && kernels::Int8BatchPays(W, rows)) {
        return kernels::GemvBatch(W, in, rows, out);
      }
      if (rows == rows_ && decodes_ > 0 && decodes_ < static_cast<int>(chunks_.size()) &&
          kernels::Int8BatchPays(W, decodes_)) {
        return MultiplyMixed(W, in, out);
      }
      break;
    case Projection::kGemm:
      break;
  }
  kernels::Gemm(in, rows, W, out);
}

void ForwardPass::MultiplyMixed(const WeightMatrix& W, const float* in, float* out) const {
  const std::size_t cols = static_cast<std::size_t>(W.cols), n = static_cast<std::size_t>(W.rows);
  decode_in_.resize(static_cast<std::size_t>(decodes_) * cols);
  decode_out_.resize(static_cast<std::size_t>(decodes_) * n);
  std::size_t row = 0, decode = 0;
  for (const SequenceChunk& chunk : chunks_) {
    const std::size_t count = chunk.tokens.size();
    if (count == 1) {
      std::copy_n(in + row * cols, cols, decode_in_.begin() + static_cast<std::ptrdiff_t>(decode++ * cols));
    } else {
      kernels::Gemm(in + row * cols, static_cast<int>(count), W, out + row * n);
    }
    row += count;
  }
  kernels::GemvBatch(W, decode_in_.data(), decodes_, decode_out_.data());
  row = 0;
  decode = 0;
  for (const SequenceChunk& chunk : chunks_) {
    if (chunk.tokens.size() == 1) {
      std::copy_n(decode_out_.begin() + static_cast<std::ptrdiff_t>(decode++ * n), n, out + row * n);
    }
    row += chunk.tokens.size();
  }
}

void ForwardPass::Embed(const WeightMatrix& table) {
  std::size_t row = 0;
  for (const SequenceChunk& chunk : chunks_) {
    for (int token : chunk.tokens) kernels::DequantizeRowOf(table, token, &a_.x[row++ * c_.hidden_size]);
  }
  if (c_.scale_embedding) {
    // √d in float, as llama.cpp scales (Hugging Face rounds it to the checkpoint's dtype first).
    const float scale = std::sqrt(static_cast<float>(c_.hidden_size));
    for (std::size_t i = 0; i < Extent(rows_, c_.hidden_size); ++i) a_.x[i] *= scale;
  }
  Done(ForwardKernel::kEmbedding, -1);
}

void ForwardPass::RmsNorm(ForwardKernel kernel, int layer, const std::vector<float>& in,
                          const std::vector<float>& weight, std::vector<float>& out) {
  kernels::RmsNorm(in.data(), weight.data(), out.data(), rows_, c_.hidden_size, c_.rms_norm_eps);
  Done(kernel, layer);
}

bool ForwardPass::QuantizeAlone(int layer, const WeightMatrix& W, const float* in) {
  if (!observer_ || rows_ != 1 || !kernels::UsesInt8RowDots(W)) return false;
  kernels::QuantizeActivations(in, W.cols, xq_);
  Done(ForwardKernel::kQuantize, layer);
  return true;
}

void ForwardPass::MultiplyRows(const WeightMatrix& W, const float* in, float* out, bool quantized) {
  if (!quantized) return Multiply(W, in, rows_, out);
  const kernels::GemvOutput one{&W, out};
  kernels::GemvShared({&one, 1}, in, xq_);  // what Multiply's one-row Gemv computes, from xq_
}

void ForwardPass::Project(ForwardKernel kernel, int layer, const WeightMatrix& W,
                          const std::vector<float>& bias, const std::vector<float>& in,
                          std::vector<float>& out, bool quantized) {
  MultiplyRows(W, in.data(), out.data(), quantized || QuantizeAlone(layer, W, in.data()));
  AddBias(out.data(), rows_, bias);
  Done(kernel, layer);
}

void ForwardPass::Project(int layer, const std::vector<float>& in,
                          std::initializer_list<ProjectionOf> projections) {
  constexpr std::size_t kMaxShared = 4;
  if (projection_ != Projection::kGemvOrGemm || rows_ != 1 || observer_ || projections.size() > kMaxShared) {
    bool quantized = false;  // `in` once for all of them, as GemvShared quantizes it
    for (const ProjectionOf& p : projections) {
      quantized = quantized || QuantizeAlone(layer, *p.W, in.data());
      Project(p.kernel, layer, *p.W, *p.bias, in, *p.out, quantized);
    }
    return;
  }
  kernels::GemvOutput outputs[kMaxShared];
  std::size_t n = 0;
  for (const ProjectionOf& p : projections) outputs[n++] = {p.W, p.out->data()};
  kernels::GemvShared({outputs, n}, in.data());
  for (const ProjectionOf& p : projections) AddBias(p.out->data(), rows_, *p.bias);
}

void ForwardPass::AddProjection(ForwardKernel kernel, int layer, const WeightMatrix& W,
                                const std::vector<float>& in) {
  MultiplyRows(W, in.data(), a_.projected.data(), QuantizeAlone(layer, W, in.data()));
  AddInPlace(a_.x.data(), a_.projected.data(), Extent(rows_, c_.hidden_size));
  Done(kernel, layer);
}

void ForwardPass::QkNorm(int layer, const std::vector<float>& q_norm, const std::vector<float>& k_norm) {
  if (c_.qk_norm_whole) {  // OLMo 2: each row's whole q (k) is one vector
    kernels::RmsNorm(a_.q.data(), q_norm.data(), a_.q.data(), rows_, c_.QueryDim(), c_.rms_norm_eps);
    kernels::RmsNorm(a_.k.data(), k_norm.data(), a_.k.data(), rows_, c_.KvDim(), c_.rms_norm_eps);
    return Done(ForwardKernel::kQkNorm, layer);
  }
  kernels::RmsNorm(a_.q.data(), q_norm.data(), a_.q.data(), rows_ * c_.num_heads, c_.head_dim,
                   c_.rms_norm_eps);
  kernels::RmsNorm(a_.k.data(), k_norm.data(), a_.k.data(), rows_ * c_.num_kv_heads, c_.head_dim,
                   c_.rms_norm_eps);
  Done(ForwardKernel::kQkNorm, layer);
}

void ForwardPass::AddNormedProjection(ForwardKernel kernel, ForwardKernel norm_kernel, int layer,
                                      const WeightMatrix& W, const std::vector<float>& in,
                                      const std::vector<float>& norm) {
  MultiplyRows(W, in.data(), a_.projected.data(), QuantizeAlone(layer, W, in.data()));
  Done(kernel, layer);
  kernels::RmsNorm(a_.projected.data(), norm.data(), a_.projected.data(), rows_, c_.hidden_size,
                   c_.rms_norm_eps);
  AddInPlace(a_.x.data(), a_.projected.data(), Extent(rows_, c_.hidden_size));
  Done(norm_kernel, layer);
}

void ForwardPass::Rope(int layer) {
  const std::size_t q_dim = c_.QueryDim(), kv_dim = c_.KvDim();
  const float theta = c_.RopeTheta(layer);
  std::size_t row = 0;
  for (const SequenceChunk& chunk : chunks_) {
    const int n = static_cast<int>(chunk.tokens.size());
    const int first_pos = chunk.kv->length();
    const float* factors = c_.RopeFreqFactors(layer, first_pos + n);  // LongRoPE: by the sequence's length
    if (c_.RotaryDim() == c_.head_dim) {
      kernels::RopeRotateHalf(&a_.q[row * q_dim], n, c_.num_heads, c_.head_dim, first_pos, theta, factors);
      kernels::RopeRotateHalf(&a_.k[row * kv_dim], n, c_.num_kv_heads, c_.head_dim, first_pos, theta,
                              factors);
    } else {
      RotatePart(&a_.q[row * q_dim], n, c_.num_heads, first_pos, theta, factors);
      RotatePart(&a_.k[row * kv_dim], n, c_.num_kv_heads, first_pos, theta, factors);
    }
    row += n;
  }
  if (c_.rope_attention_factor != 1.0f) {
    // LongRoPE multiplies cos and sin by attention_factor: every rotated element of q and k, once.
    const int dim = c_.RotaryDim();
    for (auto [x, heads] : {std::pair{a_.q.data(), c_.num_heads}, std::pair{a_.k.data(), c_.num_kv_heads}}) {
      for (std::size_t v = 0; v < Extent(rows_, heads); ++v) {
        for (int j = 0; j < dim; ++j) x[v * c_.head_dim + j] *= c_.rope_attention_factor;
      }
    }
  }
  Done(ForwardKernel::kRope, layer);
}

// Partial rotary (Phi-3): RoPE, rotate-half within the first RotaryDim() dims of each head, at frequencies of
// that width (transformers: inv_freq_i = theta^(−2i / rotary_dim)); the rest of the head passes unturned.
// The parts are gathered into rope_part_, rotated as heads of RotaryDim(), and put back.
void ForwardPass::RotatePart(float* x, int rows, int heads, int first_pos, float theta,
                             const float* factors) {
  const std::size_t dim = c_.RotaryDim(), hd = c_.head_dim, vectors = Extent(rows, heads);
  rope_part_.resize(vectors * dim);
  for (std::size_t v = 0; v < vectors; ++v) std::copy_n(x + v * hd, dim, &rope_part_[v * dim]);
  kernels::RopeRotateHalf(rope_part_.data(), rows, heads, static_cast<int>(dim), first_pos, theta, factors);
  for (std::size_t v = 0; v < vectors; ++v) std::copy_n(&rope_part_[v * dim], dim, x + v * hd);
}

void ForwardPass::WriteKv(int layer) {
  const std::size_t kv_dim = c_.KvDim();
  if (observer_) {
    observer_->OnActivation(ActivationPoint::kNewKeys, layer, a_.k.data(), rows_, static_cast<int>(kv_dim));
    observer_->OnActivation(ActivationPoint::kNewValues, layer, a_.v.data(), rows_, static_cast<int>(kv_dim));
    last_ = Clock::now();  // the observer's own time is left out of the cache write's
  }
  std::size_t row = 0;
  for (const SequenceChunk& chunk : chunks_) {
    const int first_pos = chunk.kv->length();
    for (int r = 0; r < static_cast<int>(chunk.tokens.size()); ++r, ++row) {
      chunk.kv->Write(layer, first_pos + r, &a_.k[row * kv_dim], &a_.v[row * kv_dim]);
    }
  }
  Done(ForwardKernel::kKvWrite, layer);
}

void ForwardPass::Attend(int layer) {
  const std::size_t q_dim = c_.QueryDim();
  std::size_t row = 0;
  for (std::size_t i = 0; i < chunks_.size(); ++i) {
    KvSequence& kv = *chunks_[i].kv;
    const int n = static_cast<int>(chunks_[i].tokens.size());
    a_.items[i] = {&a_.q[row * q_dim],
                   &a_.attention[row * q_dim],
                   n,
                   kv.length(),
                   kv.Layer(layer),
                   c_.AttentionWindow(layer),
                   {c_.attention_scale, c_.attn_logit_softcap}};
    row += n;
  }
  kernels::CausalAttention(std::span(a_.items.data(), chunks_.size()), c_.num_heads);
  Done(c_.IsLocalLayer(layer) ? ForwardKernel::kWindowAttention : ForwardKernel::kAttention, layer);
}

void ForwardPass::GatedActivation(int layer) {
  const std::int64_t n = static_cast<std::int64_t>(rows_) * c_.intermediate_size;
  switch (c_.mlp_activation) {
    case MlpActivation::kSilu:
      kernels::SwiGlu(a_.gate.data(), a_.up.data(), a_.gate.data(), n);
      return Done(ForwardKernel::kSwiGlu, layer);
    case MlpActivation::kGeluTanh:
      kernels::GeluTanhGlu(a_.gate.data(), a_.up.data(), a_.gate.data(), n);
      return Done(ForwardKernel::kGeGlu, layer);
  }
}

void ForwardPass::Route(const WeightMatrix& router) {
  const int experts = c_.num_experts, k = c_.experts_per_token;
  const std::size_t d = c_.hidden_size;
  const MoeRouterParams params = c_.MoeRouter();
  Multiply(router, a_.x_norm.data(), rows_, a_.router_logits.data());
  // A counting sort of the (row, expert) entries by expert: expert_begin[e + 1] counts e's entries, then
  // holds where they end.
  std::vector<int>& begin = a_.expert_begin;
  std::fill(begin.begin(), begin.end(), 0);
  for (int r = 0; r < rows_; ++r) {
    std::int32_t* ids = &a_.routed_ids[Extent(r, k)];
    RouteToken(params, &a_.router_logits[Extent(r, experts)], nullptr, ids, &a_.routed_weights[Extent(r, k)]);
    for (int j = 0; j < k; ++j) ++begin[static_cast<std::size_t>(ids[j]) + 1];
  }
  for (int e = 0; e < experts; ++e) begin[e + 1] += begin[e];
  // Fill each expert's entries in row order; begin[e] runs ahead as they fill, and is put back after.
  for (int r = 0; r < rows_; ++r) {
    for (int j = 0; j < k; ++j) {
      const std::size_t slot = Extent(r, k) + static_cast<std::size_t>(j);
      const int entry = begin[static_cast<std::size_t>(a_.routed_ids[slot])]++;
      a_.entry_row[entry] = r;
      a_.entry_weight[entry] = a_.routed_weights[slot];
      std::copy_n(&a_.x_norm[Extent(r, d)], d, &a_.expert_in[Extent(entry, d)]);
    }
  }
  for (int e = experts; e > 0; --e) begin[e] = begin[e - 1];
  begin[0] = 0;
}

void ForwardPass::ProjectExperts(ForwardKernel kernel, int layer, const std::vector<ExpertWeights>& experts,
                                 WeightMatrix ExpertWeights::*matrix, const std::vector<float>& in,
                                 std::vector<float>& out) {
  for (std::size_t e = 0; e < experts.size(); ++e) {
    const int first = a_.expert_begin[e], count = a_.expert_begin[e + 1] - first;
    if (count == 0) continue;  // no row chose it: its weights are not read
    const WeightMatrix& W = experts[e].*matrix;
    Multiply(W, &in[Extent(first, W.cols)], count, &out[Extent(first, W.rows)]);
  }
  Done(kernel, layer);
}

void ForwardPass::ExpertActivation(int layer) {
  const std::int64_t n = static_cast<std::int64_t>(rows_) * c_.experts_per_token * c_.moe_intermediate_size;
  kernels::SwiGlu(a_.expert_gate.data(), a_.expert_up.data(), a_.expert_gate.data(), n);
  Done(ForwardKernel::kSwiGlu, layer);
}

void ForwardPass::AddExperts(int layer, const std::vector<ExpertWeights>& experts) {
  const std::size_t d = c_.hidden_size;
  for (std::size_t e = 0; e < experts.size(); ++e) {
    const int first = a_.expert_begin[e], count = a_.expert_begin[e + 1] - first;
    if (count == 0) continue;
    Multiply(experts[e].w_down, &a_.expert_gate[Extent(first, c_.moe_intermediate_size)], count,
             &a_.expert_out[Extent(first, d)]);
  }
  // Σ from zero in entry order, so each row's experts add in ascending order (as transformers' index_add_
  // does), then into the residual stream.
  float* sum = a_.projected.data();
  std::fill_n(sum, Extent(rows_, d), 0.0f);
  const int entries = rows_ * c_.experts_per_token;
  for (int entry = 0; entry < entries; ++entry) {
    float* row = sum + Extent(a_.entry_row[entry], d);
    const float* y = &a_.expert_out[Extent(entry, d)];
    const float weight = a_.entry_weight[entry];
    for (std::size_t i = 0; i < d; ++i) row[i] += weight * y[i];
  }
  AddInPlace(a_.x.data(), sum, Extent(rows_, d));
  Done(ForwardKernel::kDownProj, layer);
}

std::span<const float> ForwardPass::Logits(const std::vector<float>& final_norm,
                                           const WeightMatrix& lm_head) {
  const std::size_t d = c_.hidden_size;
  std::size_t row = 0, out_row = 0;
  for (const SequenceChunk& chunk : chunks_) {
    const int n = static_cast<int>(chunk.tokens.size());
    const int first = chunk.all_logits ? 0 : n - 1;
    kernels::RmsNorm(&a_.x[(row + first) * d], final_norm.data(), &a_.head_input[out_row * d], n - first,
                     c_.hidden_size, c_.rms_norm_eps);
    row += n;
    out_row += n - first;
  }
  Done(ForwardKernel::kFinalNorm, -1, logit_rows_);
  if (observer_) {
    observer_->OnActivation(ActivationPoint::kFinalNorm, -1, a_.head_input.data(), logit_rows_,
                            c_.hidden_size);
    last_ = Clock::now();
  }
  Multiply(lm_head, a_.head_input.data(), logit_rows_, a_.logits.data());
  if (c_.final_logit_softcap > 0.0f) {
    kernels::SoftCap(a_.logits.data(), Extent(logit_rows_, c_.vocab_size), c_.final_logit_softcap);
  }
  Done(ForwardKernel::kLmHead, -1, logit_rows_);
  return {a_.logits.data(), Extent(logit_rows_, c_.vocab_size)};
}

}  // namespace plumb::detail
