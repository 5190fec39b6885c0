// Sampling and speculative decoding's verification (docs/fixtures.md "sampling", "speculative_verify";
// definitions: include/plumb/sample/sampler.h CandidateDistribution and Sampler::SampleWithUniform,
// include/plumb/sample/speculative.h VerifyDraft). The ids depend on every comparison of a probability with
// a boundary, so each step is the definition's, in its precision (double where it computes in double, the
// candidates' float probabilities where it rounds them) and each sum in its order: the parallel part is
// only what cannot change an id (the weights elementwise, and the sort).
#include "common.cuh"

namespace plumb::cuda {
namespace {

// sampler.h's inclusive slack on the top-p and min-p boundaries (kSamplingBoundaryTolerance).
constexpr double kBoundaryTolerance = 1e-6;

// The tokens whose value[t] > 0, sorted by descending value, ties by ascending id (sampler.h's order; a
// strict total order, so every rank is distinct): order[rank] = t, where rank counts the tokens that come
// before t. Each thread ranks its own tokens against the whole row: O(vocab²) a row, spread over the
// block. Synchronises at the end (order is then visible to the block).
template <class T>
__device__ void SortByRank(const T* value, int vocab, std::int32_t* order) {
  for (int t = threadIdx.x; t < vocab; t += kThreads) {
    const T v = value[t];
    if (!(v > T(0))) continue;
    int rank = 0;
    for (int s = 0; s < vocab; ++s) rank += value[s] > v || (value[s] == v && s < t);
    order[rank] = t;
  }
  __syncthreads();
}

// Sampler::SampleWithUniform over the candidates order[0, count) with probabilities prob(token): the first
// whose cumulative probability (in double, candidates in order) exceeds u; if rounding leaves the total at
// or below u, the last candidate of positive probability (order[0] if none has, which the callers rule
// out).
template <class Prob>
__device__ std::int32_t DrawWithUniform(const std::int32_t* order, int count, Prob prob, double u) {
  double cumulative = 0.0;
  std::int32_t last_positive = order[0];
  for (int i = 0; i < count; ++i) {
    const float p = prob(order[i]);
    cumulative += p;
    if (p > 0.0f) last_positive = order[i];
    if (cumulative > u) return order[i];
  }
  return last_positive;
}

// One block per row: CandidateDistribution(logits, config), then SampleWithUniform with uniforms[row].
//   1. the argmax (lowest id on ties; thread 0, in token order); temperature 0: that token, done
//   2. weights w_t = exp((l_t − l_max) / T) in double (every thread; a +inf l_max: 1 for the +inf tokens,
//      0 for the rest), sorted by rank; tokens of weight 0 drop out
//   then thread 0, in sorted order:
//   3. top-k: the first top_k (when 0 < top_k < the positive count); top_k_mass = Σ w of what is left, in
//      sorted order after a top-k, else in token order (as the definition sums it); max_weight = w[order[0]]
//   4. min-p: the prefix with w ≥ (min_p − 1e-6) · max_weight
//   5. top-p: the shortest prefix whose Σ w (sorted order) ≥ (top_p − 1e-6) · top_k_mass, else all
//   6. kept_mass = Σ w (sorted order); each candidate's prob = float(w / kept_mass); the draw.
// The weights differ from the CPU's by CUDA's exp (≤ 1 ulp in double, against glibc's), far inside the
// 1e-3 the suite's draws keep from every boundary.
__global__ void SampleKernel(SamplingConfig c, const float* logits, const double* uniforms,
                             std::int32_t* tokens, double* weights, std::int32_t* order, int vocab) {
  __shared__ int best_shared;
  const std::int64_t row = blockIdx.x;
  const float* l = logits + row * vocab;
  double* w = weights + row * vocab;
  std::int32_t* sorted = order + row * vocab;
  if (threadIdx.x == 0) {
    int best = 0;
    for (int t = 1; t < vocab; ++t)
      if (l[t] > l[best]) best = t;
    best_shared = best;
  }
  __syncthreads();
  const int best = best_shared;
  if (c.temperature == 0.0f) {
    if (threadIdx.x == 0) tokens[row] = best;
    return;
  }
  const float max_logit = l[best];
  const double temperature = c.temperature;
  for (int t = threadIdx.x; t < vocab; t += kThreads) {
    if (isinf(max_logit)) {
      w[t] = l[t] == max_logit ? 1.0 : 0.0;
    } else {
      w[t] = exp((static_cast<double>(l[t]) - static_cast<double>(max_logit)) / temperature);
    }
  }
  __syncthreads();
  SortByRank(w, vocab, sorted);
  if (threadIdx.x != 0) return;

  int kept = 0;  // the candidates are sorted[0, kept)
  for (int t = 0; t < vocab; ++t) kept += w[t] > 0.0;
  const bool top_k = c.top_k > 0 && c.top_k < kept;
  double top_k_mass = 0.0;
  if (top_k) {
    kept = c.top_k;
    for (int i = 0; i < kept; ++i) top_k_mass += w[sorted[i]];
  } else {
    for (int t = 0; t < vocab; ++t)
      if (w[t] > 0.0) top_k_mass += w[t];
  }
  const double max_weight = w[sorted[0]];
  if (c.min_p > 0.0f) {
    const double threshold = (static_cast<double>(c.min_p) - kBoundaryTolerance) * max_weight;
    int survivors = 0;
    while (survivors < kept && !(w[sorted[survivors]] < threshold)) ++survivors;
    kept = survivors;
  }
  if (c.top_p < 1.0f) {
    const double target = (static_cast<double>(c.top_p) - kBoundaryTolerance) * top_k_mass;
    double cumulative = 0.0;
    for (int i = 0; i < kept; ++i) {
      cumulative += w[sorted[i]];
      if (cumulative >= target) {
        kept = i + 1;
        break;
      }
    }
  }
  double kept_mass = 0.0;
  for (int i = 0; i < kept; ++i) kept_mass += w[sorted[i]];
  tokens[row] = DrawWithUniform(
      sorted, kept, [&](std::int32_t t) { return static_cast<float>(w[t] / kept_mass); }, uniforms[row]);
}

// One block per row: VerifyDraft over dense distributions (speculative.h).
//   1. thread 0: accept x_i while u_i · q_i(x_i) < p_i(x_i) in double; n = the number accepted
//   2. the last distribution by id, into `residual`: on a rejection (n < k) max(0, p_n − q_n) in double,
//      over a total summed by thread 0 in token order, each value / total rounded to float (every thread),
//      or p_n itself if that total is 0; all accepted: p_k
//   3. its positive entries sorted by rank on those floats; thread 0 draws with u_k (never u_n).
__global__ void SpeculativeVerifyKernel(const float* draft_probs, const float* target_probs,
                                        const std::int32_t* draft_tokens, const double* uniforms,
                                        std::int32_t* accepted, std::int32_t* tokens, float* residual,
                                        std::int32_t* order, int k, int vocab) {
  __shared__ int n_shared;
  __shared__ double total_shared;
  const std::int64_t row = blockIdx.x;
  auto q = [&](int i) { return draft_probs + (row * k + i) * vocab; };
  auto p = [&](int i) { return target_probs + (row * (k + 1) + i) * vocab; };
  const std::int32_t* x = draft_tokens + row * k;
  const double* u = uniforms + row * (k + 1);
  std::int32_t* out_tokens = tokens + row * (k + 1);
  float* last = residual + row * vocab;
  std::int32_t* sorted = order + row * vocab;
  if (threadIdx.x == 0) {
    int n = 0;
    while (n < k && u[n] * static_cast<double>(q(n)[x[n]]) < static_cast<double>(p(n)[x[n]])) {
      out_tokens[n] = x[n];
      ++n;
    }
    accepted[row] = n;
    double total = 0.0;
    if (n < k)
      for (int t = 0; t < vocab; ++t)
        total += fmax(0.0, static_cast<double>(p(n)[t]) - static_cast<double>(q(n)[t]));
    n_shared = n;
    total_shared = total;
  }
  __syncthreads();
  const int n = n_shared;
  const double total = total_shared;
  const bool residual_mass = n < k && total > 0.0;
  for (int t = threadIdx.x; t < vocab; t += kThreads) {
    if (residual_mass) {
      const double mass = fmax(0.0, static_cast<double>(p(n)[t]) - static_cast<double>(q(n)[t]));
      last[t] = mass > 0.0 ? static_cast<float>(mass / total) : 0.0f;
    } else {
      last[t] = p(n)[t];  // all accepted (n = k): p_k; a residual of total 0: p_n
    }
  }
  __syncthreads();
  SortByRank(last, vocab, sorted);
  if (threadIdx.x != 0) return;
  int count = 0;
  for (int t = 0; t < vocab; ++t) count += last[t] > 0.0f;
  out_tokens[n] = DrawWithUniform(
      sorted, count, [&](std::int32_t t) { return last[t]; }, u[k]);
  for (int i = n + 1; i <= k; ++i) out_tokens[i] = -1;
}

}  // namespace

void Sample(const SamplingConfig& config, const float* logits, const double* uniforms, std::int32_t* tokens,
            double* weights, std::int32_t* order, int rows, int vocab) {
  if (rows <= 0 || vocab <= 0) return;
  SampleKernel<<<static_cast<unsigned>(rows), kThreads>>>(config, logits, uniforms, tokens, weights, order,
                                                          vocab);
  CheckLaunch("Sample");
}

void SpeculativeVerify(const float* draft_probs, const float* target_probs, const std::int32_t* draft_tokens,
                       const double* uniforms, std::int32_t* accepted, std::int32_t* tokens, float* residual,
                       std::int32_t* order, int rows, int k, int vocab) {
  if (rows <= 0 || vocab <= 0) return;
  SpeculativeVerifyKernel<<<static_cast<unsigned>(rows), kThreads>>>(
      draft_probs, target_probs, draft_tokens, uniforms, accepted, tokens, residual, order, k, vocab);
  CheckLaunch("SpeculativeVerify");
}

}  // namespace plumb::cuda
