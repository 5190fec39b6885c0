// Decode attention alone (kernels::CausalAttention, one query row) over a contiguous and a paged KV cache of
// SmolLM2-135M's shape (30 layers, 9 query heads, 3 KV heads, head_dim 64, f32 KV), at contexts 512 .. 8192.
// One iteration is one decode step's attention: every layer once, so the KV read (30 layers · K and V) is far
// larger than the last-level cache from context 1024 on, as in a real step. The counter KV_B/s is the KV
// bytes the step must read over its time, to set against the host's read bandwidth (memory_bench).
//   build/attention_bench --benchmark_min_time=1
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "plumb/kernels/kernels.h"
#include "plumb/kernels/kv_layer_view.h"

namespace {

constexpr int kLayers = 30;
constexpr int kHeads = 9;
constexpr int kKvHeads = 3;
constexpr int kHeadDim = 64;
constexpr int kBlockSize = 16;  // the paged cache's default

// One layer's keys and values in either layout, filled with random values, and its view.
struct Layer {
  std::vector<float> keys,
      values;  // contiguous [kv_head][pos][head_dim]; paged [block][slot][kv_head][head_dim]
  std::vector<int> block_table;  // paged: a shuffled permutation of the blocks (not in address order)
  plumb::KvLayerView view;
};

Layer MakeLayer(int context, bool paged, std::mt19937& rng) {
  Layer layer;
  const std::size_t floats = static_cast<std::size_t>(context) * kKvHeads * kHeadDim;
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  layer.keys.resize(floats);
  layer.values.resize(floats);
  for (float& x : layer.keys) x = uniform(rng);
  for (float& x : layer.values) x = uniform(rng);
  plumb::KvLayerView& v = layer.view;
  v.keys = layer.keys.data();
  v.values = layer.values.data();
  v.n_kv_heads = kKvHeads;
  v.head_dim = kHeadDim;
  v.length = context;
  if (paged) {
    layer.block_table.resize(static_cast<std::size_t>(context / kBlockSize));
    std::iota(layer.block_table.begin(), layer.block_table.end(), 0);
    std::shuffle(layer.block_table.begin(), layer.block_table.end(), rng);
    v.block_size = kBlockSize;
    v.position_stride = kKvHeads * kHeadDim;
    v.head_stride = kHeadDim;
    v.block_stride = static_cast<std::int64_t>(kBlockSize) * kKvHeads * kHeadDim;
  } else {
    layer.block_table = {0};
    v.block_size = context;
    v.position_stride = kHeadDim;
    v.head_stride = static_cast<std::int64_t>(context) * kHeadDim;
  }
  v.block_table = layer.block_table;
  return layer;
}

void BM_DecodeAttention(benchmark::State& state) {
  const int context = static_cast<int>(state.range(0));
  const bool paged = state.range(1) != 0;
  std::mt19937 rng(7);
  std::vector<Layer> layers;
  for (int l = 0; l < kLayers; ++l) layers.push_back(MakeLayer(context, paged, rng));
  std::vector<float> q(kHeads * kHeadDim, 0.1f), out(q.size());
  for (auto _ : state) {
    for (const Layer& layer : layers) {
      plumb::kernels::CausalAttention(q.data(), 1, context - 1, layer.view, kHeads, out.data());
    }
    benchmark::DoNotOptimize(out.data());
  }
  const double kv_bytes = 2.0 * kLayers * context * kKvHeads * kHeadDim * sizeof(float);
  state.counters["KV_B/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kv_bytes, benchmark::Counter::kIsRate);
  state.SetLabel(paged ? "paged (block 16)" : "contiguous");
}
BENCHMARK(BM_DecodeAttention)
    ->ArgsProduct({{512, 1024, 2048, 4096, 8192}, {0, 1}})
    ->ArgNames({"context", "paged"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
