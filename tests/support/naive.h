// Naive double-precision versions of every op, written straight from the math: the oracle the kernel tests
// compare against. Deliberately share nothing with src/kernels.
#pragma once

#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

namespace plumb::testing {

// FP32 unit roundoff u = 2^-24, and Higham's γ_n = n·u / (1 − n·u): the worst-case relative error of an
// n-term FP32 dot product in any summation order, relative to Σ|a_i·b_i|.
inline constexpr double kUnitRoundoff = 1.0 / (1 << 24);
inline double Gamma(int n) {
  return n * kUnitRoundoff / (1.0 - n * kUnitRoundoff);
}

inline std::vector<float> RandomVector(std::size_t n, std::uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// y = W·x and Σ|W_ij·x_j| per row (the scale of the dot-product error bound).
inline void NaiveGemv(const std::vector<float>& W, const float* x, int n, int k, std::vector<double>& y,
                      std::vector<double>& abs_sum) {
  y.assign(n, 0.0);
  abs_sum.assign(n, 0.0);
  for (int r = 0; r < n; ++r) {
    for (int j = 0; j < k; ++j) {
      const double p = static_cast<double>(W[static_cast<std::size_t>(r) * k + j]) * x[j];
      y[r] += p;
      abs_sum[r] += std::fabs(p);
    }
  }
}

inline std::vector<double> NaiveRmsNorm(const float* x, const float* w, int n, double eps) {
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const double inv = 1.0 / std::sqrt(sum / n + eps);
  std::vector<double> out(n);
  for (int i = 0; i < n; ++i) out[i] = x[i] * inv * w[i];
  return out;
}

// Rotate-half RoPE of one head vector at position pos.
inline std::vector<double> NaiveRope(const float* x, int head_dim, int pos, double theta) {
  std::vector<double> out(head_dim);
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const double angle = pos * std::pow(theta, -2.0 * i / head_dim);
    out[i] = x[i] * std::cos(angle) - x[i + half] * std::sin(angle);
    out[i + half] = x[i + half] * std::cos(angle) + x[i] * std::sin(angle);
  }
  return out;
}

inline std::vector<double> NaiveSoftmax(const float* x, int n) {
  double max_value = x[0];
  for (int i = 1; i < n; ++i) max_value = std::fmax(max_value, x[i]);
  std::vector<double> out(n);
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += out[i] = std::exp(x[i] - max_value);
  for (double& v : out) v /= sum;
  return out;
}

inline double NaiveSilu(double g) {
  return g / (1.0 + std::exp(-g));
}

// softmax(q·K^T / sqrt(hd)) · V over positions [0, n_ctx) of keys/values laid out [pos][hd].
inline std::vector<double> NaiveAttention(const float* q, const float* keys, const float* values,
                                          int head_dim, int n_ctx) {
  std::vector<double> scores(n_ctx);
  double max_score = -INFINITY;
  for (int t = 0; t < n_ctx; ++t) {
    double dot = 0;
    for (int j = 0; j < head_dim; ++j)
      dot += static_cast<double>(q[j]) * keys[static_cast<std::size_t>(t) * head_dim + j];
    scores[t] = dot / std::sqrt(static_cast<double>(head_dim));
    max_score = std::fmax(max_score, scores[t]);
  }
  double sum = 0;
  for (double& s : scores) sum += s = std::exp(s - max_score);
  std::vector<double> out(head_dim, 0.0);
  for (int t = 0; t < n_ctx; ++t) {
    for (int j = 0; j < head_dim; ++j)
      out[j] += scores[t] / sum * values[static_cast<std::size_t>(t) * head_dim + j];
  }
  return out;
}

}  // namespace plumb::testing
