// Scalar reference kernels: see include/plumb/kernels/scalar.h for the definitions these loops implement.
#include <cmath>
#include <cstddef>

#include "plumb/kernels/scalar.h"

namespace plumb::kernels::scalar {

float Dot(const float* a, const float* b, int n) {
  // Eight partial sums, lane j taking the elements i ≡ j (mod 8): the order an 8-wide SIMD register
  // accumulates in, so the compiler may vectorize this loop and a SIMD kernel can match it bit for bit.
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const int full = n - n % 8;
  for (int i = 0; i < full; i += 8) {
    for (int j = 0; j < 8; ++j) lane[j] += a[i + j] * b[i + j];
  }
  for (int i = full; i < n; ++i) lane[i - full] += a[i] * b[i];
  return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

void GemvRows(const float* W, const float* x, float* y, int k, int row_begin, int row_end) {
  for (int r = row_begin; r < row_end; ++r) y[r] = Dot(W + static_cast<std::size_t>(r) * k, x, k);
}

void Gemm(const float* X, const float* W, float* Y, int m, int n, int k) {
  for (int i = 0; i < m; ++i) {
    GemvRows(W, X + static_cast<std::size_t>(i) * k, Y + static_cast<std::size_t>(i) * n, k, 0, n);
  }
}

void RmsNorm(const float* x, const float* weight, float* out, int n, float eps) {
  float sum_squares = 0.0f;
  for (int i = 0; i < n; ++i) sum_squares += x[i] * x[i];
  const float inv_rms = 1.0f / std::sqrt(sum_squares / static_cast<float>(n) + eps);
  for (int i = 0; i < n; ++i) out[i] = x[i] * inv_rms * weight[i];
}

void RopeRotateHalf(float* x, int n_heads, int head_dim, int pos, float theta) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    // The angle in double: pos · theta^(-2i/d) loses ~log2(pos) bits in float at long contexts.
    const double inv_freq = std::pow(static_cast<double>(theta), -2.0 * i / head_dim);
    const double angle = pos * inv_freq;
    const float c = static_cast<float>(std::cos(angle));
    const float s = static_cast<float>(std::sin(angle));
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + static_cast<std::size_t>(h) * head_dim;
      const float a = v[i];
      const float b = v[i + half];
      v[i] = a * c - b * s;
      v[i + half] = b * c + a * s;
    }
  }
}

void Softmax(float* x, int n) {
  float max_value = x[0];
  for (int i = 1; i < n; ++i) max_value = std::fmax(max_value, x[i]);
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max_value);
    sum += x[i];
  }
  const float inv_sum = 1.0f / sum;
  for (int i = 0; i < n; ++i) x[i] *= inv_sum;
}

void SwiGlu(const float* gate, const float* up, float* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void AttendOneHead(const float* q, const float* keys, const float* values, std::int64_t stride, int head_dim,
                   int n_ctx, float* scores, float* out) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  for (int t = 0; t < n_ctx; ++t) scores[t] = Dot(q, keys + t * stride, head_dim) * scale;
  Softmax(scores, n_ctx);
  for (int j = 0; j < head_dim; ++j) out[j] = 0.0f;
  for (int t = 0; t < n_ctx; ++t) {
    const float* v = values + t * stride;
    for (int j = 0; j < head_dim; ++j) out[j] += scores[t] * v[j];
  }
}

}  // namespace plumb::kernels::scalar
