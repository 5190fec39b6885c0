// ForwardPass: the kernels of one forward pass, each timed and reported to the model's ForwardObserver
// (model/forward_observer.h) as it finishes, so that the layer in model.cpp reads as the math alone.
//
// A pass runs over the rows of its chunks (model/model.h's SequenceChunk): every chunk's tokens, chunk after
// chunk, [rows][·] in each buffer of Activations. The projections and the MLP treat all rows alike; RoPE, the
// cache writes and attention run per chunk, at that sequence's positions and over its own cache. Prefill is
// one chunk of P tokens, Decode one chunk of one token, Step any number. Internal to src/model.
#pragma once

#include <chrono>
#include <cstddef>
#include <initializer_list>
#include <span>
#include <vector>

#include "plumb/kernels/int8_activations.h"
#include "plumb/kernels/kernels.h"
#include "plumb/model/config.h"
#include "plumb/model/forward_observer.h"
#include "plumb/model/model.h"
#include "plumb/model/weights.h"

namespace plumb::detail {

// How a pass multiplies its rows by a weight matrix. The choice is the phase's and decides the bits:
// Prefill's GEMM, Decode's GEMV, and the batch-invariant GEMV of StepOptions (model/model.h).
enum class Projection {
  kGemm,        // kernels::Gemm for any number of rows (Prefill)
  kGemvOrGemm,  // kernels::Gemv for one row, kernels::Gemm for more (Decode, Step); a step of decodes
                // only takes kernels::GemvBatch where kernels::Int8BatchPays, and one that mixes decodes
                // with prompt chunks runs its decode rows so too (MultiplyMixed)
  kGemvBatch,   // kernels::GemvBatch: each row bitwise its own Gemv (Step with batch_invariant)
};

// The activations of a pass, allocated for the largest pass so far and never shrunk, so that a steady
// decode allocates nothing. d = hidden_size, hd = head_dim, ffn = intermediate_size, V = vocab_size.
struct Activations {
  int rows = 0;                  // capacity in rows
  std::vector<float> x;          // [rows][d]   residual stream
  std::vector<float> x_norm;     // [rows][d]
  std::vector<float> q;          // [rows][n_heads·hd]
  std::vector<float> k;          // [rows][n_kv_heads·hd]
  std::vector<float> v;          // [rows][n_kv_heads·hd]
  std::vector<float> attention;  // [rows][n_heads·hd]
  std::vector<float> projected;  // [rows][d]   o_proj / down_proj output before the residual add
  std::vector<float> gate;       // [rows][ffn] gate, then silu(gate) ⊙ up
  std::vector<float> up;         // [rows][ffn]
  // A mixture-of-experts layer's rows once routed: N = rows · k entries (a row for each expert it chose),
  // grouped by expert (experts ascending, rows ascending within one), as a grouped GEMM takes them.
  std::vector<float> router_logits;           // [rows][experts]
  std::vector<std::int32_t> routed_ids;       // [rows][k]  the router's choice for each row ...
  std::vector<float> routed_weights;          // [rows][k]  ... and its weights
  std::vector<int> expert_begin;              // [experts + 1]  expert e's entries: expert_begin[e] ..
  std::vector<int> entry_row;                 // [N]  the row each entry came from
  std::vector<float> entry_weight;            // [N]  the router's weight of that expert for that row
  std::vector<float> expert_in;               // [N][d]  x_norm of the entry's row
  std::vector<float> expert_gate;             // [N][moe_ffn]  gate, then silu(gate) ⊙ up
  std::vector<float> expert_up;               // [N][moe_ffn]
  std::vector<float> expert_out;              // [N][d]
  std::vector<float> head_input;              // [logit rows][d]  final-normed rows whose logits are returned
  std::vector<float> logits;                  // [logit rows][V]
  std::vector<kernels::AttentionItem> items;  // [chunks]

  void Grow(const ModelConfig& c, int rows, int logit_rows, std::size_t chunks);
};

class ForwardPass {
 public:
  // The rows (and logit rows) of `chunks` must fit `a` (Activations::Grow). Reports OnPassBegin now and
  // OnPassEnd when destroyed.
  ForwardPass(const ModelConfig& config, std::span<const SequenceChunk> chunks, Projection projection,
              Activations& a, ForwardObserver* observer, ForwardPhase phase);
  ~ForwardPass();
  ForwardPass(const ForwardPass&) = delete;
  const ModelConfig& config() const { return c_; }
  ForwardPass& operator=(const ForwardPass&) = delete;

  // x[row] = table[token of row], dequantized (· √d where the model scales its embedding).
  void Embed(const WeightMatrix& table);
  // out[row] = RMSNorm(in[row]) ⊙ weight.
  void RmsNorm(ForwardKernel kernel, int layer, const std::vector<float>& in,
               const std::vector<float>& weight, std::vector<float>& out);
  // out[row] = in[row] · Wᵀ (+ bias, when the model has one). `quantized`: xq_ already holds `in`
  // (QuantizeAlone ran for an earlier projection of the same input).
  void Project(ForwardKernel kernel, int layer, const WeightMatrix& W, const std::vector<float>& bias,
               const std::vector<float>& in, std::vector<float>& out, bool quantized = false);
  // Several projections of the same input (q, k and v; gate and up), each as Project computes it. A decode
  // (one row, Projection::kGemvOrGemm) without an observer runs them as one kernels::GemvShared: one
  // parallel region and one quantization of `in` instead of one per matrix, the same bits. With an
  // observer they run one by one, so each keeps its own timing line (and the quantization, once, its own).
  struct ProjectionOf {
    ForwardKernel kernel;
    const WeightMatrix* W;
    const std::vector<float>* bias;
    std::vector<float>* out;
  };
  void Project(int layer, const std::vector<float>& in, std::initializer_list<ProjectionOf> projections);
  // x[row] += in[row] · Wᵀ: a projection back into the residual stream.
  void AddProjection(ForwardKernel kernel, int layer, const WeightMatrix& W, const std::vector<float>& in);
  // q and k of every row, head by head: RMSNorm(head) ⊙ q_norm (k_norm), over head_dim (Gemma 3).
  void QkNorm(int layer, const std::vector<float>& q_norm, const std::vector<float>& k_norm);
  // x[row] += RMSNorm(in[row] · Wᵀ) ⊙ norm: a projection normalized before it joins the residual stream
  // (Gemma 3's post-attention and post-MLP norms). Reported as `kernel`, then `norm_kernel`.
  void AddNormedProjection(ForwardKernel kernel, ForwardKernel norm_kernel, int layer, const WeightMatrix& W,
                           const std::vector<float>& in, const std::vector<float>& norm);
  // Rotates q and k of each chunk at its positions kv.length() ..., with the layer's RoPE base and
  // frequency divisors (RoPE scaling), the first RotaryDim() dims of each head.
  void Rope(int layer);
  // Writes k and v of each chunk into its cache, at the same positions.
  void WriteKv(int layer);
  // attention[row] = causal GQA attention of q[row] over its chunk's cache, or over the layer's sliding
  // window of it.
  void Attend(int layer);
  // gate = act(gate) ⊙ up: silu (SwiGLU) or gelu_tanh (GeGLU), as the model's config says.
  void GatedActivation(int layer);
  // Mixture of experts, in four steps (model.cpp's MoeBlock). Route: the router's logits x_norm · routerᵀ,
  // each row's experts and weights (model/moe_router.h), and the rows of x_norm gathered into expert_in,
  // grouped by expert. Not reported alone: its time joins the gate projections', as the cost model counts
  // the router with them (roofline/cost_model.h).
  void Route(const WeightMatrix& router);
  // out[entries of e] = expert_in[entries of e] · (experts[e].*matrix)ᵀ for every expert some row chose
  // (`in`: expert_in, or expert_gate for the down projection).
  void ProjectExperts(ForwardKernel kernel, int layer, const std::vector<ExpertWeights>& experts,
                      WeightMatrix ExpertWeights::*matrix, const std::vector<float>& in,
                      std::vector<float>& out);
  // expert_gate = silu(expert_gate) ⊙ expert_up.
  void ExpertActivation(int layer);
  // x[row] += Σ over the row's entries, experts ascending, of weight · expert_gate[entry] · W_downᵀ: the
  // down projections, and the weighted sum of the experts' outputs into the residual stream (kDownProj).
  void AddExperts(int layer, const std::vector<ExpertWeights>& experts);
  // Reports x at `point` of `layer` to the observer.
  void Observe(ActivationPoint point, int layer);
  // The final RMSNorm of the rows whose logits are returned (each chunk's last, or all its rows when it asks
  // for all_logits) into head_input, then their logits: [logit rows][V], in a.logits (soft-capped where
  // the model asks for it).
  std::span<const float> Logits(const std::vector<float>& final_norm, const WeightMatrix& lm_head);

 private:
  void Multiply(const WeightMatrix& W, const float* in, int rows, float* out) const;
  // A step's projection when it mixes decodes (chunks of one token) with prompt chunks: the decode rows
  // gathered into one kernels::GemvBatch where kernels::Int8BatchPays (else kernels::Gemm), each prompt
  // chunk through kernels::Gemm on its own, as Prefill runs it. So a decode's bits, and a greedy token, do
  // not depend on whether another sequence's prompt shared its step.
  void MultiplyMixed(const WeightMatrix& W, const float* in, float* out) const;
  // The fast family's quantization of `in` for W into xq_, timed as a kernel of its own (kQuantize), when an
  // observer times a one-row pass and W runs int8 kernels; true when it ran. Otherwise the kernels quantize
  // inside the projection's time: without an observer, and for several rows (kernels::Gemm's small-row
  // path).
  bool QuantizeAlone(int layer, const WeightMatrix& W, const float* in);
  // out = in · Wᵀ over the pass's rows: Multiply, or from xq_ when `quantized` (QuantizeAlone ran): the
  // same bits.
  void MultiplyRows(const WeightMatrix& W, const float* in, float* out, bool quantized);
  void RotatePart(float* x, int rows, int heads, int first_pos, float theta, const float* factors);
  // `kernel` of `layer` (-1 outside the layers) has just finished over `rows` rows (-1: the pass's).
  void Done(ForwardKernel kernel, int layer, int rows = -1);

  using Clock = std::chrono::steady_clock;
  const ModelConfig& c_;
  std::span<const SequenceChunk> chunks_;
  Projection projection_;
  Activations& a_;
  ForwardObserver* observer_;
  int rows_ = 0;                                       // every chunk's tokens
  int logit_rows_ = 0;                                 // rows whose logits are returned
  int decodes_ = 0;                                    // chunks of one token
  kernels::Int8Activations xq_;                        // QuantizeAlone's
  mutable std::vector<float> decode_in_, decode_out_;  // MultiplyMixed's gathered decode rows
  std::vector<float> rope_part_;                       // RotatePart's gathered dims
  Clock::time_point last_;
};

}  // namespace plumb::detail
