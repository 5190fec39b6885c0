// The projections of one batched decode step of SmolLM2-135M, and the host's FP32 arithmetic peak they are
// measured against (docs/performance.md, "Batched decode and the paged KV cache").
//
//   FmaPeak/threads:<n>     register-only loop of independent 8-lane FMAs (AVX2 + FMA): the host's FP32
//                           FMA rate, GFLOP/s (2 per lane per FMA), per thread count
//   MulAddPeak/threads:<n>  the same with a separate multiply and add (the definition's order, no FMA)
//   Step/<op>/B:<m>/threads:<n>   the 30 layers' projections (q 576², k and v 192 × 576, o 576², gate and
//       up 1536 × 576, down 576 × 1536; Q4_1) and the tied LM head (49152 × 576, Q8_0) of one decode step of
//       m sequences, random weights of the model's types and shapes. <op>: gemm (kernels::Gemm, the default
//       Step), gemv_batch (kernels::GemvBatch, --deterministic), gemv (m separate kernels::Gemv, the batch-1
//       kernel repeated). Counters: GFLOP/s (2·m·134.5 M per step); the time is per step. (Every benchmark
//       has the same counters, as --benchmark_format=csv requires.)
//
//   cmake --build build --target batch_gemm_bench
//   build/batch_gemm_bench --benchmark_filter='threads:1'    # one process per thread count
//   build/batch_gemm_bench --benchmark_filter='threads:2'
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "plumb/formats/dtype.h"
#include "plumb/formats/gguf_blocks.h"
#include "plumb/kernels/kernels.h"
#include "random_blocks.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

using plumb::GgmlType;
using plumb::WeightMatrix;

#if defined(__x86_64__)
constexpr int kChains = 12;

// kChains independent accumulator chains of 8-lane FMAs (or of a multiply into a temporary and an add into
// the accumulator, the definition's order), written in assembly: compiled from intrinsics the accumulators
// were kept in memory and the loop measured the stores. Zen 4 and Skylake start 2 FMAs per cycle with a
// 4-cycle latency (Zen 4: 2 multiplies and 2 adds, on separate pipes), so 12 chains keep every pipe busy.
template <bool kFused>
void PeakLoop(std::int64_t iterations) {
#define PLUMB_ON12(X) X("0") X("1") X("2") X("3") X("4") X("5") X("6") X("7") X("8") X("9") X("10") X("11")
#define PLUMB_FMA(r) "vfmadd231ps %%ymm12, %%ymm13, %%ymm" r "\n\t"
#define PLUMB_MULADD(r) "vmulps %%ymm12, %%ymm13, %%ymm14\n\tvaddps %%ymm14, %%ymm" r ", %%ymm" r "\n\t"
  if constexpr (kFused) {
    __asm__ volatile(
        "vxorps %%xmm12, %%xmm12, %%xmm12\n\t"
        "vxorps %%xmm13, %%xmm13, %%xmm13\n\t"
        "1:\n\t" PLUMB_ON12(PLUMB_FMA) "dec %0\n\tjnz 1b"
        : "+r"(iterations)
        :
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
          "xmm12", "xmm13", "cc");
  } else {
    __asm__ volatile(
        "vxorps %%xmm12, %%xmm12, %%xmm12\n\t"
        "vxorps %%xmm13, %%xmm13, %%xmm13\n\t"
        "1:\n\t" PLUMB_ON12(PLUMB_MULADD) "dec %0\n\tjnz 1b"
        : "+r"(iterations)
        :
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
          "xmm12", "xmm13", "xmm14", "cc");
  }
#undef PLUMB_ON12
#undef PLUMB_FMA
#undef PLUMB_MULADD
}

template <bool kFused>
void BM_Peak(benchmark::State& state) {
  constexpr std::int64_t kIterations = 1 << 22;
  const int threads = static_cast<int>(state.range(0));
  for (auto _ : state) {
#pragma omp parallel num_threads(threads)
    PeakLoop<kFused>(kIterations);
  }
  // One FMA (or one mul and one add) on 8 lanes is 16 FLOP.
  const double flop = 16.0 * kChains * kIterations * static_cast<double>(state.range(0));
  state.counters["GFLOP/s"] = benchmark::Counter(flop * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Peak<true>)->Name("FmaPeak")->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_Peak<false>)->Name("MulAddPeak")->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime();
#endif

using plumb::bench::RandomBlocks;

struct StepWeights {
  std::vector<WeightMatrix> matrices;  // 30 × {q, k, v, o, gate, up, down}, then the LM head
  double flop_per_token = 0;
  StepWeights() {
    const int shapes[7][2] = {{576, 576},  {192, 576},  {192, 576}, {576, 576},
                              {1536, 576}, {1536, 576}, {576, 1536}};
    for (int layer = 0; layer < 30; ++layer) {
      for (const auto& s : shapes) {
        matrices.push_back(
            RandomBlocks(GgmlType::Q4_1, s[0], s[1], static_cast<std::uint32_t>(matrices.size())));
      }
    }
    matrices.push_back(RandomBlocks(GgmlType::Q8_0, 49152, 576, 99));
    for (const WeightMatrix& w : matrices) flop_per_token += 2.0 * w.rows * w.cols;
  }
};

enum Op { kGemm, kGemvBatch, kGemv };

void BM_Step(benchmark::State& state) {
  static const StepWeights weights;
  const Op op = static_cast<Op>(state.range(0));
  const int m = static_cast<int>(state.range(1));
  plumb::kernels::SetNumThreads(static_cast<int>(state.range(2)));
  std::vector<float> X(static_cast<std::size_t>(m) * 1536), Y(static_cast<std::size_t>(m) * 49152);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& x : X) x = normal(rng);
  for (auto _ : state) {
    for (const WeightMatrix& w : weights.matrices) {
      if (op == kGemm) {
        plumb::kernels::Gemm(X.data(), m, w, Y.data());
      } else if (op == kGemvBatch) {
        plumb::kernels::GemvBatch(w, X.data(), m, Y.data());
      } else {
        for (int i = 0; i < m; ++i) {
          plumb::kernels::Gemv(w, X.data() + static_cast<std::size_t>(i) * w.cols,
                               Y.data() + static_cast<std::size_t>(i) * w.rows);
        }
      }
    }
    benchmark::DoNotOptimize(Y.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(weights.flop_per_token * m * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void StepArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"op", "B", "threads"});
  for (int threads : {1, 2}) {
    for (int op : {kGemm, kGemvBatch, kGemv}) {
      for (int m : {1, 2, 4, 8, 16, 32, 64}) {
        if (op == kGemv && m > 4) continue;  // m GEMVs: the line is straight, a few points show it
        b->Args({op, m, threads});
      }
    }
  }
}
BENCHMARK(BM_Step)->Apply(StepArgs)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
