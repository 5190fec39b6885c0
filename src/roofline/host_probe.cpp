// Host memory probes (include/plumb/roofline/host_probe.h).
#include "plumb/roofline/host_probe.h"

#include "plumb/kernels/isa.h"
#include "plumb/kernels/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <vector>

namespace plumb::roofline {
namespace {

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
__attribute__((target("avx2"))) float SumLanesAvx2(const float* data, std::ptrdiff_t begin,
                                                   std::ptrdiff_t end) {
  return SumLanes(data, begin, end);
}
#endif

}  // namespace

float StreamSum(const float* data, std::ptrdiff_t begin, std::ptrdiff_t end) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (kernels::HostCpuFeatures().avx2) return SumLanesAvx2(data, begin, end);
#endif
  return SumLanes(data, begin, end);
}

const float* ProbeBuffer(std::size_t bytes) {
  static std::mutex mutex;
  static std::map<std::size_t, std::vector<float>> buffers;
  const std::lock_guard<std::mutex> lock(mutex);
  std::vector<float>& buffer = buffers[bytes];
  if (buffer.empty()) buffer.assign(bytes / sizeof(float) / 16 * 16, 1.0f);  // written, so really mapped
  return buffer.data();
}

float StreamReadOnce(int threads, std::size_t bytes) {
  const float* data = ProbeBuffer(bytes);
  const std::ptrdiff_t blocks = static_cast<std::ptrdiff_t>(bytes / sizeof(float) / 16);
  std::vector<float> partial(static_cast<std::size_t>(std::max(threads, 1)), 0.0f);
  kernels::RunParallel(
      [&](int t, int count) {
        partial[static_cast<std::size_t>(t)] =
            StreamSum(data, blocks * t / count * 16, blocks * (t + 1) / count * 16);
      },
      threads);
  float total = 0.0f;
  for (float p : partial) total += p;
  return total;
}

double MeasureReadBandwidth(int threads, std::size_t bytes, int repetitions) {
  StreamReadOnce(threads, bytes);  // warm-up: page tables, thread start
  double best = 0.0;
  for (int i = 0; i < std::max(1, repetitions); ++i) {
    const auto start = std::chrono::steady_clock::now();
    volatile float sink = StreamReadOnce(threads, bytes);
    (void)sink;
    const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
    best = std::max(best,
                    static_cast<double>(bytes / sizeof(float) / 16 * 16 * sizeof(float)) / seconds.count());
  }
  return best;
}

}  // namespace plumb::roofline
