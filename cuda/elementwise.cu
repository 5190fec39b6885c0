// Softmax, SwiGLU and FP8 KV quantization (docs/fixtures.md "swiglu, softmax", "kv_quant"; definitions:
// include/plumb/kernels/scalar.h Softmax and Swiglu, docs/formats.md "FP32 → FP8").
#include "common.cuh"

namespace plumb::cuda {
namespace {

// One block per row: the max, then Σ e^(x − max) in FP32 (block-parallel: another order than plumb's, which
// the tolerance allows), then each e^(x − max) / sum. The input stays FP32 under either precision (softmax's
// inputs, scores and logits, are FP32 in every engine); kBf16 rounds the output.
__global__ void SoftmaxKernel(const float* x, float* out, int n, Precision p) {
  __shared__ float scratch[kThreads / 32];
  const float* xr = x + static_cast<std::int64_t>(blockIdx.x) * n;
  float* outr = out + static_cast<std::int64_t>(blockIdx.x) * n;
  float m = -INFINITY;
  for (int i = threadIdx.x; i < n; i += kThreads) m = fmaxf(m, xr[i]);
  m = BlockMax(m, scratch);
  float sum = 0.0f;
  for (int i = threadIdx.x; i < n; i += kThreads) sum += expf(xr[i] - m);
  sum = BlockSum(sum, scratch);
  for (int i = threadIdx.x; i < n; i += kThreads) outr[i] = Rounded(expf(xr[i] - m) / sum, p);
}

// out = silu(gate) · up, silu(g) = g / (1 + e^−g); kBf16 rounds gate, up, silu(gate) and the output.
__global__ void SwigluKernel(const float* gate, const float* up, float* out, int n, Precision p) {
  const int i = blockIdx.x * kThreads + threadIdx.x;
  if (i >= n) return;
  const float g = Rounded(gate[i], p);
  out[i] = Rounded(Rounded(g / (1.0f + expf(-g)), p) * Rounded(up[i], p), p);
}

// codes[i] = the FP8 code of x[i] / scale, round to nearest even, SATFINITE (as StoreKv writes a cache).
__global__ void KvQuantKernel(const float* x, std::uint8_t* codes, std::int64_t count, KvDtype dtype,
                              const float* scale) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i < count) StoreKv(codes, dtype, i, x[i], *scale);
}

// out[i] = a[i] + b[i]: each thread reads its element of both before writing it, so out may alias either.
__global__ void AddKernel(const float* a, const float* b, float* out, std::int64_t n) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

}  // namespace

void Softmax(const float* x, float* out, int rows, int n, Precision precision) {
  if (rows <= 0 || n <= 0) return;
  SoftmaxKernel<<<static_cast<unsigned>(rows), kThreads>>>(x, out, n, precision);
  CheckLaunch("Softmax");
}

void Swiglu(const float* gate, const float* up, float* out, int n, Precision precision) {
  if (n <= 0) return;
  SwigluKernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads>>>(gate, up, out, n,
                                                                                   precision);
  CheckLaunch("Swiglu");
}

void KvQuant(const float* x, std::uint8_t* codes, std::int64_t count, KvDtype dtype, const float* scale) {
  if (count <= 0) return;
  KvQuantKernel<<<static_cast<unsigned>((count + kThreads - 1) / kThreads), kThreads>>>(x, codes, count,
                                                                                        dtype, scale);
  CheckLaunch("KvQuant");
}

void Add(const float* a, const float* b, float* out, std::int64_t n) {
  if (n <= 0) return;
  AddKernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads>>>(a, b, out, n);
  CheckLaunch("Add");
}

}  // namespace plumb::cuda
