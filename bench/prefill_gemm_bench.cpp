// Prefill's projection on Llama-3.2-1B's shapes, per weight type and number of prompt rows: what
// kernels::Gemm runs (the fast family's int8 panels from kInt8PanelMinRows rows, or for BF16 and F16 its BF16
// panels from kBf16PanelMinRows rows where the CPU has AVX512-BF16; the exact family's FP32 sgemm on decoded
// tiles) against the fast family's row dots repeated per row (kernels::GemvBatch: the same bits as the
// panels), which is where the panels' threshold comes from (docs/performance.md, "Prefill on int8 panels").
//
//   Gemm/<family>/<type>/rows:<m>/cols:<k>/m:<prompt rows>/threads:<n>
//       family: fast_panels (kernels::Gemm, fast family), fast_rowdots (kernels::GemvBatch, fast family),
//       exact (kernels::Gemm, exact family), bf16_tiles (the AMX-BF16 tiles on any type, the GGUF blocks
//       decoded per task: whether they would beat a quantized type's int8 panels; registered where the
//       tiles run). Counters: GFLOP/s (2·m·rows·cols per call).
//
//   cmake --build build --target prefill_gemm_bench
//   build/prefill_gemm_bench --benchmark_filter='threads:1'
//   PLUMB_AMX=0 build/prefill_gemm_bench ...   (on an AMX host: the panels on VNNI, for an A/B)
//   build/prefill_gemm_bench --benchmark_filter='(fast_panels|exact)/BF16/.*m:512'   (BF16 panels against
//       sgemm; PLUMB_BF16=0 gives the fast family's FP32 path)
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../src/kernels/bf16_panel/bf16_panel.h"
#include "plumb/formats/dtype.h"
#include "plumb/formats/gguf_blocks.h"
#include "plumb/kernels/int8_activations.h"
#include "plumb/kernels/kernels.h"
#include "random_blocks.h"

namespace {

using plumb::GgmlType;
using plumb::WeightMatrix;

using plumb::bench::RandomBlocks;

enum class Path { kPanels, kRowDots, kExact, kBf16Tiles };

// A BF16 or F16 matrix of N(0, 0.02) weights, as a checkpoint's (random bits would hold NaNs and subnormals).
WeightMatrix RandomFloats(GgmlType type, int rows, int cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<std::uint8_t> bytes(std::size_t{2} * rows * cols);
  for (std::size_t i = 0; i < bytes.size(); i += 2) {
    const float w = normal(rng);
    const std::uint16_t h = type == GgmlType::BF16 ? plumb::F32ToBF16(w) : plumb::F32ToF16(w);
    std::memcpy(&bytes[i], &h, 2);
  }
  return WeightMatrix::FromBytes(type, rows, cols, std::move(bytes));
}

void BM_Gemm(benchmark::State& state, Path path, GgmlType type) {
  const int rows = static_cast<int>(state.range(0));
  const int cols = static_cast<int>(state.range(1));
  const int m = static_cast<int>(state.range(2));
  plumb::kernels::SetNumThreads(static_cast<int>(state.range(3)));
  plumb::kernels::SetFamily(path == Path::kExact ? plumb::kernels::KernelFamily::kExact
                                                 : plumb::kernels::KernelFamily::kFast);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const WeightMatrix W = type == GgmlType::BF16 || type == GgmlType::F16 ? RandomFloats(type, rows, cols, rng)
                                                                         : RandomBlocks(type, rows, cols, 7);
  std::vector<float> X(static_cast<std::size_t>(m) * cols);
  for (float& x : X) x = normal(rng);
  std::vector<float> Y(static_cast<std::size_t>(m) * rows);
  for (auto _ : state) {
    if (path == Path::kRowDots) {
      plumb::kernels::GemvBatch(W, X.data(), m, Y.data());
    } else if (path == Path::kBf16Tiles) {
      plumb::kernels::bf16::AmxBf16Gemm()(W, X.data(), m, Y.data());
    } else {
      plumb::kernels::Gemm(X.data(), m, W, Y.data());
    }
    benchmark::DoNotOptimize(Y.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * m * rows * cols, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

void Shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "cols", "m", "threads"});
  for (int threads : {1, 2}) {
    for (int m : {4, 8, 16, 32, 64, 128, 512}) {
      b->Args({2048, 2048, m, threads});  // q_proj, o_proj
      b->Args({8192, 2048, m, threads});  // gate_proj, up_proj
      b->Args({2048, 8192, m, threads});  // down_proj
    }
  }
}

void Register() {
  for (const auto& [name, type] : {std::pair{"Q4_0", GgmlType::Q4_0}, std::pair{"Q8_0", GgmlType::Q8_0},
                                   std::pair{"Q4_K", GgmlType::Q4_K}, std::pair{"Q6_K", GgmlType::Q6_K},
                                   std::pair{"BF16", GgmlType::BF16}, std::pair{"F16", GgmlType::F16}}) {
    for (const auto& [label, path] :
         {std::pair{"fast_panels", Path::kPanels}, std::pair{"fast_rowdots", Path::kRowDots},
          std::pair{"exact", Path::kExact}, std::pair{"bf16_tiles", Path::kBf16Tiles}}) {
      if (path == Path::kBf16Tiles && !plumb::kernels::bf16::TileSumsMismatch().empty()) continue;
      benchmark::RegisterBenchmark((std::string("Gemm/") + label + "/" + name).c_str(), BM_Gemm, path, type)
          ->Apply(Shapes)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
}

const bool kRegistered = (Register(), true);

}  // namespace

BENCHMARK_MAIN();
