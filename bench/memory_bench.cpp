// The host's memory read bandwidth: a streaming read (sum of floats) of a buffer far larger than the
// last-level cache, at 1..N OpenMP threads. GEMV figures are quoted against this (memory-bandwidth
// utilisation, MBU).
//   build/memory_bench --benchmark_min_time=0.5
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstddef>

#include "plumb/roofline/host_probe.h"

namespace {

constexpr std::size_t kBufferBytes = std::size_t{1} << 30;  // 1 GiB: ≫ any LLC, so every read comes from DRAM

void BM_StreamRead(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  plumb::roofline::ProbeBuffer(kBufferBytes);  // allocated and touched before timing
  for (auto _ : state) benchmark::DoNotOptimize(plumb::roofline::StreamReadOnce(threads, kBufferBytes));
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
