// The roofline layer's timed runs and regime classification (roofline/measure.h, roofline/regime.h): what
// each timed run computes and reports, never how long it takes (speed is measured in bench/).
#include "plumb/roofline/measure.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "plumb/core/error.h"
#include "plumb/kv/paged_kv_cache.h"
#include "plumb/roofline/regime.h"
#include "support/golden.h"

namespace plumb {
namespace {

// Counts the passes an observer sees and the rows of each.
class PassCounter final : public ForwardObserver {
 public:
  void OnPassBegin(ForwardPhase phase, int rows) override { passes.push_back({phase, rows}); }
  std::vector<std::pair<ForwardPhase, int>> passes;
};

TEST(Measure, SpreadTokensAreFixedInTheVocabularyAndVaryWithTheSalt) {
  const std::vector<int> a = roofline::SpreadTokens(100, 37, 0);
  EXPECT_EQ(a, roofline::SpreadTokens(100, 37, 0));
  EXPECT_NE(a, roofline::SpreadTokens(100, 37, 1));
  for (int id : a) EXPECT_TRUE(id >= 0 && id < 37) << id;
  EXPECT_GT(std::set<int>(a.begin(), a.end()).size(), 30u);  // spread over the vocabulary
}

TEST(Measure, TheObserverSeesOnlyTheTimedPassesOfTheRightShape) {
  Model model = Model::Load(testing::FixtureDir("tiny-llama"));
  PassCounter decode;
  EXPECT_GT(roofline::TimeDecodeStep(model, KvDtype::kF32, 1, 5, 3, &decode), 0.0);
  ASSERT_EQ(decode.passes.size(), 3u);  // not the warm-up
  EXPECT_EQ(decode.passes[0], std::make_pair(ForwardPhase::kDecode, 1));
  PassCounter batched;
  roofline::TimeDecodeStep(model, KvDtype::kF16, 4, 0, 2, &batched);
  ASSERT_EQ(batched.passes.size(), 2u);
  EXPECT_EQ(batched.passes[1], std::make_pair(ForwardPhase::kStep, 4));
  PassCounter prefill;
  EXPECT_GT(roofline::TimePrefill(model, KvDtype::kF32, 7, 2, &prefill), 0.0);
  ASSERT_EQ(prefill.passes.size(), 2u);
  EXPECT_EQ(prefill.passes[0], std::make_pair(ForwardPhase::kPrefill, 7));
  // The observer is detached afterwards, and bad arguments are errors.
  ContiguousKvCache cache = model.NewKvCache(4);
  model.Decode(1, cache);
  EXPECT_EQ(prefill.passes.size(), 2u);
  EXPECT_THROW(roofline::TimeDecodeStep(model, KvDtype::kF32, 0, 5, 1, nullptr), Error);
  EXPECT_THROW(roofline::TimePrefill(model, KvDtype::kF32, 0, 1, nullptr), Error);
}

TEST(BenchSetup, SyntheticFillCommitsTheSameRowAtEveryPositionAndShuffledBlocksAreOutOfOrder) {
  PagedKvConfig c;
  c.n_layers = 2;
  c.n_kv_heads = 2;
  c.head_dim = 8;
  c.block_size = 4;
  c.num_blocks = 32;
  c.max_positions = 64;
  PagedKvCache pool(c);
  const SeqId id = roofline::ShuffleFreeBlocks(pool, 40, c.block_size);
  KvSequence& seq = pool.Sequence(id);
  roofline::FillSynthetic(seq, 40, 3);
  EXPECT_EQ(seq.length(), 40);
  const std::span<const int> table = pool.BlockTable(id);
  ASSERT_EQ(table.size(), 10u);
  EXPECT_FALSE(std::is_sorted(table.begin(), table.end()));
  EXPECT_EQ(std::set<int>(table.begin(), table.end()).size(), 10u);
  // Every position of every layer holds the row of salt 3, so the keys are the same bits everywhere.
  const KvLayerView view = seq.Layer(1);
  const auto* keys = static_cast<const float*>(view.keys);
  for (int p = 1; p < 40; ++p) {
    for (int h = 0; h < c.n_kv_heads; ++h) {
      for (int j = 0; j < c.head_dim; ++j) {
        ASSERT_EQ(keys[view.Element(p, h) + j], keys[view.Element(0, h) + j]) << p << " " << h << " " << j;
      }
    }
  }
  EXPECT_THROW(roofline::FillSynthetic(seq, 100, 3), Error);  // past max_positions

  EXPECT_EQ(roofline::Median({3, 1, 2}), 2);
  EXPECT_EQ(roofline::Median({4, 1, 2, 3}), 2.5);
  EXPECT_THROW(roofline::Median({}), Error);
}

TEST(Regime, BoundByTheLongerCeilingUnlessTinyAndFarAboveIt) {
  const roofline::Roof roof{100e9, 10e9};  // ridge 10 FLOP/B
  // 1 MB at 1 FLOP/B: memory 100 µs, compute 10 µs.
  EXPECT_EQ(roofline::Classify(roof, 1e6, 1e6, 120e-6), roofline::Regime::kBandwidth);
  // 1 GFLOP on 1 MB: compute 10 ms, memory 100 µs.
  EXPECT_EQ(roofline::Classify(roof, 1e9, 1e6, 20e-3), roofline::Regime::kCompute);
  // 1 kB: bound 0.1 µs; took 40 µs (400× and under 50 µs): overhead. At 60 µs it is judged by its ceiling.
  EXPECT_EQ(roofline::Classify(roof, 1e3, 1e3, 40e-6), roofline::Regime::kOverhead);
  EXPECT_EQ(roofline::Classify(roof, 1e3, 1e3, 60e-6), roofline::Regime::kBandwidth);
  EXPECT_STREQ(roofline::RegimeName(roofline::Regime::kOverhead), "overhead-bound");
}

}  // namespace
}  // namespace plumb
