// The CUDA harness's kernels, as host functions over device pointers (cuda/*.cu).
//
// Straightforward kernels that compute what docs/fixtures.md ("Ops and tensor names") defines, one thread
// block per output row or per (sequence, head), FP32 accumulation throughout. They are checked against the
// fixture suite by plumb_cuda_runner, never against plumb's library (which they do not link). This header
// names no CUDA type, so the runner's plain C++ code can include it; every function launches on the
// default stream and throws plumb::Error if the launch fails.
#pragma once

#include <cstdint>

namespace plumb::cuda {

// What the kernels round beyond FP32 arithmetic: nothing, or (kBf16) what a BF16 engine rounds, each input of
// a matmul, attention (q, k, v and P), RMSNorm (x, weight, x·r), RoPE (x, cos, sin, the products) and each
// output, to BF16, FP32 sums throughout; judged with the allowances bf16_activations and bf16_outputs
// (docs/fixtures.md "Allowances").
enum class Precision { kFp32, kBf16 };

// ---- GEMV / GEMM: y[m][n] = Σ_k W[n][k] · x[m][k] ---------------------------------------------------
enum class WeightDtype {
  kF32,
  kF16,
  kBf16,
  kFp8E4m3,
  kFp8E5m2,
  kInt4Sym,
  kInt4Asym,
  kGptq,
  kAwq,
  kQ4_0,
  kQ4_1,
  kQ8_0,
  kMxfp4,
  kNvfp4,
  kMxfp8E4m3,
  kMxfp8E5m2,
  kFp8Block128
};

// The weight exactly as stored (device pointers; which are used depends on dtype). n, k as in GemvShape.
struct GemvWeights {
  WeightDtype dtype = WeightDtype::kF32;
  // f32 / f16 / bf16: [n][k] floats or FP16 / BF16 bits; fp8: [n][k] codes; int4_*: [n][ceil(k/2)] bytes,
  // two columns per byte; q4_0 / q4_1 / q8_0: [n][row_bytes] GGUF blocks; gptq: qweight I32 [k/8][n];
  // awq: qweight I32 [k][n/8]; the microscaled dtypes and fp8_block128 below.
  const void* w = nullptr;
  const float* fp8_scale = nullptr;  // fp8: [n] (per row) or [1] (per tensor)
  bool fp8_per_row = false;
  // int4_*: FP16 bits [n][ceil(k/G)]; gptq / awq: FP16 bits [k/G][n].
  const std::uint16_t* scales = nullptr;
  const std::uint8_t* int4_zeros = nullptr;  // int4_asym: [n][ceil(groups/2)] nibbles
  const std::int32_t* qzeros = nullptr;      // gptq / awq: [k/G][n/8] words
  int group_size = 0;                        // G for int4_* / gptq / awq
  // mxfp4 / nvfp4 / mxfp8_*: w is [n][ceil(k/2)] FP4 or [n][k] FP8 codes; these the block scale codes
  // [n][ceil(k/block)] (E8M0, NVFP4's E4M3) and NVFP4's tensor scale [1].
  const std::uint8_t* block_scales = nullptr;
  const float* tensor_scale = nullptr;
  // fp8_block128 (docs/formats.md "Block-scaled FP8 (128×128)"): w is [n][k] E4M3 codes; these the FP32
  // scales [ceil(n/128)][ceil(k/128)], element (row, c) multiplied by [row/128][c/128].
  const float* block128_scales = nullptr;
};

// y: [m][n]; x: [m][k]. m = 1 is a GEMV.
void Gemv(const GemvWeights& w, const float* x, float* y, int m, int n, int k,
          Precision precision = Precision::kFp32);

// ---- RMSNorm: out[r] = x[r] / sqrt(mean(x[r]²) + eps) ⊙ weight --------------------------------------
// x, out: [rows][n]; weight: [n].
void RmsNorm(const float* x, const float* weight, float* out, int rows, int n, float eps,
             Precision precision = Precision::kFp32);

// ---- RoPE --------------------------------------------------------------------------------------------
enum class RopePairing { kRotateHalf, kInterleaved };  // docs/formats.md "RoPE pairing"
// x, out: [rows][n_heads][head_dim]; positions: [rows]; freq_factors: [head_dim/2] per-pair frequency
// divisors (RoPE scaling: angle = pos · θ^(−2i/head_dim) / freq_factors[i]), or null for none.
void Rope(const float* x, const std::int32_t* positions, float* out, int rows, int n_heads, int head_dim,
          float theta, RopePairing pairing, const float* freq_factors = nullptr,
          Precision precision = Precision::kFp32);

// ---- softmax, SwiGLU ---------------------------------------------------------------------------------
// x, out: [rows][n], each row's softmax (the input FP32 under either precision; kBf16 rounds the output).
void Softmax(const float* x, float* out, int rows, int n, Precision precision = Precision::kFp32);
// out[i] = silu(gate[i]) · up[i]; gate, up, out: [n].
void Swiglu(const float* gate, const float* up, float* out, int n, Precision precision = Precision::kFp32);

// ---- the paged KV cache (docs/kv-cache.md "Layout", docs/fixtures.md "attention_decode") ---------------
enum class KvDtype { kF32, kF16, kBf16, kFp8E4m3, kFp8E5m2 };
enum class KvLayout {
  kNhd,         // k and v: [num_blocks][block_size][n_kv_heads][head_dim]
  kVllm,        // k: [num_blocks][n_kv_heads][head_dim/x][block_size][x], x = 16 / element bytes;
                // v: [num_blocks][n_kv_heads][head_dim][block_size]
  kContiguous,  // k and v: [n_kv_heads][capacity][head_dim] (plumb's ContiguousKvCache, one layer): one
                // block of block_size = capacity positions, read through block_tables = {0} and seq_lens
};
int KvElementBytes(KvDtype dtype);

struct PagedKv {
  KvLayout layout = KvLayout::kNhd;
  KvDtype dtype = KvDtype::kF32;
  void* k = nullptr;               // elements of dtype in the layout above
  void* v = nullptr;               // likewise
  const float* k_scale = nullptr;  // [n_kv_heads]: fp8 value = fp8(code) · scale (ignored otherwise)
  const float* v_scale = nullptr;  // [n_kv_heads]
  int n_kv_heads = 0, head_dim = 0, block_size = 0;
};

// Where each sequence's pages are. The vLLM layout is read through block_tables / seq_lens (as vLLM's
// paged_attention kernels take them), the NHD layout through FlashInfer's indptr / indices /
// last_page_len, so that the suite's two views of the same pages are both exercised. The contiguous layout
// is read through block_tables ({0}) and seq_lens, as the vLLM layout.
struct PageTable {
  const std::int32_t* block_tables = nullptr;  // [batch][max_blocks_per_seq]
  const std::int32_t* seq_lens = nullptr;      // [batch]
  int max_blocks_per_seq = 0;
  const std::int32_t* kv_indptr = nullptr;         // [batch + 1]
  const std::int32_t* kv_indices = nullptr;        // [kv_indptr[batch]]
  const std::int32_t* kv_last_page_len = nullptr;  // [batch]
};

// One query token per sequence at position seq_len − 1 attending to positions [0, seq_len), or with a sliding
// window > 0 to [max(0, seq_len − window), seq_len) (positions before it are not read).
// q, out: [batch][n_heads][head_dim]; scores: scratch [batch][n_heads][max_seq_len] (max_seq_len ≥ every
// sequence's length).
void AttentionDecode(const PagedKv& kv, const PageTable& pages, const float* q, float* out, float* scores,
                     int batch, int n_heads, int max_seq_len, float softmax_scale, int window = 0,
                     Precision precision = Precision::kFp32);

// Causal attention of `rows` query tokens of one sequence (docs/fixtures.md "attention_prefill"): with L its
// length (seq_lens[0], or FlashInfer's view of it for NHD), query row r sits at position L − rows + r and
// attends to [0, L − rows + r], or with a sliding window > 0 to the last `window` positions of that range
// (positions before it are not read). q, out: [rows][n_heads][head_dim]; scores: scratch
// [rows][n_heads][L]. The same kernel as AttentionDecode (which is rows = 1 per sequence).
void AttentionPrefill(const PagedKv& kv, const PageTable& pages, const float* q, float* out, float* scores,
                      int rows, int n_heads, int seq_len, float softmax_scale, int window = 0,
                      Precision precision = Precision::kFp32);

// Writes token t's keys and values ([tokens][n_kv_heads][head_dim] FP32) into slot slot_mapping[t] of the
// cache, encoded as docs/kv-cache.md "Element types" says; a negative slot (vLLM's padding) writes nothing.
void ReshapeAndCache(const PagedKv& kv, const float* key, const float* value,
                     const std::int64_t* slot_mapping, int tokens);

// FP8 KV quantization (docs/fixtures.md "kv_quant"): codes[i] = the `dtype` (kFp8E4m3 or kFp8E5m2) code of
// x[i] / *scale, encoded as ReshapeAndCache encodes a cache element. x: [count]; scale: one float.
void KvQuant(const float* x, std::uint8_t* codes, std::int64_t count, KvDtype dtype, const float* scale);

// ---- the model cases' own steps (docs/fixtures.md "layer", "end_to_end", "kv_handoff", "tp_layer") ------
// The rest of a Llama forward pass is the kernels above (Gemv, RmsNorm, Rope, ReshapeAndCache,
// AttentionPrefill, Swiglu); these three are what it needs besides.

// The embedding lookup: out[r][c] = table[tokens[r]][c], decoded to FP32 exactly as Gemv decodes a weight
// (weights.cuh WeightAt). table: [vocab][d] of a dtype without a scale applied after the dot (not fp8_e4m3,
// fp8_e5m2 or nvfp4: throws); tokens: [rows], each in [0, vocab) (the caller checks); out: [rows][d]. Not
// rounded under either precision: the residual stream stays FP32 (docs/fixtures.md "Allowances").
void Embed(const GemvWeights& table, const std::int32_t* tokens, float* out, int rows, int vocab, int d);

// out[i] = a[i] + b[i] in FP32 under either precision: the residual stream's adds and tensor parallelism's
// all-reduce (FP32 in the engines the suite models). out may be a or b.
void Add(const float* a, const float* b, float* out, std::int64_t n);

// Positions [0, count) of a contiguous cache (kv.layout kContiguous, kv.block_size its capacity >= count)
// read back as attention reads them (LoadKv: FP8 is the code's value times its KV head's scale in one FP32
// multiplication; the 16-bit types exactly): k_out, v_out [n_kv_heads][count][head_dim].
void ReadKv(const PagedKv& kv, int count, float* k_out, float* v_out);

// ---- multi-head latent attention (docs/fixtures.md "mla_decode and mla_prefill") -------------------------
// The absorbed form, as FlashMLA runs it, in FP32 under either precision (the op's checks have no BF16
// allowance): for query token t = b·rows + r at position p = seq_lens[b] − rows + r and head h,
//   q_lat = W_UK[h]ᵀ·q_nope[t][h], scores_s = (q_lat·c_s + q_pe[t][h]·k_pe_s)·softmax_scale for s in [0, p],
//   o_lat = Σ_s softmax(scores)_s·c_s, out[t][h] = W_UV[h]·o_lat.
struct MlaShape {
  int heads = 0;   // n_heads
  int latent = 0;  // kv_lora_rank (R): the width of c
  int nope = 0;    // qk_nope_head_dim (dn)
  int rope = 0;    // qk_rope_head_dim (dr): k_pe's width, shared by the heads
  int v = 0;       // v_head_dim (dv)
  int rows = 0;    // query tokens per sequence (the last `rows` positions; 1 for a decode)
};
// The cache: [num_blocks][block_size][R + dr] floats, each row c then k_pe, read through block_tables.
struct MlaCache {
  const float* kv = nullptr;
  const std::int32_t* block_tables = nullptr;  // [batch][max_blocks_per_seq]
  const std::int32_t* seq_lens = nullptr;      // [batch], each in [rows, max_blocks_per_seq · block_size]
  int block_size = 0, max_blocks_per_seq = 0;
};
// A block's shared memory: q_lat and o_lat [R], q_pe [dr]; at most the default 48 KiB.
inline constexpr std::int64_t kMlaMaxSharedBytes = 48 * 1024;
inline std::int64_t MlaSharedBytes(const MlaShape& s) {
  return (2 * std::int64_t{s.latent} + s.rope) * std::int64_t{sizeof(float)};
}
// q_nope: [batch·rows][heads][dn]; q_pe: [batch·rows][heads][dr]; w_uk: [heads][dn][R]; w_uv: [heads][dv][R];
// out: [batch·rows][heads][dv]; scores: scratch [batch·rows][heads][max_seq_len] (max_seq_len ≥ every
// seq_len). One block per (query token, head); n_heads ≤ 65535.
void Mla(const MlaCache& cache, const float* q_nope, const float* q_pe, const float* w_uk, const float* w_uv,
         float* out, float* scores, const MlaShape& shape, int batch, int max_seq_len, float softmax_scale);

// ---- sampling, speculative decoding (docs/fixtures.md "sampling", "speculative_verify") ----------------
// Both follow include/plumb/sample/sampler.h and speculative.h step by step, in double where they do, each
// sum in the definition's order (one thread walks the sorted candidates), so that the ids the uniforms pick
// are the definition's. Sorting (descending, ties by ascending id) is by rank: each token counts the
// tokens that come before it, then lands at that index. One block per row; O(V²/threads) a row.

// SamplingParams as the definition reads them: temperature, top_p and min_p are floats (promoted to double
// where the definition computes in double); temperature 0 is greedy; top_k 0 is off.
struct SamplingConfig {
  float temperature = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
};
// tokens[r] = Sampler::SampleWithUniform(CandidateDistribution(logits[r], config), uniforms[r]).
// logits: [rows][vocab], no NaN and not all −inf in a row (the caller checks); uniforms: [rows], each in
// [0, 1). Scratch: weights [rows][vocab] doubles, order [rows][vocab] ints.
void Sample(const SamplingConfig& config, const float* logits, const double* uniforms, std::int32_t* tokens,
            double* weights, std::int32_t* order, int rows, int vocab);

// plumb::VerifyDraft per row over dense distributions (docs/fixtures.md "speculative_verify"):
// draft_probs [rows][k][vocab], target_probs [rows][k+1][vocab] (each entry finite and >= 0, each
// distribution with a positive entry: the caller checks), draft_tokens [rows][k] (each in [0, vocab)),
// uniforms [rows][k+1] (each in [0, 1)). Outputs accepted [rows], tokens [rows][k+1] (−1 padding) and
// residual [rows][vocab] (the last token's distribution by id, 0 where it has no mass). Scratch: order
// [rows][vocab] ints.
void SpeculativeVerify(const float* draft_probs, const float* target_probs, const std::int32_t* draft_tokens,
                       const double* uniforms, std::int32_t* accepted, std::int32_t* tokens, float* residual,
                       std::int32_t* order, int rows, int k, int vocab);

// ---- mixture of experts (docs/fixtures.md "moe_route", "moe_experts"; docs/models.md) ----------------
// Both in FP32 under either precision: routers compute in FP32 in every engine, and neither op's checks
// have a BF16 allowance (the example engine computes them in FP32 in every mode).
enum class MoeRouting {
  kSoftmaxTopK,      // Mixtral, Qwen2/3-MoE: top_k of p = softmax(logits); weights p (renormalize: / Σ)
  kTopKSoftmax,      // gpt-oss: top_k of the logits; weights softmax over the selected logits
  kSigmoidGroupTopK  // DeepSeek-V3: s = sigmoid(logits), c = s + bias; groups scored by their two largest c,
                     // the top_groups groups, the top_k of their experts by c; weights s (renormalize: / Σ),
                     // times scaling
};
struct MoeRouteParams {
  MoeRouting routing = MoeRouting::kSoftmaxTopK;
  int experts = 0, top_k = 0;  // 1 <= top_k <= experts <= kMoeRouteMaxExperts
  bool renormalize = true;     // kSoftmaxTopK, kSigmoidGroupTopK
  int groups = 1;              // kSigmoidGroupTopK: dividing experts into groups of at least 2, ...
  int top_groups = 1;          // ... the best top_groups of them searched (at least top_k experts)
  float scaling = 1.0f;        // kSigmoidGroupTopK: routed_scaling_factor
};
// The most experts MoeRoute takes: a token's scores live in shared memory (9 bytes an expert).
inline constexpr int kMoeRouteMaxExperts = 4096;

// Routes each token (one block per token): ids and weights [tokens][top_k] in selection order, descending
// score, of equal scores the lower expert (or group) id first. logits: [tokens][experts]; bias: [experts]
// (kSigmoidGroupTopK's correction bias, which chooses but does not weigh; null otherwise).
void MoeRoute(const MoeRouteParams& p, const float* logits, const float* bias, std::int32_t* ids,
              float* weights, int tokens);

// SwiGLU experts stacked in three weights: gate and up [count][f][d], down [count][d][f], each expert's
// matrix a GemvWeights of dtype kF32, kF16, kBf16 or kMxfp4 (w, and block_scales for MXFP4, hold every
// expert's rows one expert after the other). f = 0: no such experts.
struct SwigluExperts {
  GemvWeights gate, up, down;
  int f = 0;
};

// A MoE layer's experts (docs/fixtures.md "moe_experts"): for each token t,
//   y_t = Σ_j weights[t][j] · down_e(silu(gate_e · x_t) ⊙ up_e · x_t),  e = ids[t][j], j ascending,
// then, with shared.f > 0, + g · down_s(silu(gate_s · x_t) ⊙ up_s · x_t), g = sigmoid(shared_gate · x_t)
// (Qwen2-MoE) or 1 where shared_gate is null (DeepSeek-V3). Each projection is a GEMV of the weight's
// dtype, as Gemv computes it. ids, weights: [tokens][top_k], each id in [0, experts); x, y: [tokens][d];
// shared_gate: [d] or null. Scratch: hidden [tokens][top_k][routed.f], shared_hidden [tokens][shared.f].
struct MoeLayer {
  SwigluExperts routed;
  const std::int32_t* ids = nullptr;
  const float* weights = nullptr;
  int top_k = 0;
  SwigluExperts shared;                // shared.f = 0: none
  const float* shared_gate = nullptr;  // [d], or null
};
void MoeExperts(const MoeLayer& layer, const float* x, float* y, float* hidden, float* shared_hidden,
                int tokens, int d);

// vLLM's moe_align_block_size (docs/fixtures.md "moe_align_block_size", vLLM's
// csrc/moe/moe_align_sum_kernels.cu with ignore_invalid_experts=True): the `slots` = tokens·top_k flat
// indices i of topk_ids grouped by expert into blocks of block_size for a grouped GEMM. As vLLM's kernel for
// large batches: each expert's slots counted (shared-memory atomics), the exclusive cumsum of the counts
// rounded up to block_size giving each expert's segment, each segment's blocks labelled with its expert, then
// every slot placed in its expert's segment by an atomicAdd on that segment's cursor. So the order inside a
// segment varies from run to run (the runner sorts each segment before it judges, as verify does); the pads
// are `slots`.
//   topk_ids [slots], each in [0, experts); expert_map [experts] (null: none) maps a global id to the local
//   id or −1 (another rank's expert: the slot is dropped); local ids lie in [0, experts) and are distinct.
//   sorted_token_ids [capacity] (capacity ≥ MoeAlignCapacity(...)): the segments, then pads to the end;
//   expert_ids [ceil(capacity / block_size)]: each block's (local) expert, then 0s (vLLM's CUDA kernel);
//   num_tokens_post_padded [1]: P, the segments' total length; scratch: cursor [experts + 1].
// experts <= kMoeAlignMaxExperts (the counts live in shared memory); capacity must fit an int32.
inline constexpr int kMoeAlignMaxExperts = 8192;
// vLLM's max_num_tokens_padded: slots + experts·(block_size − 1), or slots·block_size if that is smaller
// (fewer slots than experts), enough for every segment of any routing.
inline std::int64_t MoeAlignCapacity(std::int64_t slots, std::int64_t experts, std::int64_t block_size) {
  const std::int64_t bound = slots + experts * (block_size - 1), few = slots * block_size;
  return few < bound ? few : bound;
}
void MoeAlignBlockSize(const std::int32_t* topk_ids, const std::int32_t* expert_map, int slots, int experts,
                       int block_size, std::int32_t* sorted_token_ids, std::int32_t* expert_ids,
                       std::int32_t* num_tokens_post_padded, std::int32_t* cursor, int capacity);

}  // namespace plumb::cuda
