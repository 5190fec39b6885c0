// Decode attention alone (kernels::CausalAttention, one query row) over a contiguous and a paged KV cache of
// SmolLM2-135M's shape (30 layers, 9 query heads, 3 KV heads, head_dim 64, f32 KV), at contexts 512 .. 8192.
// One iteration is one decode step's attention: every layer once, so the KV read (30 layers · K and V) is far
// larger than the last-level cache from context 1024 on, as in a real step. The counter KV_B/s is the KV
// bytes the step must read over its time, to set against the host's read bandwidth (memory_bench).
// BM_WindowedDecodeAttention: the same at context 4096 with a sliding window of 512 (Gemma 3's local layers)
// beside none: the windowed step reads 512 positions, not 4096 (KV_B/s counts the bytes it reads).
// BM_BatchedDecodeAttention: one decode step of a batch of sequences (each its own paged cache, block 16,
// every sequence at the same context), every layer once, f32 / f16 / fp8-e4m3 KV, 1 and 2 threads: the shape
// of issue 17's batch-16, context-512 step (`plumb roofline --batch 16 --context 512 --kv-dtype fp8-e4m3`).
//   build/attention_bench --benchmark_min_time=1
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "plumb/formats/kv_dtype.h"
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

// One decode step's attention, every layer, the query at position context − 1 (window 0: no window).
void DecodeAttention(benchmark::State& state, int context, bool paged, int window) {
  std::mt19937 rng(7);
  std::vector<Layer> layers;
  for (int l = 0; l < kLayers; ++l) layers.push_back(MakeLayer(context, paged, rng));
  std::vector<float> q(kHeads * kHeadDim, 0.1f), out(q.size());
  for (auto _ : state) {
    for (const Layer& layer : layers) {
      plumb::kernels::CausalAttention(q.data(), 1, context - 1, layer.view, kHeads, out.data(), window);
    }
    benchmark::DoNotOptimize(out.data());
  }
  const int read = window > 0 ? std::min(window, context) : context;  // positions attended
  const double kv_bytes = 2.0 * kLayers * read * kKvHeads * kHeadDim * sizeof(float);
  state.counters["KV_B/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kv_bytes, benchmark::Counter::kIsRate);
  state.SetLabel(paged ? "paged (block 16)" : "contiguous");
}

void BM_DecodeAttention(benchmark::State& state) {
  DecodeAttention(state, static_cast<int>(state.range(0)), state.range(1) != 0, 0);
}
BENCHMARK(BM_DecodeAttention)
    ->ArgsProduct({{512, 1024, 2048, 4096, 8192}, {0, 1}})
    ->ArgNames({"context", "paged"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_WindowedDecodeAttention(benchmark::State& state) {
  DecodeAttention(state, static_cast<int>(state.range(0)), state.range(2) != 0,
                  static_cast<int>(state.range(1)));
}
BENCHMARK(BM_WindowedDecodeAttention)
    ->ArgsProduct({{4096}, {0, 512}, {0, 1}})
    ->ArgNames({"context", "window", "paged"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// One layer of one sequence's paged cache (block kBlockSize, shuffled table) in `dtype`: random values in
// [-1, 1) stored through EncodeKv, FP8 with per-head scales as a calibrated cache would have them.
struct EncodedLayer {
  std::vector<std::uint8_t> keys, values;
  std::vector<int> block_table;
  std::vector<float> k_scales, v_scales;
  plumb::KvLayerView view;
};

void MakeEncodedLayer(EncodedLayer& layer, int context, plumb::KvDtype dtype, std::mt19937& rng) {
  const int blocks = (context + kBlockSize - 1) / kBlockSize;
  const std::size_t elements = static_cast<std::size_t>(blocks) * kBlockSize * kKvHeads * kHeadDim;
  const std::size_t bytes = elements * plumb::KvDtypeBytes(dtype);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  layer.keys.assign(bytes, 0);
  layer.values.assign(bytes, 0);
  for (int h = 0; h < kKvHeads; ++h) {
    layer.k_scales.push_back(plumb::IsFp8(dtype) ? 1.0f / (400.0f + static_cast<float>(h)) : 1.0f);
    layer.v_scales.push_back(plumb::IsFp8(dtype) ? 1.0f / (420.0f + static_cast<float>(h)) : 1.0f);
  }
  std::vector<float> row(kHeadDim);
  for (std::size_t at = 0; at < elements; at += kHeadDim) {
    const int h = static_cast<int>(at / kHeadDim % kKvHeads);
    const std::size_t offset = at * plumb::KvDtypeBytes(dtype);
    for (float& x : row) x = uniform(rng);
    plumb::EncodeKv(dtype, row.data(), kHeadDim, layer.k_scales[static_cast<std::size_t>(h)],
                    layer.keys.data() + offset);
    for (float& x : row) x = uniform(rng);
    plumb::EncodeKv(dtype, row.data(), kHeadDim, layer.v_scales[static_cast<std::size_t>(h)],
                    layer.values.data() + offset);
  }
  layer.block_table.resize(static_cast<std::size_t>(blocks));
  std::iota(layer.block_table.begin(), layer.block_table.end(), 0);
  std::shuffle(layer.block_table.begin(), layer.block_table.end(), rng);
  plumb::KvLayerView& v = layer.view;
  v.dtype = dtype;
  v.keys = layer.keys.data();
  v.values = layer.values.data();
  v.block_table = layer.block_table;
  v.block_size = kBlockSize;
  v.block_stride = static_cast<std::int64_t>(kBlockSize) * kKvHeads * kHeadDim;
  v.position_stride = kKvHeads * kHeadDim;
  v.head_stride = kHeadDim;
  v.n_kv_heads = kKvHeads;
  v.head_dim = kHeadDim;
  if (plumb::IsFp8(dtype)) {
    v.k_scales = layer.k_scales.data();
    v.v_scales = layer.v_scales.data();
  }
  v.length = context;
}

void BM_BatchedDecodeAttention(benchmark::State& state) {
  const int batch = static_cast<int>(state.range(0));
  const int context = static_cast<int>(state.range(1));
  const auto dtype = static_cast<plumb::KvDtype>(state.range(2));
  plumb::kernels::SetNumThreads(static_cast<int>(state.range(3)));
  std::mt19937 rng(11);
  // [layer][sequence]: every sequence decodes its row `context - 1` over `context` cached positions.
  std::vector<std::vector<EncodedLayer>> layers(kLayers);
  for (auto& sequences : layers) {
    sequences.resize(static_cast<std::size_t>(batch));
    for (EncodedLayer& layer : sequences) MakeEncodedLayer(layer, context, dtype, rng);
  }
  const std::size_t q_dim = static_cast<std::size_t>(kHeads) * kHeadDim;
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> q(static_cast<std::size_t>(batch) * q_dim), out(q.size());
  for (float& x : q) x = uniform(rng);
  std::vector<plumb::kernels::AttentionItem> items(static_cast<std::size_t>(batch));
  for (auto _ : state) {
    for (const auto& sequences : layers) {
      for (std::size_t i = 0; i < items.size(); ++i) {
        items[i] = {q.data() + i * q_dim, out.data() + i * q_dim, 1, context - 1, sequences[i].view};
      }
      plumb::kernels::CausalAttention(items, kHeads);
    }
    benchmark::DoNotOptimize(out.data());
  }
  const double kv_bytes =
      2.0 * kLayers * batch * context * kKvHeads * kHeadDim * static_cast<double>(plumb::KvDtypeBytes(dtype));
  state.counters["KV_B/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kv_bytes, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(plumb::KvDtypeName(dtype)));
  plumb::kernels::SetNumThreads(0);
}
BENCHMARK(BM_BatchedDecodeAttention)
    ->ArgsProduct({{1, 16},
                   {512},
                   {static_cast<int>(plumb::KvDtype::kF32), static_cast<int>(plumb::KvDtype::kF16),
                    static_cast<int>(plumb::KvDtype::kFp8E4M3)},
                   {1, 2}})
    ->ArgNames({"batch", "context", "dtype", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
