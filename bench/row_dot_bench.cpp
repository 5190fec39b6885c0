// RowDot over every row of a GGUF weight matrix W [rows, k]: a GEMV y = W·x straight from the stored blocks,
// one thread, for each type, with the scalar definition and the AVX2 and AVX-512 variants in the same run.
//   1536 × 576:   SmolLM2-135M's MLP up/gate projection (Q4_1 in the default model), fits in L2/L3
//   49152 × 576:  its token embedding / output projection (Q8_0), tens of MB: read from DRAM
// Two loops per case: "RowDot" calls RowDot once per row (the checked, one-row entry point); "RowDots"
// hands all rows to RowDots, which runs four rows side by side. Counter weight_B/s: bytes of W read per
// second (GEMV is bandwidth-bound; compare with memory_bench's read_B/s).
//
//   cmake --build build --target row_dot_bench
//   build/row_dot_bench --benchmark_min_time=0.2
//   build/row_dot_bench --benchmark_filter='Q4_1|Q8_0'
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "plumb/formats/dtype.h"
#include "plumb/formats/gguf_blocks.h"
#include "plumb/kernels/row_dot.h"

namespace {

using plumb::GgmlType;
using plumb::kernels::Isa;

std::vector<std::uint8_t> RandomMatrix(GgmlType type, std::int64_t rows, std::int64_t k) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const std::int64_t row_bytes = plumb::GgmlRowBytes(type, k);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(rows * row_bytes));
  const plumb::GgmlTypeTraits traits = plumb::GgmlTraits(type);
  if (traits.block_elements == 1) {
    for (std::size_t i = 0; i < bytes.size(); i += traits.block_bytes) {
      const float w = uniform(rng);
      if (type == GgmlType::F32) {
        std::memcpy(&bytes[i], &w, sizeof w);
      } else {
        const std::uint16_t code = type == GgmlType::F16 ? plumb::F32ToF16(w) : plumb::F32ToBF16(w);
        std::memcpy(&bytes[i], &code, sizeof code);  // little-endian hosts only: a benchmark
      }
    }
    return bytes;
  }
  for (std::uint8_t& b : bytes) b = static_cast<std::uint8_t>(rng());
  for (std::size_t block = 0; block < bytes.size(); block += traits.block_bytes) {
    // Normal scales: a random subnormal or NaN one would send the float units down slow paths.
    for (int offset : plumb::BlockScaleOffsets(type)) {
      const std::uint16_t code = plumb::F32ToF16(0.01f * (1.5f + uniform(rng)));
      std::memcpy(&bytes[block + offset], &code, sizeof code);
    }
  }
  return bytes;
}

enum class Loop { kRowDot, kRowDots };

void BM_Gemv(benchmark::State& state, GgmlType type, std::int64_t rows, std::int64_t k, Isa isa, Loop loop) {
  if (!plumb::kernels::IsaSupported(isa)) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  plumb::kernels::SetIsa(isa);
  const std::vector<std::uint8_t> w = RandomMatrix(type, rows, k);
  const std::size_t row_bytes = static_cast<std::size_t>(plumb::GgmlRowBytes(type, k));
  std::vector<float> x(k), y(rows);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : x) v = normal(rng);
  for (auto _ : state) {
    if (loop == Loop::kRowDot) {
      for (std::int64_t r = 0; r < rows; ++r) {
        y[r] = plumb::kernels::RowDot(type, w.data() + r * row_bytes, x.data(), k);
      }
    } else {
      plumb::kernels::RowDots(type, w.data(), row_bytes, rows, x.data(), k, y.data());
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["weight_B/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * w.size(), benchmark::Counter::kIsRate);
}

}  // namespace

int main(int argc, char** argv) {
  const GgmlType types[] = {GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::F16,
                            GgmlType::BF16, GgmlType::F32,  GgmlType::Q4_K, GgmlType::Q6_K};
  const std::int64_t shapes[][2] = {{1536, 576}, {49152, 576}};
  for (const auto& shape : shapes) {
    for (GgmlType type : types) {
      // K-quants have 256-element blocks: 576 is not a multiple, so they run at k = 512.
      const std::int64_t k = plumb::GgmlTraits(type).block_elements == 256 ? 512 : shape[1];
      for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
        for (Loop loop : {Loop::kRowDot, Loop::kRowDots}) {
          const std::string name = std::string(loop == Loop::kRowDot ? "RowDot/" : "RowDots/") +
                                   std::string(plumb::GgmlTypeName(type)) + "/" + std::to_string(shape[0]) +
                                   "x" + std::to_string(k) + "/" + plumb::kernels::IsaName(isa);
          benchmark::RegisterBenchmark(name.c_str(), BM_Gemv, type, shape[0], k, isa, loop)
              ->Unit(benchmark::kMicrosecond)
              ->UseRealTime();
        }
      }
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
