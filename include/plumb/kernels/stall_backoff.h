// The thread pool's rule for running regions on the caller alone after a stall (src/kernels/thread_pool.cpp
// measures the stalls; this decides what follows), apart from any clock so that it is tested region by region.
#pragma once

#include <algorithm>
#include <cstdint>

namespace plumb::kernels {

// A stall within kMinShrunkRegions full-width regions of the last one says the host is still busy: the next
// shrink is twice the last, up to kMaxShrunkRegions (a host that stays busy stays on one thread, retrying now
// and then). A later stall is an idle host's rare hiccup (a preempted vCPU, a page fault): the shortest shrink
// again. (The first rule doubled on every stall and forgot only after 4096 clean regions: at 1B sizes an idle
// 2-vCPU host stalls every thousand regions or so, so the shrink grew to 4096 and 2 threads ran 60% of their
// regions on one: docs/performance.md.)
class StallBackoff {
 public:
  static constexpr std::uint64_t kMinShrunkRegions = 64, kMaxShrunkRegions = 4096;

  // Counts a region; true when, at the default thread count, it runs on the caller alone.
  bool NextRegionShrunk() { return ++regions_ < shrunk_until_; }

  // After a full-width region: whether its caller was held up by a thread that did not run.
  void Finished(bool stalled) {
    if (!stalled) {
      ++clean_regions_;
      return;
    }
    shrink_length_ = clean_regions_ < kMinShrunkRegions ? std::min(2 * shrink_length_, kMaxShrunkRegions)
                                                        : kMinShrunkRegions;
    shrunk_until_ = regions_ + shrink_length_;
    clean_regions_ = 0;
  }

 private:
  // The regions counted, the end of the current shrink, the next shrink's length and the regions run at full
  // width since the last stall.
  std::uint64_t regions_ = 0, shrunk_until_ = 0, shrink_length_ = kMinShrunkRegions, clean_regions_ = 0;
};

}  // namespace plumb::kernels
