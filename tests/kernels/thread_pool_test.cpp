// The thread pool (kernels/thread_pool.h): every thread index runs exactly once per region, at any size;
// static shares and handed-out items cover their ranges exactly once; a region inside a region and regions
// from several application threads at once complete; resizing between regions works.
#include "plumb/kernels/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "plumb/kernels/kernels.h"
#include "plumb/kernels/stall_backoff.h"

namespace plumb::kernels {
namespace {

// Restores the pool's size a test changed.
class ThreadPoolTest : public ::testing::Test {
 protected:
  ThreadPoolTest() : saved_(PoolThreads()) {}
  ~ThreadPoolTest() override { SetPoolThreads(saved_); }

 private:
  int saved_;
};

TEST_F(ThreadPoolTest, EveryThreadIndexRunsOncePerRegion) {
  for (int size : {1, 2, 3, 5}) {
    SetPoolThreads(size);
    EXPECT_EQ(PoolThreads(), size);
    for (int region = 0; region < 200; ++region) {
      std::vector<std::atomic<int>> runs(static_cast<std::size_t>(size));
      std::atomic<int> seen_threads{0};
      RunParallel([&](int t, int threads) {
        runs[static_cast<std::size_t>(t)].fetch_add(1);
        seen_threads.store(threads);
      });
      // All `size` indices, or index 0 alone when the pool shrank after a stall (tests run side by side).
      const int threads = seen_threads.load();
      ASSERT_TRUE(threads == size || threads == 1) << threads;
      for (int t = 0; t < size; ++t)
        ASSERT_EQ(runs[static_cast<std::size_t>(t)].load(), t < threads ? 1 : 0) << t;
    }
  }
}

TEST_F(ThreadPoolTest, AnExplicitCountNarrowerOrWiderThanThePool) {
  SetPoolThreads(3);
  for (int threads : {1, 2, 3, 4}) {
    std::vector<std::atomic<int>> runs(static_cast<std::size_t>(threads));
    RunParallel(
        [&](int t, int n) {
          EXPECT_EQ(n, threads);
          runs[static_cast<std::size_t>(t)].fetch_add(1);
        },
        threads);
    for (int t = 0; t < threads; ++t) EXPECT_EQ(runs[static_cast<std::size_t>(t)].load(), 1) << threads;
  }
  EXPECT_EQ(PoolThreads(), 3);  // a wider explicit region grows the workers, not the default count
}

TEST_F(ThreadPoolTest, SharesAndItemsCoverTheirRangesOnce) {
  SetPoolThreads(3);
  for (std::int64_t n : {0, 1, 2, 7, 100, 1001}) {
    std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
    ParallelFor(n, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) hits[static_cast<std::size_t>(i)].fetch_add(1);
    });
    ParallelForDynamic(n, [&](std::int64_t item, int t) {
      EXPECT_GE(t, 0);
      EXPECT_LT(t, 3);
      hits[static_cast<std::size_t>(item)].fetch_add(1);
    });
    for (std::int64_t i = 0; i < n; ++i)
      ASSERT_EQ(hits[static_cast<std::size_t>(i)].load(), 2) << n << " " << i;
  }
  for (int threads : {1, 2, 3, 7}) {
    std::int64_t covered = 0;
    for (int t = 0; t < threads; ++t) {
      const auto [begin, end] = StaticShare(10, t, threads);
      EXPECT_EQ(begin, covered);
      covered = end;
    }
    EXPECT_EQ(covered, 10);
  }
}

TEST_F(ThreadPoolTest, ARegionInsideARegionRunsOnItsCaller) {
  SetPoolThreads(2);
  std::atomic<int> inner_runs{0}, outer_threads{0};
  RunParallel([&](int, int outer) {
    outer_threads.store(outer);
    RunParallel([&](int t, int threads) {
      EXPECT_EQ(t, 0);
      EXPECT_EQ(threads, 1);
      inner_runs.fetch_add(1);
    });
  });
  EXPECT_EQ(inner_runs.load(), outer_threads.load());
}

TEST_F(ThreadPoolTest, RegionsFromSeveralApplicationThreadsTakeTurns) {
  SetPoolThreads(2);
  std::atomic<long> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 3; ++c) {
    callers.emplace_back([&] {
      for (int region = 0; region < 300; ++region)
        ParallelFor(64, [&](std::int64_t begin, std::int64_t end) { total.fetch_add(end - begin); });
    });
  }
  for (std::thread& caller : callers) caller.join();
  EXPECT_EQ(total.load(), 3L * 300 * 64);
}

// Holds the calling thread for at least `micros` (a region's work, in wall time).
void BusyFor(double micros) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double, std::micro>(micros);
  while (std::chrono::steady_clock::now() < until) {
  }
}

// A region held up by a thread that did not run (here: one that sleeps 5 ms) makes the next regions at the
// default count run on the caller alone for a while, measured in the caller's time, then the pool uses all
// its threads again; an explicit count is never shrunk.
TEST_F(ThreadPoolTest, AStalledRegionShrinksTheNextOnesForAWhile) {
  SetPoolThreads(2);
  RunParallel([](int t, int) {
    if (t == 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  });
  int threads = 0;
  RunParallel([&](int, int n) { threads = n; });
  EXPECT_EQ(threads, 1);
  RunParallel(
      [&](int t, int n) {
        if (t == 0) threads = n;
      },
      2);
  EXPECT_EQ(threads, 2);
  // Each region holds the caller for >= 500 us, so the shortest shrink is over after at most
  // kMinShrinkMicros / 500 of them; the loop counts the first at full width too.
  constexpr double kRegionMicros = 500;
  const int most = static_cast<int>(StallBackoff::kMinShrinkMicros / kRegionMicros);
  int regions = 0;
  for (threads = 1; threads == 1 && regions <= most + 1; ++regions)
    RunParallel([&](int t, int n) {
      if (t == 0) {
        threads = n;
        BusyFor(kRegionMicros);
      }
    });
  EXPECT_EQ(threads, 2);
  EXPECT_LE(regions, most + 1);
}

// StallBackoff, region by region: how many regions of `micros` each run on the caller alone after a stall.
int ShrunkAfterStall(StallBackoff& b, double micros = 100) {
  b.Finished(micros, true);
  int shrunk = 0;
  for (; b.NextRegionShrunk(); ++shrunk) b.FinishedAlone(micros);
  return shrunk;
}
void CleanRegions(StallBackoff& b, int n, double micros = 100) {
  for (int i = 0; i < n; ++i) {
    EXPECT_FALSE(b.NextRegionShrunk());
    b.Finished(micros, false);
  }
}

// A stall right after a shrink ended (the host is still busy) doubles the next shrink, up to the maximum;
// one after a while of clean work (an idle host's rare hiccup) shrinks for the shortest time again, however
// long the last shrink was. (The pool's own timing is AStalledRegionShrinksTheNextOnesForAWhile's.)
TEST(StallBackoffTest, AStallSoonAfterAShrinkDoublesItAndARareOneDoesNot) {
  StallBackoff b;
  const int shortest = static_cast<int>(StallBackoff::kMinShrinkMicros / 100);  // regions of 100 us
  const int longest = static_cast<int>(StallBackoff::kMaxShrinkMicros / 100);
  const int soon = static_cast<int>(StallBackoff::kSoonMicros / 100);
  EXPECT_EQ(ShrunkAfterStall(b), shortest);  // the first stall is not soon after anything
  EXPECT_EQ(ShrunkAfterStall(b), 2 * shortest);
  EXPECT_EQ(ShrunkAfterStall(b), 4 * shortest);
  for (int i = 0; i < 8; ++i) ShrunkAfterStall(b);
  EXPECT_EQ(ShrunkAfterStall(b), longest);
  CleanRegions(b, soon - 1);  // still soon: the stall counts as the host staying busy
  EXPECT_EQ(ShrunkAfterStall(b), longest);
  CleanRegions(b, soon);
  EXPECT_EQ(ShrunkAfterStall(b), shortest);
}

// The shrink is time, not a region count: one long region (a prefill's GEMM) uses it up, where short ones
// (decode's) run alone by the dozen.
TEST(StallBackoffTest, OneLongRegionEndsAShrink) {
  StallBackoff b;
  EXPECT_EQ(ShrunkAfterStall(b, 20000), 1);
  CleanRegions(b, 1, 20000);
  EXPECT_EQ(ShrunkAfterStall(b, 50), static_cast<int>(StallBackoff::kMinShrinkMicros / 50));
}

TEST_F(ThreadPoolTest, SetNumThreadsIsThePools) {
  SetNumThreads(2);
  EXPECT_EQ(NumThreads(), 2);
  EXPECT_EQ(PoolThreads(), 2);
  SetNumThreads(0);
  EXPECT_GE(NumThreads(), 1);
}

}  // namespace
}  // namespace plumb::kernels
