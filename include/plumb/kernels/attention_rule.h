// How attention turns q·k into the score its softmax takes: the scale, and Gemma 2's soft-cap.
#pragma once

#include <cmath>

namespace plumb::kernels {

struct AttentionScoreRule {
  float scale = 0.0f;    // score = Dot(q, k) · scale; 0: 1 / sqrt(head_dim) (every family but Gemma's)
  float softcap = 0.0f;  // > 0: score = softcap · tanh(score / softcap) (scalar::SoftCap), before the mask

  float ScaleFor(int head_dim) const {
    return scale > 0.0f ? scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
  }
};

}  // namespace plumb::kernels
