// Scalar reference kernels: see include/plumb/kernels/scalar.h for the definitions these loops implement.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "plumb/core/extent.h"
#include "plumb/formats/kv_dtype.h"
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
  for (int r = row_begin; r < row_end; ++r) y[r] = Dot(W + Extent(r, k), x, k);
}

void Gemm(const float* X, const float* W, float* Y, int m, int n, int k) {
  for (int i = 0; i < m; ++i) {
    GemvRows(W, X + Extent(i, k), Y + Extent(i, n), k, 0, n);
  }
}

void RmsNorm(const float* x, const float* weight, float* out, int n, float eps) {
  float sum_squares = 0.0f;
  for (int i = 0; i < n; ++i) sum_squares += x[i] * x[i];
  const float inv_rms = 1.0f / std::sqrt(sum_squares / static_cast<float>(n) + eps);
  for (int i = 0; i < n; ++i) out[i] = x[i] * inv_rms * weight[i];
}

void RopeCosSin(int pos, int i, int head_dim, float theta, float freq_factor, float& c, float& s) {
  // The angle in double: pos · theta^(-2i/d) loses ~log2(pos) bits in float at long contexts.
  const double inv_freq =
      std::pow(static_cast<double>(theta), -2.0 * i / head_dim) / static_cast<double>(freq_factor);
  const double angle = pos * inv_freq;
  c = static_cast<float>(std::cos(angle));
  s = static_cast<float>(std::sin(angle));
}

void RopeRotateHalf(float* x, int n_heads, int head_dim, int pos, float theta, const float* freq_factors) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    float c = 0.0f, s = 0.0f;
    RopeCosSin(pos, i, head_dim, theta, freq_factors != nullptr ? freq_factors[i] : 1.0f, c, s);
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + Extent(h, head_dim);
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
  SoftmaxFromMax(x, n, max_value);
}

void SoftmaxFromMax(float* x, int n, float max_value) {
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) {
    x[i] = Exp(x[i] - max_value);
    sum += x[i];
  }
  const float inv_sum = 1.0f / sum;
  for (int i = 0; i < n; ++i) x[i] *= inv_sum;
}

void SwiGlu(const float* gate, const float* up, float* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + Exp(-gate[i])) * up[i];
}

void SoftCap(float* x, int n, float cap) {
  for (int i = 0; i < n; ++i) {
    const float y = x[i] / cap;
    const float t = 2.0f / (1.0f + Exp(-2.0f * y)) - 1.0f;
    x[i] = cap * t;
  }
}

void GeluTanhGlu(const float* gate, const float* up, float* out, int n) {
  for (int i = 0; i < n; ++i) {
    const float g = gate[i];
    const float s = g + kGeluCubic * (g * g * g);
    out[i] = g / (1.0f + Exp(kMinusTwoSqrtTwoOverPi * s)) * up[i];
  }
}

namespace {

// Calls fn(t, row) for t = begin .. n_ctx-1 in order, row = position t of KV head kv_head of `data` (the
// view's keys or values) in FP32. Walks the view a block at a time, so the block table is read once per block
// and positions within a block are position_stride apart (contiguous: one block of capacity positions). f32
// rows are read in place; other dtypes are decoded into `decoded` ([head_dim]) first.
template <class Fn>
void ForEachPosition(const KvLayerView& kv, const void* data, float scale, int kv_head, int begin, int n_ctx,
                     float* decoded, Fn&& fn) {
  const auto element_bytes = static_cast<std::int64_t>(KvDtypeBytes(kv.dtype));
  const auto* bytes = static_cast<const std::uint8_t*>(data);
  for (int t0 = begin; t0 < n_ctx;) {
    const int block_left = kv.block_size - t0 % kv.block_size;  // begin may fall inside a block
    const int count = n_ctx - t0 < block_left ? n_ctx - t0 : block_left;
    const std::uint8_t* first = bytes + kv.Element(t0, kv_head) * element_bytes;
    for (int i = 0; i < count; ++i) {
      const std::uint8_t* at = first + i * kv.position_stride * element_bytes;
      if (kv.dtype == KvDtype::kF32) {
        fn(t0 + i, reinterpret_cast<const float*>(at));
      } else {
        DecodeKv(kv.dtype, at, kv.head_dim, scale, decoded);
        fn(t0 + i, static_cast<const float*>(decoded));
      }
    }
    t0 += count;
  }
}

}  // namespace

void AttendOneHead(const float* q, const KvLayerView& kv, int kv_head, int n_ctx, int window, float* scratch,
                   float* out, DotFn dot, AttentionScoreRule rule) {
  const int head_dim = kv.head_dim;
  const int begin = window > 0 && n_ctx > window ? n_ctx - window : 0;
  const int n = n_ctx - begin;   // positions attended
  float* scores = scratch;       // [n], position t's at t − begin
  float* decoded = scratch + n;  // [head_dim] one K or V row in FP32 (dtypes other than f32)
  const float scale = rule.ScaleFor(head_dim);
  ForEachPosition(kv, kv.keys, kv.KScale(kv_head), kv_head, begin, n_ctx, decoded,
                  [&](int t, const float* k) { scores[t - begin] = dot(q, k, head_dim) * scale; });
  if (rule.softcap > 0.0f) SoftCap(scores, n, rule.softcap);
  Softmax(scores, n);
  for (int j = 0; j < head_dim; ++j) out[j] = 0.0f;
  ForEachPosition(kv, kv.values, kv.VScale(kv_head), kv_head, begin, n_ctx, decoded,
                  [&](int t, const float* v) {
                    for (int j = 0; j < head_dim; ++j) out[j] += scores[t - begin] * v[j];
                  });
}

}  // namespace plumb::kernels::scalar
