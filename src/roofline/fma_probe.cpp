// The peak FP32 FMA probe (include/plumb/roofline/host_probe.h).

#include <algorithm>
#include <ctime>
#include <vector>

#include "plumb/kernels/isa.h"
#include "plumb/kernels/thread_pool.h"
#include "plumb/roofline/host_probe.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

namespace plumb::roofline {
namespace {

constexpr int kChains = 12;

// Each chain computes acc = acc · m + a with m just below 1, so values stay finite for any iteration count;
// the chains are independent, so a core can keep as many FMAs in flight as it has ports × latency.
float ScalarChains(long long iterations) {
  float acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = static_cast<float>(j);
  const float m = 0.999999f, a = 1e-6f;
  for (long long i = 0; i < iterations; ++i) {
    for (float& x : acc) x = x * m + a;
  }
  float total = 0;
  for (float x : acc) total += x;
  return total;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx2,fma"))) float Avx2Chains(long long iterations) {
  __m256 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm256_set1_ps(static_cast<float>(j));
  const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-6f);
  for (long long i = 0; i < iterations; ++i) {
    for (__m256& x : acc) x = _mm256_fmadd_ps(x, m, a);
  }
  __m256 total = acc[0];
  for (int j = 1; j < kChains; ++j) total = _mm256_add_ps(total, acc[j]);
  float lanes[8];
  _mm256_storeu_ps(lanes, total);
  return lanes[0] + lanes[7];
}

// Broadcasts by a load: GCC 12's _mm512_set1_ps trips -Wuninitialized inside its own header.
__attribute__((target("avx512f"))) __m512 Splat512(float value) {
  float lanes[16];
  for (float& x : lanes) x = value;
  return _mm512_loadu_ps(lanes);
}

__attribute__((target("avx512f"))) float Avx512Chains(long long iterations) {
  __m512 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = Splat512(static_cast<float>(j));
  const __m512 m = Splat512(0.999999f), a = Splat512(1e-6f);
  for (long long i = 0; i < iterations; ++i) {
    for (__m512& x : acc) x = _mm512_fmadd_ps(x, m, a);
  }
  __m512 total = acc[0];
  for (int j = 1; j < kChains; ++j) total = _mm512_add_ps(total, acc[j]);
  float lanes[16];
  _mm512_storeu_ps(lanes, total);
  return lanes[0] + lanes[15];
}
#endif

struct Isa {
  const char* name;
  int lanes;
  float (*run)(long long);
};

Isa WidestIsa() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // The instructions each chain needs, from the features isa.cpp read once (not the kernels' ISA levels:
  // the probe measures the widest FMA the core has, whatever PLUMB_ISA says).
  const kernels::CpuFeatures& cpu = kernels::HostCpuFeatures();
  if (cpu.avx512f) return {"avx512", 16, Avx512Chains};
  if (cpu.avx2 && cpu.fma) return {"avx2", 8, Avx2Chains};
#endif
  return {"scalar", 1, ScalarChains};
}

}  // namespace

PeakFlops MeasurePeakFlops(int threads, long long iterations, int repetitions) {
  const Isa isa = WidestIsa();
  iterations = std::max(1LL, iterations);
  const double flops_per_run = 2.0 * isa.lanes * kChains * static_cast<double>(iterations);
  // Each thread's rate is its FLOPs over its own CPU time, and the peak is their sum: a thread the OS
  // preempts for another process does not count the time it waited, so a busy machine still shows what its
  // cores do when they run (wall time would show the share this process got).
  auto run_all = [&](double& rate) {
    std::vector<float> totals(static_cast<std::size_t>(std::max(threads, 1)), 0.0f);
    std::vector<double> rates(totals.size(), 0.0);
    kernels::RunParallel(
        [&](int t, int) {
          timespec start{}, end{};
          clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
          totals[static_cast<std::size_t>(t)] = isa.run(iterations);
          clock_gettime(CLOCK_THREAD_CPUTIME_ID, &end);
          const double seconds = static_cast<double>(end.tv_sec - start.tv_sec) +
                                 1e-9 * static_cast<double>(end.tv_nsec - start.tv_nsec);
          rates[static_cast<std::size_t>(t)] = flops_per_run / std::max(seconds, 1e-9);
        },
        threads);
    float total = 0;
    rate = 0;
    for (std::size_t t = 0; t < totals.size(); ++t) {
      total += totals[t];
      rate += rates[t];
    }
    return total;
  };
  double rate = 0;
  volatile float sink = run_all(rate);  // warm-up: thread start, clocks up
  double best = 0;
  for (int r = 0; r < std::max(1, repetitions); ++r) {
    sink = run_all(rate);
    best = std::max(best, rate);
  }
  (void)sink;
  return {best, isa.name};
}

}  // namespace plumb::roofline
