// The thread pool's rule for running regions on the caller alone after a stall (src/kernels/thread_pool.cpp
// measures the stalls and the regions' times; this decides what follows), apart from any clock so that it is
// tested region by region.
#pragma once

#include <algorithm>

namespace plumb::kernels {

// A shrink is measured in the caller's time, not in regions: after a stall, regions at the default thread
// count run on the caller alone until they have taken kMinShrinkMicros of it. A stall within kSoonMicros of
// full-width work after the last shrink says the host is still busy: the next shrink is twice the last, up to
// kMaxShrinkMicros (a host that stays busy stays on one thread, retrying now and then). A later stall is an
// idle host's rare hiccup (a preempted vCPU, a page fault): the shortest shrink again.
// Why time: a decode region takes tens of microseconds, a prefill's GEMM region milliseconds. The rule
// counted 64 regions (about 3 ms of decode at 1B sizes), which in a prefill sent six layers' GEMMs to one
// thread after a single hiccup: 512-token prefills at 2 threads ran 15% slower in the runs that had one
// (docs/performance.md). In time, a stall costs a prefill one region alone at most.
// (An earlier rule doubled on every stall and forgot only after 4096 clean regions: an idle 2-vCPU host
// stalls every thousand regions or so, so 2 threads ran 60% of their regions on one.)
class StallBackoff {
 public:
  static constexpr double kMinShrinkMicros = 4000, kMaxShrinkMicros = 256000, kSoonMicros = 3000;

  // Whether the next region, at the default thread count, runs on the caller alone.
  bool NextRegionShrunk() const { return alone_left_ > 0; }

  // After a region run on the caller alone, which took `micros`.
  void FinishedAlone(double micros) {
    alone_left_ -= micros;
    if (alone_left_ <= 0) clean_micros_ = 0;
  }

  // After a full-width region, which took `micros`: whether its caller was held up by a thread that did not
  // run.
  void Finished(double micros, bool stalled) {
    if (!stalled) {
      clean_micros_ += micros;
      return;
    }
    shrink_micros_ =
        clean_micros_ < kSoonMicros ? std::min(2 * shrink_micros_, kMaxShrinkMicros) : kMinShrinkMicros;
    alone_left_ = shrink_micros_;
  }

 private:
  // The caller-alone time left in the current shrink, the last shrink's length, and the full-width time
  // since the last shrink ended (none before the first: a stall then is not soon).
  double alone_left_ = 0, shrink_micros_ = kMinShrinkMicros, clean_micros_ = kSoonMicros;
};

}  // namespace plumb::kernels
