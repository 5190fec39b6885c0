// Names of the kernels and activation points a forward pass reports (model/forward_observer.h).
#include "plumb/model/forward_observer.h"

namespace plumb {

std::string_view ForwardKernelName(ForwardKernel kernel) {
  switch (kernel) {
    case ForwardKernel::kEmbedding:
      return "embedding";
    case ForwardKernel::kAttnNorm:
      return "attn_norm";
    case ForwardKernel::kQuantize:
      return "quantize";
    case ForwardKernel::kQProj:
      return "q_proj";
    case ForwardKernel::kKProj:
      return "k_proj";
    case ForwardKernel::kVProj:
      return "v_proj";
    case ForwardKernel::kQkNorm:
      return "qk_norm";
    case ForwardKernel::kRope:
      return "rope";
    case ForwardKernel::kKvWrite:
      return "kv_write";
    case ForwardKernel::kAttention:
      return "attention";
    case ForwardKernel::kWindowAttention:
      return "window_attention";
    case ForwardKernel::kOProj:
      return "o_proj";
    case ForwardKernel::kPostAttnNorm:
      return "post_attn_norm";
    case ForwardKernel::kMlpNorm:
      return "mlp_norm";
    case ForwardKernel::kGateProj:
      return "gate_proj";
    case ForwardKernel::kUpProj:
      return "up_proj";
    case ForwardKernel::kSwiGlu:
      return "swiglu";
    case ForwardKernel::kGeGlu:
      return "geglu";
    case ForwardKernel::kDownProj:
      return "down_proj";
    case ForwardKernel::kPostMlpNorm:
      return "post_mlp_norm";
    case ForwardKernel::kFinalNorm:
      return "final_norm";
    case ForwardKernel::kLmHead:
      return "lm_head";
  }
  return "unknown";
}

std::string_view ActivationPointName(ActivationPoint point) {
  switch (point) {
    case ActivationPoint::kLayerInput:
      return "layer_input";
    case ActivationPoint::kAfterAttention:
      return "after_attention";
    case ActivationPoint::kAfterMlp:
      return "after_mlp";
    case ActivationPoint::kFinalNorm:
      return "final_norm";
    case ActivationPoint::kNewKeys:
      return "new_keys";
    case ActivationPoint::kNewValues:
      return "new_values";
  }
  return "unknown";
}

}  // namespace plumb
