// The thread pool (include/plumb/kernels/thread_pool.h): persistent workers that wait for the next region by
// spinning, then yielding, then sleeping.
#include "plumb/kernels/thread_pool.h"

#include "plumb/kernels/stall_backoff.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace plumb::kernels {
namespace {

// A waiter spins for kSpinMicros (a decode's next region is usually closer than that: no system call, no
// wake-up latency), then yields the core on every check (a peer that another process pushed off its core, or
// that process itself, can run), and a worker whose pool has had no region for kIdleSleepMicros sleeps until
// the next one (an idle plumb costs no CPU).
constexpr double kSpinMicros = 50;
constexpr double kIdleSleepMicros = 2000;

// A region whose caller, done with its own share, waited for the others longer than kStallMicros and than
// twice its own share's time was held up by a thread that lost its core (on an idle host equal shares
// finish close together; a preempted thread is gone for a scheduler time slice, milliseconds). The next
// regions at the default thread count then run on the caller alone, which on a busy host is faster than
// waiting for a thread that is not running, and then the pool tries all its threads again, for how long
// StallBackoff decides. The thread count never changes a result's bits.
constexpr double kStallMicros = 500;

using Clock = std::chrono::steady_clock;

void CpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

double MicrosSince(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

// Waits until done() holds: spin, then yield. Returns false when `give_up_micros` (> 0) passed first.
template <class Done>
bool SpinThenYield(Done done, double give_up_micros) {
  const Clock::time_point start = Clock::now();
  for (int i = 0;; ++i) {
    if (done()) return true;
    if ((i & 63) != 63) {
      CpuRelax();
      continue;
    }
    const double waited = MicrosSince(start);
    if (give_up_micros > 0 && waited > give_up_micros) return false;
    if (waited > kSpinMicros) sched_yield();
  }
}

thread_local bool t_in_region = false;

class Pool {
 public:
  static Pool& Instance() {
    static Pool pool;
    return pool;
  }

  ~Pool() { Resize(0); }

  void SetThreads(int n) {
    std::lock_guard<std::mutex> dispatch(dispatch_);
    threads_ = n <= 0 ? ProcessorCount() : n;
    if (threads_ - 1 != static_cast<int>(workers_.size())) Resize(threads_ - 1);
  }
  int threads() const { return threads_; }

  void Run(int threads, void (*body)(void*, int, int), void* context) {
    const bool adaptive = threads <= 0;  // the default count shrinks under load; an explicit one never does
    if (adaptive) threads = threads_;
    if (threads <= 1 || t_in_region) {
      body(context, 0, 1);
      return;
    }
    std::lock_guard<std::mutex> dispatch(dispatch_);
    if (adaptive && backoff_.NextRegionShrunk()) {
      const Clock::time_point start = Clock::now();
      t_in_region = true;
      body(context, 0, 1);
      t_in_region = false;
      backoff_.FinishedAlone(MicrosSince(start));
      return;
    }
    if (threads - 1 > static_cast<int>(workers_.size())) Resize(threads - 1);
    job_ = {body, context, threads};
    pending_.store(threads - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_seq_cst);  // publishes job_ and pending_
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard<std::mutex> lock(sleep_);
      wake_.notify_all();
    }
    const Clock::time_point start = Clock::now();
    t_in_region = true;
    body(context, 0, threads);
    t_in_region = false;
    const Clock::time_point waiting = Clock::now();
    SpinThenYield([&] { return pending_.load(std::memory_order_acquire) == 0; }, 0);
    const double waited = MicrosSince(waiting);
    const double own_share = std::chrono::duration<double, std::micro>(waiting - start).count();
    if (adaptive) backoff_.Finished(own_share + waited, waited > kStallMicros && waited > 2 * own_share);
  }

 private:
  struct Job {
    void (*body)(void*, int, int) = nullptr;
    void* context = nullptr;
    int threads = 1;
  };

  Pool() : threads_(ProcessorCount()) { Resize(threads_ - 1); }

  // Stops every worker and starts `count` new ones (the dispatch lock held, or in the constructor).
  void Resize(int count) {
    {
      std::lock_guard<std::mutex> lock(sleep_);
      stop_.store(true);
    }
    generation_.fetch_add(1, std::memory_order_seq_cst);
    wake_.notify_all();
    for (std::thread& w : workers_) w.join();
    workers_.clear();
    stop_.store(false);
    // A worker starts from this generation, not from whatever it reads when it first runs: a region may be
    // dispatched before the new thread gets to run at all.
    const std::uint64_t start = generation_.load();
    for (int i = 0; i < count; ++i) workers_.emplace_back([this, i, start] { Work(i + 1, start); });
  }

  void Work(int t, std::uint64_t seen) {
    for (;;) {
      const auto next = [&] { return generation_.load(std::memory_order_acquire) != seen; };
      if (!SpinThenYield(next, kIdleSleepMicros)) {
        std::unique_lock<std::mutex> lock(sleep_);
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        wake_.wait(lock, [&] { return next() || stop_; });
        sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      }
      seen = generation_.load(std::memory_order_acquire);
      if (stop_.load()) return;
      const Job job = job_;
      if (t >= job.threads) continue;  // a region narrower than the pool (a probe's thread count)
      t_in_region = true;
      job.body(job.context, t, job.threads);
      t_in_region = false;
      pending_.fetch_sub(1, std::memory_order_release);
    }
  }

  std::mutex dispatch_;   // one region at a time
  StallBackoff backoff_;  // under dispatch_
  int threads_;
  std::vector<std::thread> workers_;
  Job job_;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::mutex sleep_;
  std::condition_variable wake_;
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace

int ProcessorCount() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

void SetPoolThreads(int n) {
  Pool::Instance().SetThreads(n);
}

int PoolThreads() {
  return Pool::Instance().threads();
}

void RunOnThreads(int threads, void (*body)(void* context, int t, int threads), void* context) {
  Pool::Instance().Run(threads, body, context);
}

}  // namespace plumb::kernels
