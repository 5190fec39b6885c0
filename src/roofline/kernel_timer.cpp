// KernelTimer (include/plumb/roofline/kernel_timer.h).
#include "plumb/roofline/kernel_timer.h"

#include <algorithm>

namespace plumb::roofline {

void KernelTimer::OnPassBegin(ForwardPhase /*phase*/, int rows) {
  ++passes_;
  rows_ = rows;
}

void KernelTimer::OnKernel(const KernelTiming& timing) {
  const auto k = static_cast<std::size_t>(timing.kernel);
  total_[k] += timing.seconds;
  if (timing.layer == layer_ || timing.layer < 0) layer_total_[k] += timing.seconds;
}

void KernelTimer::Reset() {
  passes_ = 0;
  rows_ = 0;
  total_.fill(0);
  layer_total_.fill(0);
}

double KernelTimer::Seconds(ForwardKernel kernel) const {
  return passes_ ? total_[static_cast<std::size_t>(kernel)] / passes_ : 0;
}

double KernelTimer::LayerSeconds(ForwardKernel kernel) const {
  return passes_ ? layer_total_[static_cast<std::size_t>(kernel)] / passes_ : 0;
}

double KernelTimer::PassSeconds() const {
  double total = 0;
  for (int k = 0; k < kForwardKernelCount; ++k) total += Seconds(static_cast<ForwardKernel>(k));
  return total;
}

void KernelTimer::KeepFastest(const KernelTimer& other) {
  if (other.passes_ == 0) return;
  if (passes_ == 0) {
    *this = other;
    return;
  }
  // Both become means per pass (one pass's worth) before the minimum.
  for (std::size_t k = 0; k < total_.size(); ++k) {
    total_[k] = std::min(total_[k] / passes_, other.total_[k] / other.passes_);
    layer_total_[k] = std::min(layer_total_[k] / passes_, other.layer_total_[k] / other.passes_);
  }
  passes_ = 1;
  rows_ = other.rows_;
}

}  // namespace plumb::roofline
