// The kernel interface that model code calls. One entry point per op; behind it, the implementation that
// suits the shape (the thread pool over rows or heads, OpenBLAS for GEMM). Each is tested against its scalar
// definition in kernels/scalar.h. Model code never sees SIMD, BLAS or threading.
#pragma once

#include <cstdint>
#include <span>

#include "plumb/kernels/attention_rule.h"
#include "plumb/kernels/kv_layer_view.h"
#include "plumb/kernels/matrix.h"
#include "plumb/kernels/weight_matrix.h"

namespace plumb::kernels {

struct Int8Activations;  // kernels/int8_activations.h

// Threads used by every kernel below: plumb's pool (kernels/thread_pool.h; OpenBLAS runs single-threaded
// inside it). n <= 0 means all the processors this process may run on.
void SetNumThreads(int n);
int NumThreads();

// y[W.rows] = W · x[W.cols]. Decode's projection: one token, so every weight is read once and used once
// (arithmetic intensity ≈ 2 FLOPs per 4-byte weight): bandwidth-bound. The pool over output rows; each row is
// one scalar::Dot (computed by the vector RowDots where the CPU has one: the same bits), so the result is
// bitwise the same for any thread count.
void Gemv(const MatrixF32& W, const float* x, float* y);

// Y[m][W.rows] = X[m][W.cols] · Wᵀ. Prefill's projection: m prompt tokens share every weight read, so it is
// a GEMM (intensity grows with m): the pool splits W's rows, each thread calls OpenBLAS's cblas_sgemm.
void Gemm(const float* X, int m, const MatrixF32& W, float* Y);

// The same two ops on a stored weight matrix of any type (kernels/weight_matrix.h).
//   Gemv: GGUF types (kGgml): each row is one kernels::RowDot (kernels/row_dot.h), defined as scalar::Dot of
//         the dequantized row, so for F32 it is bitwise Gemv(MatrixF32) and for a block type it is bitwise
//         the Gemv of the dequantized matrix, without ever expanding it. FP8 and INT4 (kFp8, kInt4): each
//         row is kernels::PackedRowDots (kernels/packed_dot.h), the scale applied as defined there. Either
//         way bitwise the same for any thread count and any variant (scalar / AVX2 / NEON).
//   Gemm: within the dot-product error bound of the exact product of the decoded weights, not bitwise
//         Gemv's. One row of a quantized matrix: Gemv. 2..64 rows (decode batches;
//         src/kernels/small_gemm/small_gemm.h): each ~16 KiB tile of weight rows decoded once to FP32
//         (exactly: DequantizeRow / DecodePackedRow's values) and multiplied with every row by a
//         register-blocked FMA kernel, one 8-lane accumulator per (row, weight row) pair, lane j a fused
//         multiply-add chain over the elements c ≡ j (mod 8) in ascending c, lanes reduced as scalar::Dot
//         reduces them, FP8 scale after: the same bits for every variant (scalar / AVX2 / AVX-512) and thread
//         count. More rows (prefill): F32 is cblas_sgemm, other types are decoded into FP32 tiles of up to 8
//         MiB that cblas_sgemm multiplies, so prefill stays a GEMM while the model stays quantized (BLAS's
//         summation order is its own, but the tiles are fixed by the matrix and the machine: the same bits
//         for every thread count). Scratch tiles are per thread and kept between calls: a steady state
//         allocates nothing.
//   The fast family (kernels/int8_activations.h), for a matrix with int8 kernels: Gemv quantizes x and runs
//   them, and so does Gemm for every number of rows, each row bitwise its Gemv: below kInt8PanelMinRows
//   rows the row dots per row (as GemvBatch), from it the int8 panels (weight_format.h's int8_panel_gemm:
//   the GGUF block types' rows repacked once per call for all the rows; INT4 keeps the row dots). So a
//   prompt's logits do not depend on how it was split into calls (whole, in 512-row chunks, after a cached
//   prefix, beside other sequences), as they would if few rows ran int8 and many FP32. The cost, and why
//   it is the fast family's to pay: the prompt's activations are int8 too, as llama.cpp's are
//   (docs/quantization.md "The fast kernel family against the exact one").
//   For a float matrix (F32, F16, BF16, FP8) the fast family's Gemv runs the FMA kernels over x
//   (kernels/simd/fma_dot.h; one row of F32 too, which is otherwise cblas's), and Gemm from 2 rows on is
//   small_gemm's or cblas's as in the exact family, or from kBf16PanelMinRows rows on the BF16 panels where
//   the CPU has them (UsesBf16Panels).
void Gemv(const WeightMatrix& W, const float* x, float* y);
void Gemm(const float* X, int m, const WeightMatrix& W, float* Y);
// From this many rows on, Gemm of a matrix with int8 panels (the GGUF block types) runs them in the fast
// family (weight_format.h's int8_panel_gemm), below it the row dots per row: the same bits, and the
// crossover of the two on Llama-3.2-1B's shapes (24-32 rows for the 32-element types, 32-48 for the
// K-quants, whose repacking costs more: bench/prefill_gemm_bench, docs/performance.md).
inline constexpr int kInt8PanelMinRows = 32;
// Whether Gemm of W runs the BF16 panels (src/kernels/bf16_panel/bf16_panel.h) from kBf16PanelMinRows rows
// on: the fast family on a float matrix (F32, F16, BF16, FP8) where the CPU has AVX512-BF16 and the active
// ISA is AVX-512, unless PLUMB_BF16=0. Then the rows of X and the weights are rounded to BF16 (exact for BF16
// and FP8 weights) and summed in FP32: what an engine declares as bf16_activations (docs/fixtures.md
// "Allowances"). Elsewhere such a Gemm is small_gemm's or cblas_sgemm's, as in the exact family. From 4 rows
// the panels are no slower than small_gemm and from 8 on about twice as fast (Llama-3.2-1B's shapes, Zen 5,
// bench/prefill_gemm_bench); at 512, 2.0-2.1x OpenBLAS's own sgemm (docs/performance.md "BF16 panels").
// Where the CPU has AMX-BF16 they run as tiles (docs/performance.md "BF16 tiles").
bool UsesBf16Panels(const WeightMatrix& W);
// The same without a matrix: the ISA, the CPU and PLUMB_BF16 let the fast family's float matrices use them.
bool Bf16PanelsAvailable();
// Which kernel runs them, for the kernels line: "AMX-BF16 tiles" where the CPU's tdpbf16ps computes the
// tiles' definition and PLUMB_AMX is not 0 (their sums differ from the lanes', bf16_panel.h), else
// "AVX512-BF16".
const char* Bf16PanelsKind();
inline constexpr int kBf16PanelMinRows = 4;

// Several GEMVs of one input (Q, K and V; gate and up): y_i = W_i · x, each bitwise Gemv(W_i, x, y_i), in
// one parallel region over the matrices' rows taken together (so small matrices like K and V do not each pay
// a fork and a barrier) and, in the fast family, one quantization of x shared by every matrix that uses it.
// Every W_i must have x's length as its columns (throws plumb::Error otherwise).
struct GemvOutput {
  const WeightMatrix* W;
  float* y;
};
void GemvShared(std::span<const GemvOutput> outputs, const float* x);
// The same with x's quantization done by the caller (xq = QuantizeActivations of x, kernels/
// int8_activations.h), for the matrices that run the fast family's int8 kernels; the others read x. For a
// caller that times the quantization as a kernel of its own (plumb explain). Throws plumb::Error when such a
// matrix's columns are not xq.n.
void GemvShared(std::span<const GemvOutput> outputs, const float* x, const Int8Activations& xq);

// out[W.cols] = row r of W in FP32 (the token-embedding lookup). For FP8 each element is Fp8ToF32(q)·scale,
// rounded to FP32 once: the row as a vector of its own, where the GEMV applies the scale to the dot instead.
void DequantizeRowOf(const WeightMatrix& W, int r, float* out);

// RMSNorm of `rows` independent vectors of length n (the pool over rows when there are several).
void RmsNorm(const float* x, const float* weight, float* out, int rows, int n, float eps);

// RoPE (rotate-half) on `rows` token vectors, row r at position first_pos + r; each row is
// [n_heads][head_dim]. freq_factors: head_dim/2 frequency divisors (RoPE scaling) or null; scalar.h has the
// definition.
void RopeRotateHalf(float* x, int rows, int n_heads, int head_dim, int first_pos, float theta,
                    const float* freq_factors = nullptr);

// out = silu(gate) ⊙ up over n elements.
void SwiGlu(const float* gate, const float* up, float* out, std::int64_t n);
// x[i] = cap · tanh(x[i] / cap) over n elements: scalar::SoftCap, element by element.
void SoftCap(float* x, std::size_t n, float cap);
// out = gelu_tanh(gate) ⊙ up over n elements: scalar::GeluTanhGlu's bits.
void GeluTanhGlu(const float* gate, const float* up, float* out, std::int64_t n);

// Causal grouped-query attention over one layer of a KV cache (kernels/kv_layer_view.h: the contiguous and
// the paged layout are the same code). `rows` query tokens at positions first_pos .. first_pos+rows-1 whose
// keys and values the cache already holds: query token r, at position p = first_pos + r, attends to
// positions [0, p], or with a sliding window of w > 0 positions to [max(0, p − w + 1), p] (p − t < w:
// llama.cpp's LLAMA_SWA_TYPE_STANDARD, Hugging Face's sliding mask; Gemma 3's local layers, w = 512).
//   q, out:  [rows][n_heads][head_dim]           (head_dim = kv.head_dim)
//   kv:      positions [0, first_pos + rows) must be readable (kv.length >= first_pos + rows)
// Query head h reads KV head h / (n_heads / kv.n_kv_heads). Each (row, head) pair gives bitwise what one
// scalar::AttendOneHead gives (the definition), so the result does not depend on the thread count, on the
// layout (contiguous or paged, any block size, any block table) or on what else is in the batch. Positions
// outside a row's range are never read: a windowed row costs O(w), whatever the context. How the work is
// split and the cache read: docs/kv-cache.md, "How attention reads the cache".
struct AttentionItem {
  const float* q = nullptr;  // [rows][n_heads][head_dim]
  float* out = nullptr;      // [rows][n_heads][head_dim]
  int rows = 0;
  int first_pos = 0;
  KvLayerView kv;
  int window = 0;  // sliding window in positions; 0: none (every earlier position). After kv, so that
                   // {q, out, rows, first_pos, kv} still initialises an unwindowed item.
  AttentionScoreRule rule{};  // the scores' scale and soft-cap (scalar::AttendOneHead)

  // Row r's positions: [Begin(r), End(r)).
  int End(int r) const { return first_pos + r + 1; }
  int Begin(int r) const { return window > 0 && End(r) > window ? End(r) - window : 0; }
};

// The batched form, for decode and mixed steps: every item is one sequence's rows over its own cache (items
// may have different windows). The pool over the units of three phases (scores, softmax, value sums) of every
// row. Throws plumb::Error (before computing anything) for an item whose cache is too short, whose
// n_kv_heads does not divide n_heads or whose window is negative. Needs no scratch from the caller: a wave's
// score rows (all heads of up to 1 MiB of rows) and the per-thread buffers live in a workspace of the calling
// thread that grows to the largest call and is then reused, so steady-state decode allocates nothing.
void CausalAttention(std::span<const AttentionItem> items, int n_heads);
// One sequence: CausalAttention of the single item {q, out, rows, first_pos, kv, window}.
void CausalAttention(const float* q, int rows, int first_pos, const KvLayerView& kv, int n_heads, float* out,
                     int window = 0);

// Y[rows][W.rows] = X[rows][W.cols] · Wᵀ where every element is bitwise what Gemv(W, x_i, y_i) gives for
// that row alone (RowDot / PackedRowDots: one scalar::Dot per element, FP8 scale after the dot), while
// each weight row is read from memory once for all rows: Gemm's small-row kernel
// (src/kernels/small_gemm/small_gemm.h) with each product rounded and then added (scalar::Dot's order)
// instead of fused (what that costs against Gemm: docs/performance.md, "Batched decode"). The pool over
// weight rows. The batch-invariant projection of Model::Step: a row's result does not depend on the other
// rows, their number, or the thread count. In the fast family a matrix with int8 kernels runs them, for any
// number of rows: each row of X quantized once, and the format's int8_gemm (kernels/weight_format.h: each
// weight block's codes prepared once for several rows of X, every pair bitwise int8_row_dots) over tiles of
// weight rows that stay in L1; again each row's Gemv. Where that beats Gemm's decoded tiles: Int8BatchPays
// (kernels/weight_format.h). A float matrix's FMA kernels (fast family) run row by row, again each row's
// Gemv.
void GemvBatch(const WeightMatrix& W, const float* X, int rows, float* Y);

}  // namespace plumb::kernels
