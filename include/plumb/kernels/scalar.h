// The scalar reference kernels: the *definition* of every op plumb computes.
//
// Plain loops, one thread, FP32 storage. Every faster variant (OpenMP, BLAS, AVX2/AVX-512/NEON) is tested
// against these on awkward shapes. Where the accumulation order matters it is stated, because a CUDA kernel
// validated against plumb needs to know what "the same result" means.
#pragma once

#include <cstdint>

#include "plumb/kernels/attention_rule.h"
#include "plumb/kernels/kv_layer_view.h"

namespace plumb::kernels::scalar {

// Dot product of a[0..n) and b[0..n) in FP32, in this exact order (each product rounded, then added; no FMA):
//   lane[j] = Σ over i ≡ j (mod 8), ascending i, of a[i]·b[i]          for j = 0..7
//   result  = ((lane0 + lane4) + (lane2 + lane6)) + ((lane1 + lane5) + (lane3 + lane7))
// i.e. what an 8-wide SIMD accumulator followed by the usual halving reduction computes.
float Dot(const float* a, const float* b, int n);

// y[r] = Dot(W row r, x) for r in [row_begin, row_end). W is [n_rows][k] row-major.
void GemvRows(const float* W, const float* x, float* y, int k, int row_begin, int row_end);

// Y[m][n] = X[m][k] · W[n][k]^T, every element a Dot() of a row of X and a row of W.
void Gemm(const float* X, const float* W, float* Y, int m, int n, int k);

// out = x / sqrt(mean(x²) + eps) ⊙ weight; the mean of squares accumulated in FP32 left to right.
void RmsNorm(const float* x, const float* weight, float* out, int n, float eps);

// Rotary position embedding, Hugging Face "rotate-half" pairing, applied in place to each of n_heads
// vectors of length head_dim in x ([n_heads][head_dim]). For i in [0, h), h = head_dim/2:
//   inv_freq_i = theta^(-2i/head_dim) / f_i,  angle = pos · inv_freq_i   (in double; cos, sin rounded to
//   float) x'[i]      = x[i]·cos − x[i + h]·sin x'[i + h]  = x[i + h]·cos + x[i]·sin
// f_i = freq_factors[i] (h divisors, one per pair: RoPE scaling, docs/models.md "RoPE scaling"), or 1 for
// every pair when freq_factors is null. Dividing by 1 is exact, so an unscaled call has the same bits either
// way. GGUF files pair adjacent elements (2i, 2i+1) instead; see docs/formats.md ("RoPE pairing").
void RopeRotateHalf(float* x, int n_heads, int head_dim, int pos, float theta,
                    const float* freq_factors = nullptr);
// RopeRotateHalf's cos and sin for pair i at position pos with divisor f_i = freq_factor, computed as stated
// there (one function, so a kernel that computes them once per position and reuses them has the
// definition's bits).
void RopeCosSin(int pos, int i, int head_dim, float theta, float freq_factor, float& c, float& s);

// e^x in FP32, plumb's own, so that no definition depends on the host's libm (two builds of glibc's expf,
// with and without FMA, round some inputs differently). In double, with C0..C2, N = 32 and the table T of
// src/kernels/exp/exp_constants.h (glibc's constants; docs/formats.md "e^x"):
//   shifted = fma(N / ln 2, x, 1.5 · 2^52),  k = its low bits,  kd = shifted − 1.5 · 2^52
//   r = fma(N / ln 2, x, −kd),  s = 2^(k/N) from T[k mod 32] and k's high bits
//   y = fma(fma(C0, r, C1), r · r, fma(r, C2, 1)) · s,  rounded to float once
// and for |x| ≥ 88: −inf → 0, NaN and +inf → x + x, x > 0x1.62e42ep6 → +inf, x < −0x1.9fe368p6 → 0,
// x < −0x1.9d1d9ep6 → 2^−149, else the same polynomial. Error ≤ 0.502 ulp.
float Exp(float x);

// In-place softmax over x[0..n): subtract the max, exponentiate, divide by the FP32 left-to-right sum.
void Softmax(float* x, int n);
// Softmax's steps after its max: x[i] = Exp(x[i] − max_value), their left-to-right sum, then each times
// 1 / sum. For a caller that found the max (the same value Softmax's fmax scan gives) another way.
void SoftmaxFromMax(float* x, int n, float max_value);

// out[i] = silu(gate[i]) · up[i], silu(g) = g / (1 + Exp(−g)), rounded in that order.
void SwiGlu(const float* gate, const float* up, float* out, int n);

// out[i] = gelu(gate[i]) · up[i] with GELU's tanh form (Gemma's GeGLU, PyTorch's gelu(approximate="tanh")):
//   gelu(g) = 0.5 · g · (1 + tanh(u)),  u = √(2/π) · (g + 0.044715 · g³)
// computed through the identity 0.5 · (1 + tanh(u)) = 1 / (1 + e^(−2u)), so that it needs plumb's Exp and
// no host tanh:  s = g + 0.044715 · ((g · g) · g),  out = g / (1 + Exp(−2√(2/π) · s)) · up,  each operation
// rounded to float in that order (docs/formats.md "e^x").
void GeluTanhGlu(const float* gate, const float* up, float* out, int n);
// Soft-capping (Gemma's final logits): x[i] = cap · tanh(x[i] / cap), with tanh(y) = 2 / (1 + e^(−2y)) − 1
// through plumb's Exp:  y = x / cap,  t = 2 / (1 + Exp(−2 · y)) − 1,  x = cap · t,  rounded in that order.
// (|t| near 0 loses relative accuracy to the subtraction, an absolute error of about cap · 2^-24.)
void SoftCap(float* x, int n, float cap);
// −2√(2/π), GeluTanhGlu's factor of s, as the nearest float.
inline constexpr float kMinusTwoSqrtTwoOverPi = -1.5957691216057308f;
inline constexpr float kGeluCubic = 0.044715f;

// Attention of one query head, at position n_ctx − 1, over positions [begin, n_ctx) of KV head kv_head of one
// cache layer, begin = max(0, n_ctx − window) for a sliding window of `window` positions, 0 for window 0:
//   scores[t] = Dot(q, k_t, head_dim) · scale                      t ascending from begin (scale: rule below)
//   p         = Softmax(scores)                                   over exactly those positions
//   out[j]    = Σ_t p[t] · v_t[j]                                 FP32, t ascending from out[j] = 0
// where k_t and v_t are position t's rows decoded to FP32: DecodeKv(kv.dtype, ..., head's scale), which for
// f32 is the stored floats themselves. So the definition is "attention over the decoded cache", the same
// for every layout and block table; positions before begin are never read. scratch holds n_ctx + head_dim
// floats (the scores, one decoded row). `dot` computes the scores' Dot; kernels pass a vector variant that
// returns the same bits (kernels/row_dot.h).
// rule: the score's scale (rule.scale, or 1 / sqrt(head_dim) when 0) and, when rule.softcap > 0, Gemma 2's
// soft-capping of each score, scores[t] = SoftCap(scores[t], rule.softcap), before the softmax.
using DotFn = float (*)(const float* a, const float* b, int n);
void AttendOneHead(const float* q, const KvLayerView& kv, int kv_head, int n_ctx, int window, float* scratch,
                   float* out, DotFn dot = Dot, AttentionScoreRule rule = {});

}  // namespace plumb::kernels::scalar
