// The mixture-of-experts routers (include/plumb/model/moe_router.h; docs/models.md "Mixture-of-experts
// routing").
#include "plumb/model/moe_router.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/kernels/scalar.h"

namespace plumb {

namespace {

constexpr MoeRouting kRoutings[] = {MoeRouting::kSoftmaxTopK, MoeRouting::kTopKSoftmax,
                                    MoeRouting::kSigmoidGroupTopK};

// The indices of the `k` largest score[i] for i in `candidates`, descending, equal scores by ascending index
// (a stable sort of ascending indices by descending score).
std::vector<int> TopK(const std::vector<float>& score, std::vector<int> candidates, int k) {
  std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) { return score[a] > score[b]; });
  candidates.resize(static_cast<std::size_t>(k));
  return candidates;
}

std::vector<int> Range(int n) {
  std::vector<int> all(static_cast<std::size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  return all;
}

// ids[i] = top[i] and weights[i] = value[top[i]] for the k selected experts.
void TakeSelected(const std::vector<int>& top, const std::vector<float>& value, int k, std::int32_t* ids,
                  float* weights) {
  for (int i = 0; i < k; ++i) {
    ids[i] = top[static_cast<std::size_t>(i)];
    weights[i] = value[static_cast<std::size_t>(ids[i])];
  }
}

// w[i] / Σ w, the sum left to right in selection order.
void Renormalize(float* w, int k) {
  float sum = 0.0f;
  for (int i = 0; i < k; ++i) sum += w[i];
  for (int i = 0; i < k; ++i) w[i] = w[i] / sum;
}

}  // namespace

const char* MoeRoutingName(MoeRouting routing) {
  switch (routing) {
    case MoeRouting::kSoftmaxTopK:
      return "softmax_topk";
    case MoeRouting::kTopKSoftmax:
      return "topk_softmax";
    case MoeRouting::kSigmoidGroupTopK:
      return "sigmoid_group_topk";
  }
  return "?";
}

MoeRouting ParseMoeRouting(std::string_view name) {
  std::string known;
  for (const MoeRouting r : kRoutings) {
    if (name == MoeRoutingName(r)) return r;
    known += (known.empty() ? "" : ", ") + std::string(MoeRoutingName(r));
  }
  throw MakeError("unknown MoE routing '", name, "' (expected one of: ", known, ")");
}

void CheckMoeRouterParams(const MoeRouterParams& p) {
  if (p.experts < 1) throw MakeError("MoE router: experts = ", p.experts, " (at least 1)");
  if (p.top_k < 1 || p.top_k > p.experts) {
    throw MakeError("MoE router: top_k = ", p.top_k, " outside [1, experts = ", p.experts, "]");
  }
  if (p.routing != MoeRouting::kSigmoidGroupTopK) return;
  if (p.groups < 1 || p.experts % p.groups != 0 || p.experts / p.groups < 2) {
    throw MakeError("MoE router: groups = ", p.groups, " must divide experts = ", p.experts,
                    " into groups of at least 2 (a group is scored by its two largest scores)");
  }
  if (p.top_groups < 1 || p.top_groups > p.groups) {
    throw MakeError("MoE router: top_groups = ", p.top_groups, " outside [1, groups = ", p.groups, "]");
  }
  if (p.top_groups * (p.experts / p.groups) < p.top_k) {
    throw MakeError("MoE router: top_groups = ", p.top_groups, " groups of ", p.experts / p.groups,
                    " experts hold fewer than top_k = ", p.top_k);
  }
}

void RouteToken(const MoeRouterParams& p, const float* logits, const float* bias, std::int32_t* ids,
                float* weights) {
  const int k = p.top_k;
  std::vector<float> score(logits, logits + p.experts);
  switch (p.routing) {
    case MoeRouting::kSoftmaxTopK: {
      kernels::scalar::Softmax(score.data(), p.experts);
      TakeSelected(TopK(score, Range(p.experts), k), score, k, ids, weights);
      if (p.renormalize) Renormalize(weights, k);
      return;
    }
    case MoeRouting::kTopKSoftmax: {
      TakeSelected(TopK(score, Range(p.experts), k), score, k, ids, weights);
      kernels::scalar::Softmax(weights, k);
      return;
    }
    case MoeRouting::kSigmoidGroupTopK: {
      std::vector<float> choice(score.size());
      for (int e = 0; e < p.experts; ++e) {
        score[static_cast<std::size_t>(e)] = 1.0f / (1.0f + kernels::scalar::Exp(-logits[e]));
        choice[static_cast<std::size_t>(e)] = score[static_cast<std::size_t>(e)] + bias[e];
      }
      const int per_group = p.experts / p.groups;
      std::vector<float> group_score(static_cast<std::size_t>(p.groups));
      for (int g = 0; g < p.groups; ++g) {
        std::vector<int> members = Range(per_group);
        for (int& m : members) m += g * per_group;
        const std::vector<int> best = TopK(choice, members, 2);
        group_score[static_cast<std::size_t>(g)] =
            choice[static_cast<std::size_t>(best[0])] + choice[static_cast<std::size_t>(best[1])];
      }
      std::vector<int> candidates;
      for (const int g : TopK(group_score, Range(p.groups), p.top_groups)) {
        for (int m = 0; m < per_group; ++m) candidates.push_back(g * per_group + m);
      }
      std::sort(candidates.begin(), candidates.end());  // ties by expert id, whatever the groups' order
      TakeSelected(TopK(choice, candidates, k), score, k, ids, weights);  // s, without the bias
      if (p.renormalize) Renormalize(weights, k);
      for (int i = 0; i < k; ++i) weights[i] = weights[i] * p.scaling;
      return;
    }
  }
}

}  // namespace plumb
