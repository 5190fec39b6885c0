// KernelTimer: a ForwardObserver (model/forward_observer.h) that adds up the wall time of every kernel over
// the passes it sees, in total and for one chosen layer: what `plumb roofline` and `plumb explain` hold
// against the cost model's bound for each kernel.
#pragma once

#include <array>

#include "plumb/model/forward_observer.h"

namespace plumb::roofline {

class KernelTimer final : public ForwardObserver {
 public:
  explicit KernelTimer(int layer = 0) : layer_(layer) {}

  void OnPassBegin(ForwardPhase phase, int rows) override;
  void OnKernel(const KernelTiming& timing) override;

  void Reset();
  int passes() const { return passes_; }
  int rows() const { return rows_; }  // of the last pass
  // Seconds of `kernel` summed over all its layers, mean per pass (0 before any pass).
  double Seconds(ForwardKernel kernel) const;
  // Seconds of `kernel` in the chosen layer (for embedding, final_norm and lm_head: theirs), mean per pass.
  double LayerSeconds(ForwardKernel kernel) const;
  // Every kernel of a pass, mean per pass.
  double PassSeconds() const;

  // Keeps, kernel by kernel, the faster of this timer's and `other`'s mean per pass: the best of several
  // repetitions of the same pass, robust against a run preempted by another process. Rows: other's.
  void KeepFastest(const KernelTimer& other);

 private:
  int layer_;
  int passes_ = 0;
  int rows_ = 0;
  std::array<double, kForwardKernelCount> total_{};        // [kernel] seconds over all passes and layers
  std::array<double, kForwardKernelCount> layer_total_{};  // [kernel] seconds over all passes, one layer
};

}  // namespace plumb::roofline
