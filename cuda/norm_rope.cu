// RMSNorm and RoPE (docs/fixtures.md "rmsnorm", "rope"; definitions: include/plumb/kernels/scalar.h RmsNorm
// and RopeRotateHalf, docs/formats.md "RoPE pairing").
#include "common.cuh"

namespace plumb::cuda {
namespace {

// One block per row: the sum of squares in FP32 (block-parallel, so in another order than plumb's left to
// right, which the suite's tolerance allows), then out = x · inv_rms · weight in plumb's order.
__global__ void RmsNormKernel(const float* x, const float* weight, float* out, int n, float eps,
                              Precision p) {
  __shared__ float scratch[kThreads / 32];
  const float* xr = x + static_cast<std::int64_t>(blockIdx.x) * n;
  float* outr = out + static_cast<std::int64_t>(blockIdx.x) * n;
  float sum_squares = 0.0f;
  for (int i = threadIdx.x; i < n; i += kThreads) sum_squares += Rounded(xr[i], p) * Rounded(xr[i], p);
  sum_squares = BlockSum(sum_squares, scratch);
  const float inv_rms = 1.0f / sqrtf(sum_squares / static_cast<float>(n) + eps);
  for (int i = threadIdx.x; i < n; i += kThreads)
    outr[i] = Rounded(Rounded(Rounded(xr[i], p) * inv_rms, p) * Rounded(weight[i], p), p);
}

// One block per row; each thread rotates pairs (head, i), i in [0, head_dim/2). The angle pos · θ^(−2i/d) /
// f_i is computed in double and its cos / sin rounded to float, as plumb does (docs/formats.md "RoPE
// pairing", "Angles", "RoPE scaling"): in float the product loses about log2(pos) bits at large positions.
// f_i = freq_factors[i] (RoPE scaling's per-pair divisors), or 1 when freq_factors is null.
__global__ void RopeKernel(const float* x, const std::int32_t* positions, const float* freq_factors,
                           float* out, int n_heads, int head_dim, float theta, RopePairing pairing,
                           Precision precision) {
  const int half = head_dim / 2, row = blockIdx.x;
  const double pos = positions[row];
  const std::int64_t base = static_cast<std::int64_t>(row) * n_heads * head_dim;
  for (int p = threadIdx.x; p < n_heads * half; p += kThreads) {
    const int head = p / half, i = p % half;
    double inv_freq = pow(static_cast<double>(theta), -2.0 * i / head_dim);
    if (freq_factors != nullptr) inv_freq /= static_cast<double>(freq_factors[i]);
    const double angle = pos * inv_freq;
    const float c = Rounded(static_cast<float>(cos(angle)), precision),
                s = Rounded(static_cast<float>(sin(angle)), precision);
    // rotate_half pairs (i, i + d/2) (Hugging Face); interleaved pairs (2i, 2i + 1) (GGUF).
    const std::int64_t ia =
        base + static_cast<std::int64_t>(head) * head_dim + (pairing == RopePairing::kRotateHalf ? i : 2 * i);
    const std::int64_t ib = ia + (pairing == RopePairing::kRotateHalf ? half : 1);
    const float a = Rounded(x[ia], precision), b = Rounded(x[ib], precision);
    out[ia] = Rounded(Rounded(a * c, precision) - Rounded(b * s, precision), precision);
    out[ib] = Rounded(Rounded(b * c, precision) + Rounded(a * s, precision), precision);
  }
}

}  // namespace

void RmsNorm(const float* x, const float* weight, float* out, int rows, int n, float eps,
             Precision precision) {
  if (rows <= 0 || n <= 0) return;
  RmsNormKernel<<<static_cast<unsigned>(rows), kThreads>>>(x, weight, out, n, eps, precision);
  CheckLaunch("RmsNorm");
}

void Rope(const float* x, const std::int32_t* positions, float* out, int rows, int n_heads, int head_dim,
          float theta, RopePairing pairing, const float* freq_factors, Precision precision) {
  if (rows <= 0 || n_heads <= 0 || head_dim <= 0) return;
  RopeKernel<<<static_cast<unsigned>(rows), kThreads>>>(x, positions, freq_factors, out, n_heads, head_dim,
                                                        theta, pairing, precision);
  CheckLaunch("Rope");
}

}  // namespace plumb::cuda
