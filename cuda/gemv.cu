// GEMV / GEMM for every weight dtype of docs/fixtures.md ("gemv and gemm"): one thread block per output
// element y[row of x][output feature]; each thread accumulates, in FP32, the products of the columns
// c ≡ threadIdx.x (mod kThreads), then the block sums the threads' partial sums. The weight is decoded
// element by element right where it is read, exactly as docs/formats.md defines each packing, so each dtype
// is one small device function (WeightAt, cuda/weights.cuh) and one kernel serves them all.
#include "common.cuh"
#include "weights.cuh"

namespace plumb::cuda {
namespace {

// grid (n, m): block (row, r) computes y[r][row] = Σ_c W[row][c] · x[r][c], times the FP8 scale.
__global__ void GemvKernel(GemvWeights w, const float* x, float* y, int n, int k, Precision p) {
  __shared__ float scratch[kThreads / 32];
  const int row = blockIdx.x, r = blockIdx.y;
  const float* xr = x + static_cast<std::int64_t>(r) * k;
  float acc = 0.0f;
  for (int c = threadIdx.x; c < k; c += kThreads)
    acc += Rounded(WeightAt(w, n, k, row, c), p) * Rounded(xr[c], p);
  const float dot = BlockSum(acc, scratch);
  if (threadIdx.x != 0) return;
  float out = dot;
  if (w.dtype == WeightDtype::kFp8E4m3 || w.dtype == WeightDtype::kFp8E5m2)
    out = w.fp8_scale[w.fp8_per_row ? row : 0] * dot;  // docs/formats.md "FP8", Scales: after the dot
  if (w.dtype == WeightDtype::kNvfp4) out = w.tensor_scale[0] * dot;
  y[static_cast<std::int64_t>(r) * n + row] = Rounded(out, p);
}

// grid rows: block r copies table row tokens[r], decoded, to out[r] (the threads over its d columns).
__global__ void EmbedKernel(GemvWeights table, const std::int32_t* tokens, float* out, int vocab, int d) {
  const int r = blockIdx.x;
  for (int c = threadIdx.x; c < d; c += kThreads)
    out[static_cast<std::int64_t>(r) * d + c] = WeightAt(table, vocab, d, tokens[r], c);
}

}  // namespace

void Gemv(const GemvWeights& w, const float* x, float* y, int m, int n, int k, Precision precision) {
  if (m <= 0 || n <= 0 || k <= 0) return;
  GemvKernel<<<dim3(static_cast<unsigned>(n), static_cast<unsigned>(m)), kThreads>>>(w, x, y, n, k,
                                                                                     precision);
  CheckLaunch("Gemv");
}

void Embed(const GemvWeights& table, const std::int32_t* tokens, float* out, int rows, int vocab, int d) {
  if (table.dtype == WeightDtype::kFp8E4m3 || table.dtype == WeightDtype::kFp8E5m2 ||
      table.dtype == WeightDtype::kNvfp4)
    throw MakeError("Embed: a table whose scale is applied after the dot (fp8, nvfp4) is not decoded here");
  if (rows <= 0 || d <= 0) return;
  EmbedKernel<<<static_cast<unsigned>(rows), kThreads>>>(table, tokens, out, vocab, d);
  CheckLaunch("Embed");
}

}  // namespace plumb::cuda
