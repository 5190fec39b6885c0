// OpenBLAS sgemv / sgemm beside plain loops, for FP32 row-major weights W [n, k] as a linear layer
// stores them:
//   GEMV (one token):  y[n]    = W · x[k]            cblas_sgemv(RowMajor, NoTrans, n, k, ...)
//   GEMM (a batch):    Y[m, n] = X[m, k] · Wᵀ        cblas_sgemm(RowMajor, NoTrans, Trans, m, n, k, ...)
// Counters: GEMV reports weight_bytes (n·k·4 bytes of W read per call, as a rate: GEMV is bound by
// memory bandwidth); GEMM reports FLOP (2·m·n·k per call, as a rate). Rates are per wall-clock second
// (UseRealTime): the default, CPU time of the calling thread, would not see OpenBLAS's worker threads.
//
// How to run (after `cmake --build <build> --target blas_bench`):
//   <build>/blas_bench                                  # all cores
//   <build>/blas_bench --threads=1                      # one thread for OpenBLAS and plumb alike
//   PLUMB_BLAS_THREADS=2 <build>/blas_bench             # the same through the environment
//   <build>/blas_bench --benchmark_min_time=0.05 --benchmark_filter=Sgemv
// --threads=N wins over PLUMB_BLAS_THREADS; the count in effect is printed in the context header as
// threads. The plain loops are single-threaded whatever the setting, and each plain benchmark
// checks its result against OpenBLAS once after timing (a mismatch marks that benchmark as an error).
// The largest plain GEMM (m=512, k=n=1536, 2.4 GFLOP) takes a second or two per iteration.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "plumb/kernels/kernels.h"

namespace {

// The thread count every benchmark runs with (--threads / PLUMB_BLAS_THREADS; default: all cores). Each
// benchmark sets it itself, because plumb's kernels keep OpenBLAS single-threaded inside OpenMP's pool
// (src/kernels/kernels.cpp) while the OpenBLAS benchmarks give OpenBLAS all the threads.
int g_threads = 0;

std::vector<float> RandomVector(std::size_t size, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(size);
  for (float& v : values) {
    v = uniform(rng);
  }
  return values;
}

// y[n] = W[n, k] · x[k]
void PlainSgemv(const float* w, const float* x, float* y, int n, int k) {
  for (int i = 0; i < n; ++i) {
    const float* row = w + static_cast<std::size_t>(i) * k;
    float sum = 0.0f;
    for (int j = 0; j < k; ++j) {
      sum += row[j] * x[j];
    }
    y[i] = sum;
  }
}

// Y[m, n] = X[m, k] · W[n, k]ᵀ
void PlainSgemm(const float* x, const float* w, float* y, int m, int n, int k) {
  for (int r = 0; r < m; ++r) {
    const float* x_row = x + static_cast<std::size_t>(r) * k;
    for (int i = 0; i < n; ++i) {
      const float* w_row = w + static_cast<std::size_t>(i) * k;
      float sum = 0.0f;
      for (int j = 0; j < k; ++j) {
        sum += x_row[j] * w_row[j];
      }
      y[static_cast<std::size_t>(r) * n + i] = sum;
    }
  }
}

void BlasSgemv(const float* w, const float* x, float* y, int n, int k) {
  cblas_sgemv(CblasRowMajor, CblasNoTrans, n, k, 1.0f, w, k, x, 1, 0.0f, y, 1);
}

void BlasSgemm(const float* x, const float* w, float* y, int m, int n, int k) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, k, w, k, 0.0f, y, n);
}

// Flags a plain-loop result that disagrees with OpenBLAS. Both accumulate in float over k terms of
// size <= 1, so a tolerance of 1e-4 · k on the absolute difference is generous but catches real bugs.
void CheckAgainst(benchmark::State& state, const std::vector<float>& got, const std::vector<float>& want,
                  int k) {
  float worst = 0.0f;
  for (std::size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::abs(got[i] - want[i]));
  }
  if (!(worst <= 1e-4f * static_cast<float>(k))) {
    state.SkipWithError(("plain loop disagrees with OpenBLAS by " + std::to_string(worst)).c_str());
  }
}

void SetGemvCounters(benchmark::State& state, int n, int k) {
  const double weight_bytes = static_cast<double>(n) * k * sizeof(float);
  state.counters["weight_bytes"] =
      benchmark::Counter(weight_bytes * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void SetGemmCounters(benchmark::State& state, int m, int n, int k) {
  const double flop = 2.0 * m * n * k;
  state.counters["FLOP"] =
      benchmark::Counter(flop * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// The three ways of computing one op, each as (W, x or X, y) → y, W stored [n][k] as a linear layer does.
enum class Impl { kOpenBlas, kPlumb, kPlain };

void UseThreads(Impl impl) {
  if (impl == Impl::kPlumb) {
    plumb::kernels::SetNumThreads(g_threads);  // OpenMP pool, OpenBLAS single-threaded inside it
  } else {
    openblas_set_num_threads(g_threads);  // OpenBLAS's own pool (the plain loops use one thread)
  }
}

// Arguments: {n, k}. Times y = W·x; every implementation but OpenBLAS is then checked against OpenBLAS.
void BM_Sgemv(benchmark::State& state, Impl impl) {
  UseThreads(impl);
  const int n = static_cast<int>(state.range(0));
  const int k = static_cast<int>(state.range(1));
  const plumb::MatrixF32 w{n, k, RandomVector(static_cast<std::size_t>(n) * k, 1)};
  const std::vector<float> x = RandomVector(k, 2);
  std::vector<float> y(n);
  for ([[maybe_unused]] auto _ : state) {
    switch (impl) {
      case Impl::kOpenBlas:
        BlasSgemv(w.values.data(), x.data(), y.data(), n, k);
        break;
      case Impl::kPlumb:
        plumb::kernels::Gemv(w, x.data(), y.data());
        break;
      case Impl::kPlain:
        PlainSgemv(w.values.data(), x.data(), y.data(), n, k);
        break;
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  SetGemvCounters(state, n, k);
  if (impl != Impl::kOpenBlas) {
    std::vector<float> reference(n);
    openblas_set_num_threads(g_threads);
    BlasSgemv(w.values.data(), x.data(), reference.data(), n, k);
    CheckAgainst(state, y, reference, k);
  }
}

// Arguments: {m, k = n}. Times Y = X·Wᵀ; checked against OpenBLAS like BM_Sgemv.
void BM_Sgemm(benchmark::State& state, Impl impl) {
  UseThreads(impl);
  const int m = static_cast<int>(state.range(0));
  const int n = static_cast<int>(state.range(1));
  const int k = n;
  const plumb::MatrixF32 w{n, k, RandomVector(static_cast<std::size_t>(n) * k, 1)};
  const std::vector<float> x = RandomVector(static_cast<std::size_t>(m) * k, 2);
  std::vector<float> y(static_cast<std::size_t>(m) * n);
  for ([[maybe_unused]] auto _ : state) {
    switch (impl) {
      case Impl::kOpenBlas:
        BlasSgemm(x.data(), w.values.data(), y.data(), m, n, k);
        break;
      case Impl::kPlumb:
        plumb::kernels::Gemm(x.data(), m, w, y.data());
        break;
      case Impl::kPlain:
        PlainSgemm(x.data(), w.values.data(), y.data(), m, n, k);
        break;
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  SetGemmCounters(state, m, n, k);
  if (impl != Impl::kOpenBlas) {
    std::vector<float> reference(y.size());
    openblas_set_num_threads(g_threads);
    BlasSgemm(x.data(), w.values.data(), reference.data(), m, n, k);
    CheckAgainst(state, y, reference, k);
  }
}

void GemvShapes(benchmark::internal::Benchmark* b) {
  // The last two exceed the 36 MiB L3 of the reference host (64 MiB and 224 MiB of weights): DRAM-bound.
  b->ArgNames({"n", "k"})->Args({576, 576})->Args({1536, 576})->Args({4096, 4096})->Args({14336, 4096});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

void GemmShapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"m", "kn"})->ArgsProduct({{16, 128, 512}, {576, 1536}});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

// Names: BM_Sgemv/OpenBlas/n:576/k:576, BM_Sgemm/Plumb/m:128/kn:576, ...
BENCHMARK_CAPTURE(BM_Sgemv, OpenBlas, Impl::kOpenBlas)->Apply(GemvShapes);
BENCHMARK_CAPTURE(BM_Sgemv, Plumb, Impl::kPlumb)->Apply(GemvShapes);
BENCHMARK_CAPTURE(BM_Sgemv, Plain, Impl::kPlain)->Apply(GemvShapes);
BENCHMARK_CAPTURE(BM_Sgemm, OpenBlas, Impl::kOpenBlas)->Apply(GemmShapes);
BENCHMARK_CAPTURE(BM_Sgemm, Plumb, Impl::kPlumb)->Apply(GemmShapes);
BENCHMARK_CAPTURE(BM_Sgemm, Plain, Impl::kPlain)->Apply(GemmShapes);

// A positive thread count, or 0 with a message on stderr.
int ParseThreads(std::string_view text, std::string_view source) {
  const std::string copy(text);
  char* end = nullptr;
  const long value = std::strtol(copy.c_str(), &end, 10);
  if (copy.empty() || *end != '\0' || value < 1 || value > 1024) {
    std::fprintf(stderr, "blas_bench: %.*s must be a thread count in [1, 1024], got '%s'\n",
                 static_cast<int>(source.size()), source.data(), copy.c_str());
    return 0;
  }
  return static_cast<int>(value);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = -1;  // -1: all cores
  if (const char* env = std::getenv("PLUMB_BLAS_THREADS"); env != nullptr && *env != '\0') {
    threads = ParseThreads(env, "PLUMB_BLAS_THREADS");
    if (threads == 0) {
      return 2;
    }
  }
  // Take --threads=N out of argv before Google Benchmark sees (and rejects) it.
  constexpr std::string_view kThreadsFlag = "--threads=";
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (i > 0 && arg.starts_with(kThreadsFlag)) {
      threads = ParseThreads(arg.substr(kThreadsFlag.size()), "--threads");
      if (threads == 0) {
        return 2;
      }
    } else {
      args.push_back(argv[i]);
    }
  }
  g_threads = threads > 0 ? threads : omp_get_num_procs();
  benchmark::AddCustomContext("threads", std::to_string(g_threads));
  benchmark::AddCustomContext("openblas_config", openblas_get_config());

  int bench_argc = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&bench_argc, args.data());
  if (benchmark::ReportUnrecognizedArguments(bench_argc, args.data())) {
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
