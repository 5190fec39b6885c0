// Token sampling; the definition of the distribution is documented in include/plumb/sample/sampler.h.
#include "plumb/sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "plumb/core/error.h"

namespace plumb {
namespace {

// A token with its unnormalised softmax weight exp((l - l_max) / T); the most probable token has 1.
struct Weighted {
  int token;
  double weight;
};

// Descending weight, ties by ascending token id: the order of the candidate list.
bool ComesBefore(const Weighted& a, const Weighted& b) {
  return a.weight > b.weight || (a.weight == b.weight && a.token < b.token);
}

// Index of the largest logit (lowest index on ties). Rejects empty logits, NaN and all -inf.
int CheckedArgmax(std::span<const float> logits) {
  if (logits.empty()) {
    throw MakeError("logits are empty");
  }
  if (logits.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw MakeError("too many logits for int token ids: ", logits.size());
  }
  int best = 0;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) {
      throw MakeError("logits contain NaN at token ", i);
    }
    if (logits[i] > logits[best]) {
      best = static_cast<int>(i);
    }
  }
  if (logits[best] == -std::numeric_limits<float>::infinity()) {
    throw MakeError("all ", logits.size(), " logits are -inf: nothing can be sampled");
  }
  return best;
}

// Softmax weights at temperature T > 0 for the tokens whose weight is not 0, in token order.
std::vector<Weighted> SoftmaxWeights(std::span<const float> logits, double temperature, float max_logit) {
  std::vector<Weighted> weights;
  weights.reserve(logits.size());
  if (std::isinf(max_logit)) {
    // Some logit is +inf: in the limit the +inf tokens share all the mass.
    for (std::size_t i = 0; i < logits.size(); ++i) {
      if (logits[i] == max_logit) {
        weights.push_back({static_cast<int>(i), 1.0});
      }
    }
    return weights;
  }
  const double max = max_logit;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const double weight = std::exp((static_cast<double>(logits[i]) - max) / temperature);
    if (weight > 0.0) {  // -inf logits and underflow drop out here
      weights.push_back({static_cast<int>(i), weight});
    }
  }
  return weights;
}

// Cuts sorted `kept` after the first prefix whose weight reaches `target` (keeps all if none does).
void TruncateToMass(std::vector<Weighted>& kept, double target) {
  double cumulative = 0.0;
  for (std::size_t i = 0; i < kept.size(); ++i) {
    cumulative += kept[i].weight;
    if (cumulative >= target) {
      kept.resize(i + 1);
      return;
    }
  }
}

// Same result as std::sort followed by TruncateToMass, without sorting the whole vocabulary when the
// nucleus is small (the usual case): partial-sorts growing chunks (256, then 4x each time) from the
// front of what is left, until the prefix reaches `target`. ComesBefore is a strict total order (token ids
// are distinct), so the chunks line up exactly with the fully sorted order.
void SortUntilMass(std::vector<Weighted>& kept, double target) {
  double cumulative = 0.0;
  std::size_t sorted_end = 0;  // kept[0, sorted_end) is in final order
  std::size_t chunk = 256;
  while (sorted_end < kept.size()) {
    const auto first = kept.begin() + static_cast<std::ptrdiff_t>(sorted_end);
    const std::size_t chunk_end = std::min(kept.size(), sorted_end + chunk);
    const auto last = kept.begin() + static_cast<std::ptrdiff_t>(chunk_end);
    std::partial_sort(first, last, kept.end(), ComesBefore);
    for (std::size_t i = sorted_end; i < chunk_end; ++i) {
      cumulative += kept[i].weight;
      if (cumulative >= target) {
        kept.resize(i + 1);
        return;
      }
    }
    sorted_end = chunk_end;
    chunk *= 4;
  }
}

}  // namespace

void ValidateSamplingParams(const SamplingParams& params) {
  if (!std::isfinite(params.temperature) || params.temperature < 0.0f) {
    throw MakeError("temperature must be a finite number >= 0 (0 = greedy), got ", params.temperature);
  }
  if (params.top_k < 0) {
    throw MakeError("top_k must be >= 0 (0 = off), got ", params.top_k);
  }
  if (!(params.top_p > 0.0f && params.top_p <= 1.0f)) {  // also rejects NaN
    throw MakeError("top_p must be in (0, 1] (1 = off), got ", params.top_p);
  }
  if (!(params.min_p >= 0.0f && params.min_p <= 1.0f)) {
    throw MakeError("min_p must be in [0, 1] (0 = off), got ", params.min_p);
  }
}

std::vector<Candidate> CandidateDistribution(std::span<const float> logits, const SamplingParams& params) {
  ValidateSamplingParams(params);
  const int best = CheckedArgmax(logits);
  if (params.temperature == 0.0f) {
    return {Candidate{best, 1.0f}};
  }

  // 1. Softmax weights (unnormalised; the normalisation cancels in every step below).
  std::vector<Weighted> kept = SoftmaxWeights(logits, params.temperature, logits[best]);
  bool sorted = false;

  // 2. top-k: a partial sort brings the k most probable to the front, in order. O(V log k), and close
  // to a single pass over V for small k (few elements beat the heap's current k-th).
  if (params.top_k > 0 && static_cast<std::size_t>(params.top_k) < kept.size()) {
    const auto kth = kept.begin() + params.top_k;
    std::partial_sort(kept.begin(), kth, kept.end(), ComesBefore);
    kept.erase(kth, kept.end());
    sorted = true;
  }

  // Mass of the top-k survivors: top-p measures cumulative mass relative to this.
  double top_k_mass = 0.0;
  double max_weight = 0.0;
  for (const Weighted& w : kept) {
    top_k_mass += w.weight;
    max_weight = std::max(max_weight, w.weight);
  }

  // 4, applied early. min-p keeps a set defined by a threshold, which is a prefix of the sorted order,
  // and the final set is the shorter of the top-p and min-p prefixes. Dropping the min-p losers before
  // sorting therefore changes nothing, as long as top-p still divides by the pre-min-p mass (it does:
  // top_k_mass), and it saves sorting the long tail of the vocabulary.
  if (params.min_p > 0.0f) {
    const double threshold = (params.min_p - kSamplingBoundaryTolerance) * max_weight;
    std::erase_if(kept, [threshold](const Weighted& w) { return w.weight < threshold; });
  }

  // 3. top-p: the shortest prefix whose mass reaches top_p (of the top-k mass), then sorted order.
  if (params.top_p < 1.0f) {
    const double target = (params.top_p - kSamplingBoundaryTolerance) * top_k_mass;
    if (sorted) {
      TruncateToMass(kept, target);
    } else {
      SortUntilMass(kept, target);
    }
  } else if (!sorted) {
    std::sort(kept.begin(), kept.end(), ComesBefore);
  }

  // 5. Renormalise.
  double kept_mass = 0.0;
  for (const Weighted& w : kept) {
    kept_mass += w.weight;
  }
  std::vector<Candidate> candidates;
  candidates.reserve(kept.size());
  for (const Weighted& w : kept) {
    candidates.push_back({w.token, static_cast<float>(w.weight / kept_mass)});
  }
  return candidates;
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
  ValidateSamplingParams(params_);
}

double Sampler::NextUniform() {
  // The top 53 bits of one 64-bit output, scaled by 2^-53: exactly representable, in [0, 1).
  return static_cast<double>(rng_() >> 11) * 0x1p-53;
}

int Sampler::Sample(std::span<const float> logits) {
  if (params_.temperature == 0.0f) {
    return CheckedArgmax(logits);
  }
  const std::vector<Candidate> candidates = CandidateDistribution(logits, params_);
  return SampleWithUniform(candidates, NextUniform());
}

int Sampler::SampleWithUniform(std::span<const Candidate> candidates, double u) {
  if (candidates.empty()) {
    throw MakeError("cannot sample from an empty candidate list");
  }
  if (!(u >= 0.0 && u < 1.0)) {
    throw MakeError("uniform draw must be in [0, 1), got ", u);
  }
  double cumulative = 0.0;
  const Candidate* last_positive = nullptr;
  for (const Candidate& c : candidates) {
    cumulative += c.prob;
    if (c.prob > 0.0f) {
      last_positive = &c;
    }
    if (cumulative > u) {
      return c.token;
    }
  }
  // Rounding left the total at or below u: the last candidate that can be drawn at all.
  if (last_positive == nullptr) {
    throw MakeError("cannot sample: no candidate has positive probability");
  }
  return last_positive->token;
}

}  // namespace plumb
