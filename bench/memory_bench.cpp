// The host's memory read bandwidth: a streaming read (sum of floats) of a buffer far larger than the
// last-level cache, at 1..N OpenMP threads. GEMV figures are quoted against this (memory-bandwidth
// utilisation, MBU).
//   build/memory_bench --benchmark_min_time=0.5
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstddef>
#include <vector>

namespace {

constexpr std::size_t kBufferBytes = std::size_t{1} << 30;  // 1 GiB: ≫ any LLC, so every read comes from DRAM

// Sums [begin, end) into 16 independent lanes (vectorized; the order is irrelevant here). Inlined into a
// baseline x86-64 (SSE2) and an AVX2 caller, picked at run time: one core's read rate depends on load width.
[[gnu::always_inline]] inline float SumLanes(const float* data, std::ptrdiff_t begin, std::ptrdiff_t end) {
  float lane[16] = {};
  for (std::ptrdiff_t i = begin; i < end; i += 16) {
    for (int j = 0; j < 16; ++j) lane[j] += data[i + j];
  }
  float total = 0.0f;
  for (float v : lane) total += v;
  return total;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx2"))) float SumSliceAvx2(const float* data, std::ptrdiff_t begin,
                                                   std::ptrdiff_t end) {
  return SumLanes(data, begin, end);
}
#endif

float SumSlice(const float* data, std::ptrdiff_t begin, std::ptrdiff_t end) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return SumSliceAvx2(data, begin, end);
#endif
  return SumLanes(data, begin, end);
}

const std::vector<float>& Buffer() {
  static const std::vector<float> buffer(kBufferBytes / sizeof(float), 1.0f);  // touched, so really mapped
  return buffer;
}

void BM_StreamRead(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const std::vector<float>& buffer = Buffer();
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(buffer.size());
  const float* data = buffer.data();
  for (auto _ : state) {
    float total = 0.0f;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
      const int t = omp_get_thread_num();
      const int count = omp_get_num_threads();
      total += SumSlice(data, n / 16 * t / count * 16, n / 16 * (t + 1) / count * 16);
    }
    benchmark::DoNotOptimize(total);
  }
  state.counters["read_B/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kBufferBytes, benchmark::Counter::kIsRate);
}
// 1, 2, 4, ... threads, and all cores.
void ThreadCounts(benchmark::internal::Benchmark* b) {
  const int cores = omp_get_num_procs();
  for (int t = 1; t < cores; t *= 2) b->Arg(t);
  b->Arg(cores);
}
BENCHMARK(BM_StreamRead)->Apply(ThreadCounts)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
