// One decode step and one prefill of the tiny fixture model (fixtures/tiny-llama), at 1..N threads.
//   build/model_bench --benchmark_min_time=0.2
// Counters: tokens/s, and for decode the weight bytes read per second (ModelWeights::BytesReadPerDecodeStep).
// The tiny model fits in cache, so this measures per-step overhead, not memory bandwidth.
#include <benchmark/benchmark.h>

#include "plumb/kernels/kernels.h"
#include "plumb/model/model.h"

namespace {

plumb::Model& TinyModel() {
  static plumb::Model model = plumb::Model::Load(std::string(PLUMB_SOURCE_DIR) + "/fixtures/tiny-llama");
  return model;
}

const std::vector<int> kPrompt = {1, 17, 245, 88, 3, 190, 56, 301, 12, 77, 150};

void BM_DecodeStep(benchmark::State& state) {
  plumb::kernels::SetNumThreads(static_cast<int>(state.range(0)));
  plumb::Model& model = TinyModel();
  plumb::ContiguousKvCache cache = model.NewKvCache();
  model.Prefill(kPrompt, cache);
  const int context = cache.length();
  for (auto _ : state) {
    cache.set_length(context);  // every step decodes at the same position
    benchmark::DoNotOptimize(model.Decode(42, cache).data());
  }
  state.counters["tok/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["weight_B/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * static_cast<double>(model.weights().BytesReadPerDecodeStep()),
      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_DecodeStep)->Arg(1)->Arg(2)->UseRealTime();

void BM_Prefill(benchmark::State& state) {
  plumb::kernels::SetNumThreads(static_cast<int>(state.range(0)));
  plumb::Model& model = TinyModel();
  for (auto _ : state) {
    plumb::ContiguousKvCache cache = model.NewKvCache(static_cast<int>(kPrompt.size()));
    benchmark::DoNotOptimize(model.Prefill(kPrompt, cache).data());
  }
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(state.iterations() * kPrompt.size()),
                                               benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Prefill)->Arg(1)->Arg(2)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
