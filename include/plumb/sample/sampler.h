// Token sampling: greedy, temperature, top-k, top-p (nucleus) and min-p, reproducible from a seed.
//
// The distribution (CandidateDistribution) is defined as follows, in this order. Temperature first,
// as vLLM and Hugging Face transformers do; the filters then run in the order of llama.cpp's default
// chain (top-k, top-p, min-p). Note that llama.cpp's default chain applies temperature *after* the
// filters, so at T != 1 its kept sets can differ from these.
//
//   1. Softmax with temperature T:  p_i = exp((l_i - l_max) / T) / sum_j exp((l_j - l_max) / T),
//      computed and accumulated in double precision. A -inf logit gets probability 0. If any logit is
//      +inf, the +inf tokens share all the mass equally (the limit of the softmax). A NaN logit is an
//      error. Tokens whose probability is exactly 0 (-inf, or underflow of exp in double) are dropped:
//      they could never be drawn.
//   2. top-k (top_k > 0): keep the top_k most probable tokens (ties broken by ascending token id).
//   3. top-p (top_p < 1): renormalise what top-k kept, then keep the shortest prefix, in descending
//      probability order, whose mass is >= top_p. So top-p measures mass within the top-k survivors.
//   4. min-p (min_p > 0): keep tokens with p >= min_p * p_max (p_max is the most probable token's p,
//      so the test does not depend on renormalisation, and the most probable token always survives).
//   5. Renormalise what is left to sum to 1.
//
// Both boundary tests in 3 and 4 are inclusive up to kSamplingBoundaryTolerance (1e-6): logits and
// the parameters arrive as float, so a probability that is "exactly" at a boundary (top_p = 0.7 over
// probabilities 0.5, 0.2, ...) is only so up to float rounding; the tolerance makes such a boundary
// count as reached instead of leaving the outcome to rounding noise.
//
// The result is sorted by descending probability, ties by ascending token id. Drawing with a uniform
// u in [0, 1) picks the first candidate whose cumulative probability exceeds u (SampleWithUniform).
//
// temperature == 0 means greedy: the argmax of the logits (lowest token id on ties), and the
// distribution is that one token with probability 1; the filters do not matter then.
//
// Random numbers: std::mt19937_64 seeded with `seed` (its output sequence is fixed by the C++
// standard), and u = (rng() >> 11) * 2^-53, one draw per non-greedy Sample() call. Deliberately not
// std::uniform_real_distribution, whose algorithm differs between standard libraries; so a seed gives
// the same tokens under libstdc++ and libc++.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace plumb {

struct SamplingParams {
  float temperature = 0.0f;  // 0 -> greedy (argmax; ties -> lowest token id)
  int top_k = 0;             // 0 -> off; keep the k most probable
  float top_p = 1.0f;        // 1 -> off; nucleus: smallest prefix (by descending prob) whose mass >= top_p
  float min_p = 0.0f;        // 0 -> off; keep tokens with p >= min_p * p_max
  std::uint64_t seed = 0;
};

// Inclusive slack on the top-p and min-p boundaries (see above).
inline constexpr double kSamplingBoundaryTolerance = 1e-6;

// Throws plumb::Error naming the parameter and its value when: temperature < 0 or not finite,
// top_k < 0, top_p not in (0, 1], min_p not in [0, 1].
void ValidateSamplingParams(const SamplingParams& params);

struct Candidate {
  int token;
  float prob;
};

// The distribution defined above. Throws plumb::Error for invalid params, empty logits, a NaN logit
// ("logits contain NaN at token i") or logits that are all -inf.
std::vector<Candidate> CandidateDistribution(std::span<const float> logits, const SamplingParams& params);

class Sampler {
 public:
  // Validates params (throws plumb::Error) and seeds the generator with params.seed.
  explicit Sampler(const SamplingParams& params);

  // Greedy when temperature == 0 (consumes no random number); otherwise exactly one uniform draw u and
  // SampleWithUniform(CandidateDistribution(logits, params), u). Cost O(V log V); O(V log k) with
  // top_k set; with min_p set only the tokens that pass min-p are sorted, and with top_p only as far as
  // the nucleus reaches (in growing chunks).
  int Sample(std::span<const float> logits);

  // The first candidate whose cumulative probability exceeds u, for u in [0, 1). If rounding leaves
  // the candidates' total below u, the last candidate. Throws plumb::Error for empty candidates or u
  // outside [0, 1). Exposed for tests and for fixtures that bring their own uniform draws.
  static int SampleWithUniform(std::span<const Candidate> candidates, double u);

  const SamplingParams& params() const { return params_; }

 private:
  double NextUniform();  // (rng_() >> 11) * 2^-53, in [0, 1)

  SamplingParams params_;
  std::mt19937_64 rng_;
};

}  // namespace plumb
