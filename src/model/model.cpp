// The forward pass of a Llama-family decoder, written once and read like the math:
//
//   x = embed[token]
//   for each layer:   x += o_proj(attention(rope(q_proj(rmsnorm(x))), rope(k_proj(·)), v_proj(·)))
//                     x += down_proj(silu(gate_proj(rmsnorm(x))) ⊙ up_proj(rmsnorm(x)))
//   logits = lm_head(rmsnorm(x))
//
// A mixture-of-experts model (Qwen3-MoE, Mixtral) replaces the MLP of its MoE layers by k of its experts,
// weighted by its router (MoeBlock).
//
// The other families are the same skeleton with a few more steps, each an `if` below on a ModelConfig switch
// (docs/models.md has the table): Gemma's embedding times √d, post-block norms, GELU (tanh form), query scale
// and soft-caps; an RMSNorm of q and k (per head: Qwen3, Gemma 3; over the whole projection: OLMo 2); OLMo
// 2's missing pre-norms; sliding windows and local RoPE bases on some layers (Mistral, Gemma); RoPE on part
// of each head (Phi-3) or on no part of some layers (SmolLM3).
//
// Prefill, Decode and Step run this one layer over different rows. What tells the phases apart is where the
// cost is (include/plumb/model/model.h): a projection of many rows is a GEMM that reuses every weight it
// reads, a projection of one row a GEMV that reads every weight for one multiply-add. Each kernel is timed
// and reported inside ForwardPass (src/model/forward_pass.h), so nothing here but the math.
#include "plumb/model/model.h"

#include <optional>

#include "forward_pass.h"
#include "plumb/core/error.h"
#include "plumb/core/extent.h"
#include "plumb/kernels/kernels.h"
#include "plumb/kernels/weight_format.h"

namespace plumb {

using detail::Activations;
using detail::ForwardPass;
using detail::Projection;

namespace {

// A block's input: rmsnorm(x) ⊙ norm, or x itself where the family normalizes only the block's output
// (OLMo 2, whose norm weights before the blocks are absent).
const std::vector<float>& BlockInput(ForwardPass& pass, Activations& a, ForwardKernel kernel, int layer,
                                     const std::vector<float>& norm) {
  if (norm.empty()) return a.x;
  pass.RmsNorm(kernel, layer, a.x, norm, a.x_norm);
  return a.x_norm;
}

// x += o_proj(attention(rope(q), rope(k), v)), with q, k, v the projections of rmsnorm(x).
// Gemma 3, Qwen3 and OLMo 2 also normalize q and k (each head, or OLMo 2's whole projection) before RoPE;
// Gemma and OLMo 2 normalize o_proj's output before the residual add: x += rmsnorm(o_proj(...)).
void AttentionBlock(ForwardPass& pass, Activations& a, const LayerWeights& w, int layer) {
  const std::vector<float>& h = BlockInput(pass, a, ForwardKernel::kAttnNorm, layer, w.attn_norm);
  pass.Project(layer, h,
               {{ForwardKernel::kQProj, &w.wq, &w.bq, &a.q},
                {ForwardKernel::kKProj, &w.wk, &w.bk, &a.k},
                {ForwardKernel::kVProj, &w.wv, &w.bv, &a.v}});
  if (!w.q_norm.empty()) pass.QkNorm(layer, w.q_norm, w.k_norm);
  // q and k at each sequence's own positions (the layer's RoPE base); SmolLM3's NoPE layers skip it.
  if (pass.config().UsesRope(layer)) pass.Rope(layer);
  pass.WriteKv(layer);  // k and v join each sequence's cache
  pass.Attend(layer);   // attention = softmax(q·Kᵀ·scale [soft-capped])·V over the cache (or the layer's
                        // sliding window of it), causal, grouped-query
  if (w.post_attn_norm.empty()) {
    pass.AddProjection(ForwardKernel::kOProj, layer, w.wo, a.attention);
  } else {
    pass.AddNormedProjection(ForwardKernel::kOProj, ForwardKernel::kPostAttnNorm, layer, w.wo, a.attention,
                             w.post_attn_norm);
  }
}

// x += down_proj(act(gate_proj(rmsnorm(x))) ⊙ up_proj(rmsnorm(x))), act = silu (Llama, Qwen2) or gelu_tanh
// (Gemma, which also normalizes down_proj's output before the residual add, as OLMo 2 does).
void MlpBlock(ForwardPass& pass, Activations& a, const LayerWeights& w, int layer) {
  static const std::vector<float> kNoBias;
  const std::vector<float>& h = BlockInput(pass, a, ForwardKernel::kMlpNorm, layer, w.mlp_norm);
  pass.Project(layer, h,
               {{ForwardKernel::kGateProj, &w.w_gate, &kNoBias, &a.gate},
                {ForwardKernel::kUpProj, &w.w_up, &kNoBias, &a.up}});
  pass.GatedActivation(layer);
  if (w.post_mlp_norm.empty()) {
    pass.AddProjection(ForwardKernel::kDownProj, layer, w.w_down, a.gate);
  } else {
    pass.AddNormedProjection(ForwardKernel::kDownProj, ForwardKernel::kPostMlpNorm, layer, w.w_down, a.gate,
                             w.post_mlp_norm);
  }
}

// A mixture-of-experts layer's MLP: x += Σ_j p_j · down_j(silu(gate_j(h)) ⊙ up_j(h)), h = rmsnorm(x), over
// the k experts e_j and weights p_j the router picks from h · routerᵀ (model/moe_router.h; Qwen3-MoE).
// Each expert runs once, over the rows that chose it.
void MoeBlock(ForwardPass& pass, Activations& a, const LayerWeights& w, int layer) {
  pass.RmsNorm(ForwardKernel::kMlpNorm, layer, a.x, w.mlp_norm, a.x_norm);
  pass.Route(w.router);  // each row's experts and weights; the rows of h grouped by expert
  pass.ProjectExperts(ForwardKernel::kGateProj, layer, w.experts, &ExpertWeights::w_gate, a.expert_in,
                      a.expert_gate);
  pass.ProjectExperts(ForwardKernel::kUpProj, layer, w.experts, &ExpertWeights::w_up, a.expert_in,
                      a.expert_up);
  pass.ExpertActivation(layer);
  pass.AddExperts(layer, w.experts);  // down_j, weighted by p_j, summed into x
}

// Records a PrefillTrace from the activations of a pass, and passes everything on to `next` (the model's
// own observer, or none).
class TraceRecorder final : public ForwardObserver {
 public:
  TraceRecorder(PrefillTrace& trace, ForwardObserver* next) : trace_(trace), next_(next) {}
  void OnPassBegin(ForwardPhase phase, int rows) override {
    if (next_) next_->OnPassBegin(phase, rows);
  }
  void OnKernel(const KernelTiming& timing) override {
    if (next_) next_->OnKernel(timing);
  }
  void OnActivation(ActivationPoint point, int layer, const float* data, int rows, int cols) override {
    const std::size_t n = Extent(rows, cols);
    if (point == ActivationPoint::kLayerInput && layer == 0) trace_.embedding.assign(data, data + n);
    if (point == ActivationPoint::kAfterMlp) trace_.layer_outputs.emplace_back(data, data + n);
    if (point == ActivationPoint::kFinalNorm) trace_.final_norm.assign(data, data + n);
    if (next_) next_->OnActivation(point, layer, data, rows, cols);
  }
  void OnPassEnd() override {
    if (next_) next_->OnPassEnd();
  }

 private:
  PrefillTrace& trace_;
  ForwardObserver* next_;
};

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// The layers, once for every phase.
// ---------------------------------------------------------------------------------------------------------
std::span<const float> Model::Forward(std::span<const SequenceChunk> chunks, ForwardPhase phase,
                                      Projection projection, Activations& a, ForwardObserver* observer) {
  int rows = 0, logit_rows = 0;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const SequenceChunk& chunk = chunks[i];
    if (!chunk.kv) throw MakeError("step: chunk ", i, " has no KV sequence");
    if (chunk.tokens.empty()) throw MakeError("step: chunk ", i, " has no tokens");
    for (std::size_t j = 0; j < i; ++j) {
      if (chunks[j].kv == chunk.kv) throw MakeError("step: chunks ", j, " and ", i, " are the same sequence");
    }
    CheckTokens(chunk.tokens, *chunk.kv);
    rows += static_cast<int>(chunk.tokens.size());
    logit_rows += chunk.all_logits ? static_cast<int>(chunk.tokens.size()) : 1;
  }
  // Reserve everything before writing anything: a pool that runs dry throws here, with no commit made.
  for (const SequenceChunk& chunk : chunks) chunk.kv->Reserve(static_cast<int>(chunk.tokens.size()));
  a.Grow(config_, rows, logit_rows, chunks.size());

  ForwardPass pass(config_, chunks, projection, a, observer, phase);
  pass.Embed(weights_.token_embedding);
  for (int l = 0; l < config_.num_layers; ++l) {
    const LayerWeights& w = weights_.layers[l];
    pass.Observe(ActivationPoint::kLayerInput, l);
    AttentionBlock(pass, a, w, l);
    pass.Observe(ActivationPoint::kAfterAttention, l);
    if (w.IsMoe()) {
      MoeBlock(pass, a, w, l);
    } else {
      MlpBlock(pass, a, w, l);
    }
    pass.Observe(ActivationPoint::kAfterMlp, l);
  }
  for (const SequenceChunk& chunk : chunks) chunk.kv->Commit(chunk.tokens);
  return pass.Logits(weights_.final_norm, weights_.LmHead());
}

// Prefill: P tokens of one sequence, every projection a GEMM [P, in] × [in, out]. A weight fetched from
// memory serves P tokens, so for long prompts the pass is limited by arithmetic, not by memory traffic.
std::vector<float> Model::Prefill(std::span<const int> tokens, KvSequence& kv, PrefillLogits which,
                                  PrefillTrace* trace) {
  if (tokens.empty()) throw MakeError("prefill needs at least one token");
  const SequenceChunk chunk{&kv, tokens, which == PrefillLogits::kAllRows};
  std::optional<TraceRecorder> recorder;
  if (trace) recorder.emplace(*trace, observer_);
  Activations a;  // sized for this prompt, and let go after it
  const std::span<const float> logits =
      Forward({&chunk, 1}, ForwardPhase::kPrefill, Projection::kGemm, a, recorder ? &*recorder : observer_);
  return {logits.begin(), logits.end()};
}

// Decode: one token, every projection a GEMV [out, in] · [in]. Each weight is read once for one
// multiply-add, so the step is limited by how fast memory delivers the weights (and the KV cache).
std::span<const float> Model::Decode(int token, KvSequence& kv) {
  const int one_token[] = {token};
  const SequenceChunk chunk{&kv, one_token, false};
  return Forward({&chunk, 1}, ForwardPhase::kDecode, Projection::kGemvOrGemm, *decode_, observer_);
}

// Step: the chunks of several sequences (decodes of one token, prefill chunks of many) in one pass, so every
// projection and the MLP read each weight once for the whole step.
std::span<const float> Model::Step(std::span<const SequenceChunk> chunks, StepOptions options) {
  if (chunks.empty()) throw MakeError("step needs at least one sequence chunk");
  const Projection projection = options.batch_invariant ? Projection::kGemvBatch : Projection::kGemvOrGemm;
  return Forward(chunks, ForwardPhase::kStep, projection, *step_, observer_);
}

// ---------------------------------------------------------------------------------------------------------
Model::Model(ModelConfig config, ModelWeights weights)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      decode_(std::make_unique<Activations>()),
      step_(std::make_unique<Activations>()) {
  decode_->Grow(config_, 1, 1, 1);
  // The LM head's logits pick the token, and rounding its input to int8 costs the fast family most of its
  // accuracy (on SmolLM2 Q4_1: +0.54% perplexity instead of +0.42%, and the greedy answer to "What is the
  // capital of France?" changes; docs/quantization.md). So the head keeps the exact kernels where they are
  // vector code (a Q8_0 head: 3–6% of SmolLM2's decode speed), and runs the fast family where the exact
  // kernels are scalar: a 1B model's tied Q6_K head took 392 of a token's 457 ms exact. --kernels exact
  // runs the whole pass exact.
  weights_.LmHead().exact_only = kernels::ExactRowDotsAreVectorized(weights_.LmHead());
}

Model::~Model() = default;
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

ContiguousKvCache Model::NewKvCache(int max_positions, KvDtype dtype) const {
  if (max_positions <= 0) max_positions = config_.max_position_embeddings;
  return ContiguousKvCache(config_.num_layers, config_.num_kv_heads, max_positions, config_.head_dim, dtype);
}

void CheckTokenIds(std::span<const int> tokens, int vocab_size) {
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab_size) {
      throw MakeError("token id ", tokens[i], " at index ", i, " is outside the vocabulary [0, ", vocab_size,
                      ")");
    }
  }
}

void Model::CheckTokens(std::span<const int> tokens, const KvSequence& kv) const {
  CheckTokenIds(tokens, config_.vocab_size);
  const std::size_t end = static_cast<std::size_t>(kv.length()) + tokens.size();
  if (end > static_cast<std::size_t>(kv.max_positions())) {
    throw MakeError("context overflow: ", kv.length(), " cached + ", tokens.size(), " new tokens exceed the ",
                    kv.max_positions(), "-position KV cache");
  }
  if (kv.n_layers() != config_.num_layers || kv.n_kv_heads() != config_.num_kv_heads ||
      kv.head_dim() != config_.head_dim) {
    throw MakeError("KV cache shape does not match the model");
  }
}

}  // namespace plumb
