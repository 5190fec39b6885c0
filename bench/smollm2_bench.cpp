// The default model, SmolLM2-135M-Instruct Q4_1 (scripts/fetch-model): one decode step and a 64-token
// prefill at 1..N threads, a batched decode step (Model::Step) of 1..16 sequences, and the tokenizer on
// ~35 KB of English.
//   build/smollm2_bench --benchmark_min_time=2
// Counters: tok/s; for decode also the weight bytes read per second (ModelWeights::BytesReadPerDecodeStep:
// every matrix once, the tied Q8_0 embedding whole, as the LM head); for the tokenizer, text bytes/s.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "plumb/engine/text_model.h"
#include "plumb/kernels/kernels.h"

namespace {

const std::string kPath = std::string(PLUMB_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

plumb::TextModel* SmolLm2(benchmark::State& state) {
  static std::unique_ptr<plumb::TextModel> loaded;
  if (!loaded && std::filesystem::exists(kPath))
    loaded = std::make_unique<plumb::TextModel>(plumb::TextModel::Load(kPath));
  if (!loaded)
    state.SkipWithError("models/SmolLM2-135M-Instruct.Q4_1.gguf is missing: run scripts/fetch-model");
  return loaded.get();
}

std::vector<int> Prompt(int n) {
  std::vector<int> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = 100 + 37 * i;
  return ids;
}

void BM_SmolLm2DecodeStep(benchmark::State& state) {
  plumb::TextModel* m = SmolLm2(state);
  if (m == nullptr) return;
  plumb::kernels::SetNumThreads(static_cast<int>(state.range(0)));
  plumb::ContiguousKvCache cache = m->model.NewKvCache(256);
  m->model.Prefill(Prompt(64), cache);
  for (auto _ : state) {
    cache.set_length(64);  // every step decodes at position 64
    benchmark::DoNotOptimize(m->model.Decode(42, cache).data());
  }
  state.counters["tok/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["weight_B/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * m->model.weights().BytesReadPerDecodeStep(),
      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SmolLm2DecodeStep)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

// One Model::Step decoding B sequences at position 64 (state.range(0) = B; range(1) = 1: batch_invariant,
// GemvBatch; 0: the default, a BLAS GEMM over the B rows). tok/s counts every sequence's token.
void BM_SmolLm2StepDecode(benchmark::State& state) {
  plumb::TextModel* m = SmolLm2(state);
  if (m == nullptr) return;
  plumb::kernels::SetNumThreads(1);
  const int batch = static_cast<int>(state.range(0));
  std::vector<plumb::ContiguousKvCache> caches;
  for (int i = 0; i < batch; ++i) {
    caches.push_back(m->model.NewKvCache(128));
    m->model.Prefill(Prompt(64), caches.back());
  }
  const int token = 42;
  std::vector<plumb::SequenceChunk> chunks;
  for (plumb::ContiguousKvCache& cache : caches) chunks.push_back({&cache, std::span(&token, 1)});
  const plumb::StepOptions options{.batch_invariant = state.range(1) != 0};
  for (auto _ : state) {
    for (plumb::ContiguousKvCache& cache : caches) cache.set_length(64);  // every step decodes at 64
    benchmark::DoNotOptimize(m->model.Step(chunks, options).data());
  }
  state.counters["tok/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * batch, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SmolLm2StepDecode)
    ->ArgsProduct({{1, 4, 16}, {0, 1}})
    ->ArgNames({"batch", "invariant"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Speculative decoding's verification step (docs/speculative.md): one sequence's k + 1 tokens at position
// 64 in one Model::Step, batch-invariant, every row's logits (state.range(0) = k; k = 0 is a plain decode
// step through the same path), at 2 threads. Its time over k = 0's is what a target step costs in units of
// decode steps, the denominator of the expected speedup: near 1 while decode stays bandwidth-bound.
void BM_SmolLm2VerifyStep(benchmark::State& state) {
  plumb::TextModel* m = SmolLm2(state);
  if (m == nullptr) return;
  plumb::kernels::SetNumThreads(2);
  plumb::ContiguousKvCache cache = m->model.NewKvCache(256);
  m->model.Prefill(Prompt(64), cache);
  const std::vector<int> tokens = Prompt(static_cast<int>(state.range(0)) + 1);
  const plumb::SequenceChunk chunk{&cache, tokens, /*all_logits=*/true};
  for (auto _ : state) {
    cache.set_length(64);
    benchmark::DoNotOptimize(m->model.Step({&chunk, 1}, {.batch_invariant = true}).data());
  }
  state.counters["rows/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * tokens.size(),
                                                benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SmolLm2VerifyStep)
    ->DenseRange(0, 8, 2)
    ->ArgName("k")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_SmolLm2Prefill64(benchmark::State& state) {
  plumb::TextModel* m = SmolLm2(state);
  if (m == nullptr) return;
  plumb::kernels::SetNumThreads(static_cast<int>(state.range(0)));
  plumb::ContiguousKvCache cache = m->model.NewKvCache(256);
  const std::vector<int> prompt = Prompt(64);
  for (auto _ : state) {
    cache.set_length(0);
    benchmark::DoNotOptimize(m->model.Prefill(prompt, cache).data());
  }
  state.counters["tok/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * 64, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SmolLm2Prefill64)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_TokenizeGpl3(benchmark::State& state) {
  plumb::TextModel* m = SmolLm2(state);
  if (m == nullptr) return;
  std::ifstream file(std::string(PLUMB_SOURCE_DIR) + "/fixtures/tokenizer/gpl-3.txt", std::ios::binary);
  std::ostringstream text;
  text << file.rdbuf();
  const std::string s = text.str();
  for (auto _ : state) benchmark::DoNotOptimize(m->tokenizer->Encode(s, false, false).data());
  state.counters["text_B/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * s.size(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_TokenizeGpl3)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
