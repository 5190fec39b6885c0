// Probes of the host the roofline is drawn against: how fast this machine streams memory and how fast it
// multiplies and adds. Decode at batch 1
// reads every weight once per token, so its speed limit is bytes per token ÷ this bandwidth; benchmarks and
// `plumb bench` quote their GB/s against it (memory-bandwidth utilisation, MBU).
#pragma once

#include <cstddef>

namespace plumb::roofline {

// Σ data[begin, end) in 16 independent lanes (order irrelevant: this is a load-rate probe, not arithmetic).
// Uses 256-bit loads where the CPU has AVX2, since one core's read rate depends on its load width.
// end − begin must be a multiple of 16.
float StreamSum(const float* data, std::ptrdiff_t begin, std::ptrdiff_t end);

// The buffer the probe streams: `bytes` of floats (1 GiB by default, ≫ any last-level cache), allocated and
// touched once per size, so repeated probes measure DRAM and not page faults.
const float* ProbeBuffer(std::size_t bytes);

// One streaming read of ProbeBuffer(bytes) by `threads` threads of the kernels' pool, each its own contiguous
// slice. Returns the sum (so that the read cannot be optimised away).
float StreamReadOnce(int threads, std::size_t bytes);

// Read bandwidth in bytes per second: the best of `repetitions` StreamReadOnce runs at `threads` threads.
double MeasureReadBandwidth(int threads, std::size_t bytes = std::size_t{1} << 30, int repetitions = 5);

// The host's FP32 arithmetic ceiling: FLOP/s of fused multiply-adds (2 FLOPs per lane each).
struct PeakFlops {
  double flops_per_second = 0;
  const char* isa = "scalar";  // "avx512", "avx2" (with FMA) or "scalar" (separate multiply and add)
};

// Each of `threads` threads of the kernels' pool runs `iterations` rounds of 12 independent FMA chains on the
// widest vectors the CPU has (12 chains hide the 4-cycle FMA latency on two FMA ports with room to spare). A
// thread's rate is its FLOPs over its own CPU time, so time the OS gave to other processes does not count;
// the result is the sum over the threads (they run side by side on their cores), the best of `repetitions`
// runs after a warm-up. Scalar code (no AVX2+FMA) counts a multiply and an add as 2 FLOPs.
PeakFlops MeasurePeakFlops(int threads, long long iterations = 1 << 21, int repetitions = 5);

}  // namespace plumb::roofline
