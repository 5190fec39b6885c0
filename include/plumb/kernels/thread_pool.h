// plumb's one thread pool: every parallel kernel runs on it (kernels::SetNumThreads sets its size).
//
// Why not OpenMP's: a decode step is a couple of hundred short parallel regions (microseconds to tens of
// microseconds each), so a worker must be awake when the next one comes, which OpenMP's runtimes do by
// spinning; but a thread that spins while the thread it waits for has been descheduled by another busy
// process holds a core that thread needs.
// Measured on 2 cores with `yes > /dev/null` beside a 2-thread decode of SmolLM2: libgomp's default spin gave
// 21–23% of the idle rate; OMP_WAIT_POLICY=passive kept 46% under load but ran at 31% of the idle rate when
// idle (docs/performance.md). This pool waits in three stages: a short busy spin (the next region is usually
// microseconds away), then sched_yield (a descheduled peer or another process gets the core), then sleep on a
// condition variable once the pool has been idle for a while (kIdleSleepMicros). And a region that a peer
// held up by losing its core makes the next regions run on the caller alone for a while, longer while such
// stalls keep coming (src/kernels/thread_pool.cpp states the rule): on a busy host one running thread beats
// two that wait for each other.
//
// Every parallel entry point splits work statically (StaticShare) or hands out items one at a time
// (ParallelForDynamic); which thread computes an item never changes a result's bits, so the pool is free to
// run a region's shares in any order or, nested inside another region, on the calling thread alone.
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

namespace plumb::kernels {

// The processors this process may run on (its affinity mask, as `taskset` or a container sets it): the
// pool's default size, and what a kernel may size its work by where the thread count must not matter.
int ProcessorCount();

// Sets the pool's thread count (the caller plus n − 1 workers); n <= 0: the machine's processors. Not while a
// region runs.
void SetPoolThreads(int n);
int PoolThreads();

// Runs body(t, threads) for t = 0 .. threads − 1, t = 0 on the calling thread and the others on the pool's
// workers, and returns when all have finished. threads <= 0: PoolThreads(); more than the pool has grows it.
// Called from inside a region, or with threads = 1, it runs body(0, 1) inline. Calls from several
// application threads at once take turns.
void RunOnThreads(int threads, void (*body)(void* context, int t, int threads), void* context);

template <class Body>  // Body: void(int t, int threads)
void RunParallel(Body&& body, int threads = 0) {
  RunOnThreads(
      threads, [](void* context, int t, int n) { (*static_cast<Body*>(context))(t, n); },
      const_cast<void*>(static_cast<const void*>(&body)));
}

// [begin, end) of thread t's static, contiguous share of n items among `threads`.
inline std::pair<std::int64_t, std::int64_t> StaticShare(std::int64_t n, int t, int threads) {
  return {n * t / threads, n * (t + 1) / threads};
}

// body(begin, end) over each thread's StaticShare of n items; one thread when n < min_parallel.
template <class Body>  // Body: void(std::int64_t begin, std::int64_t end)
void ParallelFor(std::int64_t n, Body&& body, std::int64_t min_parallel = 2) {
  if (n <= 0) return;
  if (n < min_parallel) {
    body(std::int64_t{0}, n);
    return;
  }
  RunParallel([&](int t, int threads) {
    const auto [begin, end] = StaticShare(n, t, threads);
    if (end > begin) body(begin, end);
  });
}

// Hands out the n items one at a time to whichever thread asks next: body(item, t), for uneven work; one
// thread when n < min_parallel. Returns when every item is done.
template <class Body>  // Body: void(std::int64_t item, int t)
void ParallelForDynamic(std::int64_t n, Body&& body, std::int64_t min_parallel = 2) {
  if (n <= 0) return;
  if (n < min_parallel) {
    for (std::int64_t item = 0; item < n; ++item) body(item, 0);
    return;
  }
  std::atomic<std::int64_t> next{0};
  RunParallel([&](int t, int) {
    for (std::int64_t item = next.fetch_add(1, std::memory_order_relaxed); item < n;
         item = next.fetch_add(1, std::memory_order_relaxed))
      body(item, t);
  });
}

}  // namespace plumb::kernels
