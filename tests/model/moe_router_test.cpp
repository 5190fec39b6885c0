// The MoE routers (model/moe_router.h) against hand-checked tokens, ties included, and against a
// double-precision reimplementation on random logits (ids equal, weights within a few FP32 roundings).
#include "plumb/model/moe_router.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "plumb/core/error.h"

namespace plumb {
namespace {

struct Routed {
  std::vector<std::int32_t> ids;
  std::vector<float> weights;
};

Routed Route(const MoeRouterParams& p, const std::vector<float>& logits,
             const std::vector<float>& bias = {}) {
  CheckMoeRouterParams(p);
  Routed r{std::vector<std::int32_t>(static_cast<std::size_t>(p.top_k)),
           std::vector<float>(static_cast<std::size_t>(p.top_k))};
  RouteToken(p, logits.data(), bias.empty() ? nullptr : bias.data(), r.ids.data(), r.weights.data());
  return r;
}

TEST(MoeRouter, SoftmaxTopKBreaksTiesByTheLowerIdAndRenormalizes) {
  // Experts 1 and 3 tie for first (equal logits, equal probabilities): 1 first. Renormalized: 1/2 each.
  const MoeRouterParams p{MoeRouting::kSoftmaxTopK, 4, 2, true};
  const Routed r = Route(p, {1.0f, 3.0f, 2.0f, 3.0f});
  EXPECT_EQ(r.ids, (std::vector<std::int32_t>{1, 3}));
  EXPECT_EQ(r.weights, (std::vector<float>{0.5f, 0.5f}));
  // Without renormalization (Qwen2-MoE, norm_topk_prob false) the weights are the softmax's own.
  MoeRouterParams raw = p;
  raw.renormalize = false;
  const Routed q = Route(raw, {0.0f, 0.0f, std::log(2.0f), 0.0f});  // probabilities 1/5, 1/5, 2/5, 1/5
  EXPECT_EQ(q.ids, (std::vector<std::int32_t>{2, 0}));
  EXPECT_NEAR(q.weights[0], 0.4, 1e-7);
  EXPECT_NEAR(q.weights[1], 0.2, 1e-7);
}

TEST(MoeRouter, TopKSoftmaxWeighsTheSelectedLogitsAlone) {
  const MoeRouterParams p{MoeRouting::kTopKSoftmax, 5, 2, true};
  const Routed r = Route(p, {0.0f, 2.0f, -1.0f, 2.0f + std::log(3.0f), 1.0f});
  EXPECT_EQ(r.ids, (std::vector<std::int32_t>{3, 1}));
  EXPECT_NEAR(r.weights[0], 0.75, 1e-7);
  EXPECT_NEAR(r.weights[1], 0.25, 1e-7);
}

TEST(MoeRouter, SigmoidGroupTopKSearchesOnlyTheBestGroupsAndWeighsWithoutTheBias) {
  // 8 experts in 4 groups of 2; the best 2 groups are searched. Logits 0 give s = 1/2 everywhere; the bias
  // decides: group scores (sum of the two choices) 1.0 + 0.2 + 0.3 = group 1 (experts 2, 3) 1.5, group 3
  // (experts 6, 7) 1.4, group 0 1.1, group 2 1.0. Expert 4 has the largest single choice (0.5 + 0.45) but is
  // in group 2, which is not searched. Selected: 3 (0.5 + 0.3), then 6 (0.5 + 0.25). Weights: s = 1/2 each,
  // renormalized to 1/2, times the scaling 2.5.
  MoeRouterParams p{MoeRouting::kSigmoidGroupTopK, 8, 2, true, 4, 2, 2.5f};
  const std::vector<float> bias = {0.1f, 0.0f, 0.2f, 0.3f, 0.45f, -0.45f, 0.25f, 0.15f};
  const Routed r = Route(p, std::vector<float>(8, 0.0f), bias);
  EXPECT_EQ(r.ids, (std::vector<std::int32_t>{3, 6}));
  EXPECT_EQ(r.weights, (std::vector<float>{1.25f, 1.25f}));
  // A group scored by its single best expert instead would search group 2: the rule is the top-2 sum.
  p.top_groups = 4;
  EXPECT_EQ(Route(p, std::vector<float>(8, 0.0f), bias).ids, (std::vector<std::int32_t>{4, 3}));
}

// The three rules in double, written from the header's comment: sort by (score descending, id ascending).
Routed Reference(const MoeRouterParams& p, const std::vector<float>& logits, const std::vector<float>& bias) {
  const int n = p.experts, k = p.top_k;
  std::vector<double> score(logits.begin(), logits.end()), choice;
  auto top = [&](const std::vector<double>& s, std::vector<int> ids, int count) {
    std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return s[a] > s[b]; });
    ids.resize(static_cast<std::size_t>(count));
    return ids;
  };
  std::vector<int> all(static_cast<std::size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  std::vector<int> ids;
  std::vector<double> w;
  if (p.routing == MoeRouting::kSoftmaxTopK) {
    const double m = *std::max_element(score.begin(), score.end());
    double sum = 0;
    for (double& s : score) sum += (s = std::exp(s - m));
    for (double& s : score) s /= sum;
    ids = top(score, all, k);
    for (int id : ids) w.push_back(score[id]);
  } else if (p.routing == MoeRouting::kTopKSoftmax) {
    ids = top(score, all, k);
    double sum = 0;
    for (int id : ids) sum += std::exp(score[id] - score[ids[0]]);
    for (int id : ids) w.push_back(std::exp(score[id] - score[ids[0]]) / sum);
  } else {
    for (double& s : score) s = 1 / (1 + std::exp(-s));
    for (int e = 0; e < n; ++e) choice.push_back(score[e] + bias[e]);
    const int per = n / p.groups;
    std::vector<double> group(static_cast<std::size_t>(p.groups));
    for (int g = 0; g < p.groups; ++g) {
      std::vector<double> c(choice.begin() + g * per, choice.begin() + (g + 1) * per);
      std::sort(c.rbegin(), c.rend());
      group[g] = c[0] + c[1];
    }
    std::vector<int> groups(static_cast<std::size_t>(p.groups)), candidates;
    std::iota(groups.begin(), groups.end(), 0);
    for (int g : top(group, groups, p.top_groups))
      for (int m = 0; m < per; ++m) candidates.push_back(g * per + m);
    std::sort(candidates.begin(), candidates.end());
    ids = top(choice, candidates, k);
    for (int id : ids) w.push_back(score[id]);
  }
  if (p.routing != MoeRouting::kTopKSoftmax && p.renormalize) {
    const double sum = std::accumulate(w.begin(), w.end(), 0.0);
    for (double& x : w) x /= sum;
  }
  Routed r;
  r.ids.assign(ids.begin(), ids.end());
  for (double x : w)
    r.weights.push_back(
        static_cast<float>(x * (p.routing == MoeRouting::kSigmoidGroupTopK ? p.scaling : 1.0)));
  return r;
}

TEST(MoeRouter, RandomTokensMatchADoublePrecisionReimplementation) {
  const MoeRouterParams shapes[] = {
      {MoeRouting::kSoftmaxTopK, 8, 2, true},                     // Mixtral
      {MoeRouting::kSoftmaxTopK, 128, 8, true},                   // Qwen3-MoE
      {MoeRouting::kSoftmaxTopK, 60, 4, false},                   // Qwen2-MoE (norm_topk_prob false)
      {MoeRouting::kTopKSoftmax, 32, 4, true},                    // gpt-oss-20b
      {MoeRouting::kSigmoidGroupTopK, 256, 8, true, 8, 4, 2.5f},  // DeepSeek-V3
  };
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::uniform_real_distribution<float> small(-0.05f, 0.05f);
  for (const MoeRouterParams& p : shapes) {
    for (int token = 0; token < 50; ++token) {
      std::vector<float> logits(static_cast<std::size_t>(p.experts)), bias(logits.size());
      for (float& x : logits) x = normal(rng);
      for (float& b : bias) b = small(rng);
      const Routed got = Route(p, logits, bias), want = Reference(p, logits, bias);
      ASSERT_EQ(got.ids, want.ids) << MoeRoutingName(p.routing) << " token " << token;
      for (int i = 0; i < p.top_k; ++i) {
        ASSERT_NEAR(got.weights[i], want.weights[i], 4e-7 * std::max(1.0f, std::fabs(want.weights[i])))
            << MoeRoutingName(p.routing) << " token " << token << " slot " << i;
      }
    }
  }
}

TEST(MoeRouter, BadParametersAreErrorsNamingThem) {
  auto message = [](const MoeRouterParams& p) {
    try {
      CheckMoeRouterParams(p);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message({MoeRouting::kSoftmaxTopK, 8, 9, true}).find("top_k = 9"), std::string::npos);
  EXPECT_NE(message({MoeRouting::kSigmoidGroupTopK, 10, 2, true, 3, 1, 1.0f}).find("groups = 3"),
            std::string::npos);
  EXPECT_NE(message({MoeRouting::kSigmoidGroupTopK, 16, 8, true, 8, 3, 1.0f}).find("fewer than top_k"),
            std::string::npos);
  EXPECT_EQ(message({MoeRouting::kSigmoidGroupTopK, 256, 8, true, 8, 4, 2.5f}), "");
  EXPECT_THROW(ParseMoeRouting("sigmoid"), Error);
  EXPECT_EQ(ParseMoeRouting("topk_softmax"), MoeRouting::kTopKSoftmax);
}

}  // namespace
}  // namespace plumb
