// A mixture-of-experts router: which experts a token goes to, and with what weights. The three rules the
// MoE models people run use, each as that model's reference code computes it, in FP32 with plumb's Exp
// (kernels/scalar.h). docs/models.md "Mixture-of-experts routing" gives the definitions; docs/fixtures.md
// "moe_route" the fixture cases that hold an engine to them.
//
//   kSoftmaxTopK      Mixtral, Qwen2-MoE, Qwen3-MoE: p = softmax(logits); the top_k experts by p; weights
//                     p (renormalize: p / Σ of the selected p, as Mixtral and Qwen3's norm_topk_prob do)
//   kTopKSoftmax      gpt-oss: the top_k experts by logit; weights softmax over the selected logits
//   kSigmoidGroupTopK DeepSeek-V3: s = sigmoid(logits); c = s + bias (the correction bias); groups of
//                     experts/groups experts scored by the sum of their two largest c; the top_groups groups
//                     by score; among their experts the top_k by c; weights s (renormalize: s / Σ s), times
//                     `scaling` (routed_scaling_factor)
//
// Ties are defined: of equal selection scores the lower expert (or group) id comes first, in selection and
// in the output order. Outputs are in selection order: descending score, then ascending id.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace plumb {

enum class MoeRouting : std::uint8_t { kSoftmaxTopK, kTopKSoftmax, kSigmoidGroupTopK };

const char* MoeRoutingName(MoeRouting routing);     // "softmax_topk", "topk_softmax", "sigmoid_group_topk"
MoeRouting ParseMoeRouting(std::string_view name);  // throws plumb::Error naming the choices

struct MoeRouterParams {
  MoeRouting routing = MoeRouting::kSoftmaxTopK;
  int experts = 0;
  int top_k = 0;
  bool renormalize = true;  // kSoftmaxTopK and kSigmoidGroupTopK; kTopKSoftmax's weights sum to 1 already
  int groups = 1;           // kSigmoidGroupTopK: experts split into `groups` equal groups ...
  int top_groups = 1;       // ... of which the best `top_groups` are searched
  float scaling = 1.0f;     // kSigmoidGroupTopK: routed_scaling_factor
};

// Throws plumb::Error naming the parameter for a bad combination (top_k outside [1, experts], groups not
// dividing experts, top_groups outside [1, groups], fewer than top_k experts in top_groups groups, or a
// group of one expert, which has no two largest scores).
void CheckMoeRouterParams(const MoeRouterParams& p);

// Routes one token: ids[top_k] and weights[top_k] from logits[experts] (and bias[experts] for
// kSigmoidGroupTopK, else ignored and may be null). Params must have passed CheckMoeRouterParams.
void RouteToken(const MoeRouterParams& p, const float* logits, const float* bias, std::int32_t* ids,
                float* weights);

}  // namespace plumb
