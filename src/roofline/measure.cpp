// Timed decode steps and prefills (include/plumb/roofline/measure.h).
#include "plumb/roofline/measure.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <span>

#include "plumb/core/error.h"
#include "plumb/kv/contiguous_kv_cache.h"

namespace plumb::roofline {
namespace {

using Clock = std::chrono::steady_clock;

// Detaches the observer however the timed runs end.
class Observed {
 public:
  Observed(Model& model, ForwardObserver* observer) : model_(model) { model_.set_observer(observer); }
  ~Observed() { model_.set_observer(nullptr); }
  Observed(const Observed&) = delete;
  Observed& operator=(const Observed&) = delete;

 private:
  Model& model_;
};

}  // namespace

std::vector<int> SpreadTokens(int count, int vocab, int salt) {
  std::vector<int> ids(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<int>((i * 2654435761u + 12345u * static_cast<unsigned>(salt + 1)) %
                              static_cast<std::uint64_t>(vocab));
  }
  return ids;
}

double TimeDecodeStep(Model& model, KvDtype kv, int batch, int context, int steps,
                      ForwardObserver* observer) {
  if (batch < 1 || context < 0 || steps < 1) {
    throw MakeError("TimeDecodeStep: batch ", batch, ", context ", context, ", steps ", steps,
                    " (need batch >= 1, context >= 0, steps >= 1)");
  }
  std::vector<ContiguousKvCache> caches;  // [batch] one cache each, context + 1 positions
  caches.reserve(static_cast<std::size_t>(batch));
  for (int s = 0; s < batch; ++s) {
    caches.push_back(model.NewKvCache(context + 1, kv));
    caches.back().set_length(context);  // zero keys and values: attention's cost does not depend on them
  }
  const std::vector<int> tokens = SpreadTokens(batch, model.config().vocab_size, context);
  std::vector<SequenceChunk> chunks;  // [batch] one token each
  for (int s = 0; s < batch; ++s) chunks.push_back({&caches[s], std::span<const int>(&tokens[s], 1)});
  const auto step = [&] {
    if (batch == 1) {
      model.Decode(tokens[0], caches[0]);
    } else {
      model.Step(chunks);
    }
    for (ContiguousKvCache& c : caches) c.set_length(context);
  };
  // Warm-up: buffers grown, weights in the page cache, the pool's threads awake. One step was not enough: the
  // first steps after the caches are made ran up to twice a settled step's time (docs/performance.md,
  // "Batch 16 against batch 1").
  for (int i = 0; i < 3; ++i) step();
  const Observed observed(model, observer);
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < steps; ++i) step();
  return std::chrono::duration<double>(Clock::now() - start).count() / steps;
}

double TimePrefill(Model& model, KvDtype kv, int prompt, int runs, ForwardObserver* observer) {
  if (prompt < 1 || runs < 1)
    throw MakeError("TimePrefill: prompt ", prompt, ", runs ", runs, " (need >= 1)");
  ContiguousKvCache cache = model.NewKvCache(prompt, kv);
  const std::vector<int> tokens = SpreadTokens(prompt, model.config().vocab_size, 0);
  model.Prefill(tokens, cache);  // warm-up
  const Observed observed(model, observer);
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < runs; ++i) {
    cache.Clear();
    model.Prefill(tokens, cache);
  }
  return std::chrono::duration<double>(Clock::now() - start).count() / runs;
}

void FillSynthetic(KvSequence& kv, int length, int salt) {
  const int width = kv.n_kv_heads() * kv.head_dim();
  std::vector<float> k(static_cast<std::size_t>(width)), v(k.size());  // [n_kv_heads · head_dim]
  std::mt19937 rng(static_cast<unsigned>(salt));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& x : k) x = normal(rng);
  for (float& x : v) x = normal(rng);
  kv.Reserve(length);
  for (int l = 0; l < kv.n_layers(); ++l) {
    for (int p = 0; p < length; ++p) kv.Write(l, kv.length() + p, k.data(), v.data());
  }
  std::vector<int> tokens(static_cast<std::size_t>(length));
  for (int p = 0; p < length; ++p) tokens[p] = (salt * 7919 + p) % 32000;
  kv.Commit(tokens);
}

SeqId ShuffleFreeBlocks(PagedKvCache& pool, int positions, int block_size) {
  const int blocks = (positions + block_size - 1) / block_size;
  std::vector<SeqId> placeholders;
  for (int b = 0; b < blocks; ++b) {
    placeholders.push_back(pool.Add());
    pool.Sequence(placeholders.back()).Reserve(1);
  }
  std::shuffle(placeholders.begin(), placeholders.end(), std::mt19937(12345));
  for (SeqId id : placeholders) pool.Free(id);
  return pool.Add();
}

double Median(std::vector<double> values) {
  if (values.empty()) throw MakeError("Median of no values");
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace plumb::roofline
