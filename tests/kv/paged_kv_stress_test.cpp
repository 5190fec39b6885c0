// A randomized stress test of PagedKvCache against a model-free reference.
//
// Thousands of random operations as a scheduler issues them: Add (prompts with shared prefixes, so that the
// prefix cache hits), prefill chunks and decode steps (Reserve + Write + Commit), partial commits that leave
// positions reserved, Fork, Free, and preemption (Free, then Add again with the same tokens). The keys and
// values written at a position are a function of the token ids up to and including it (KvValue), as a real
// model's are, so sharing a block is correct exactly when the contents agree. After every step every live
// sequence must hold exactly what its token ids say, and the bookkeeping must add up.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "kv/paged_kv_test_util.h"
#include "plumb/kv/paged_kv_cache.h"

namespace plumb {
namespace {

using testing::CountMismatches;
using testing::Extend;
using testing::TestConfig;

constexpr int kMaxPositions = 48;
constexpr int kMaxLive = 12;
constexpr int kVocab = 6;  // a small vocabulary: different prompts often agree on their first blocks

// What one sequence must hold.
struct Expected {
  std::vector<int> tokens;   // committed token ids
  std::vector<int> pending;  // prompt tokens still to prefill
  int reserved = 0;          // positions reserved beyond the committed ones
};

class Stress {
 public:
  Stress(KvDtype dtype, int block_size, int num_blocks, unsigned seed)
      : cache_(TestConfig(dtype, block_size, num_blocks, kMaxPositions)), rng_(seed) {
    for (auto& doc : documents_) {
      for (int i = 0; i < kMaxPositions; ++i) doc.push_back(Token());
    }
  }

  void Run(int steps) {
    for (int step = 0; step < steps; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const int r = Uniform(0, 99);
      if (live_.empty() || (r < 15 && live_.size() < kMaxLive)) {
        AddPrompt();
      } else if (r < 65) {
        Advance(Pick());
      } else if (r < 72) {
        PartialCommit(Pick());
      } else if (r < 80) {
        ForkOne(Pick());
      } else if (r < 90) {
        FreeOne(Pick());
      } else {
        Preempt(Pick());
      }
      Check();
      if (::testing::Test::HasFailure()) return;
    }
    // Every kind of event happened, or the test proves less than it says.
    EXPECT_GT(counts_["prefix hit"], 0);
    EXPECT_GT(counts_["exhausted"], 0);
    EXPECT_GT(counts_["fork"], 0);
    if (cache_.config().block_size > 1) {  // at 1 no block is ever partial
      EXPECT_GT(counts_["copy-on-write"], 0);
    }
    EXPECT_GT(counts_["preempt"], 0);
    EXPECT_GT(counts_["partial commit"], 0);
    EXPECT_GT(counts_["eviction"], 0);
    std::string summary;
    for (const auto& [what, n] : counts_) summary += " " + what + " " + std::to_string(n) + ",";
    std::printf("events:%s\n", summary.c_str());
  }

 private:
  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  int Token() { return Uniform(0, kVocab - 1); }
  SeqId Pick() {
    auto it = live_.begin();
    std::advance(it, Uniform(0, static_cast<int>(live_.size()) - 1));
    return it->first;
  }

  // A prompt: the start of one of a few documents, sometimes with one token changed.
  std::vector<int> MakePrompt() {
    const auto& doc = documents_[static_cast<std::size_t>(Uniform(0, 3))];
    std::vector<int> prompt(doc.begin(), doc.begin() + Uniform(1, kMaxPositions - 8));
    if (Uniform(0, 9) < 3)
      prompt[static_cast<std::size_t>(Uniform(0, static_cast<int>(prompt.size()) - 1))] = Token();
    return prompt;
  }

  // Adds `prompt` as a new sequence; the prefix it got from the cache must be whole blocks of it, never all.
  SeqId AddSequence(const std::vector<int>& prompt) {
    const int cached_before = cache_.Usage().cached_blocks;
    const SeqId id = cache_.Add(prompt);
    const int m = cache_.Sequence(id).length();
    const int bs = cache_.config().block_size;
    EXPECT_EQ(m % bs, 0);
    EXPECT_LT(m, static_cast<int>(prompt.size()));
    EXPECT_TRUE(std::equal(cache_.Tokens(id).begin(), cache_.Tokens(id).end(), prompt.begin()));
    if (m > 0) ++counts_["prefix hit"];
    if (cache_.Usage().cached_blocks < cached_before) ++counts_["cached block revived"];
    Expected e;
    e.tokens.assign(prompt.begin(), prompt.begin() + m);
    e.pending.assign(prompt.begin() + m, prompt.end());
    live_[id] = e;
    return id;
  }

  void AddPrompt() { AddSequence(MakePrompt()); }

  // Appends n tokens through Reserve + Write + Commit; when the pool is exhausted nothing may change, and the
  // scheduler frees some sequence to make room.
  bool Grow(SeqId id, const std::vector<int>& tokens) {
    Expected& e = live_[id];
    if (static_cast<int>(e.tokens.size() + tokens.size()) > kMaxPositions) {
      FreeOne(id);  // finished: its context is full
      return false;
    }
    const std::vector<int> table(cache_.BlockTable(id).begin(), cache_.BlockTable(id).end());
    const int available = cache_.AvailableBlocks();
    const int need = cache_.BlocksToGrow(id, static_cast<int>(tokens.size()));
    const int evictions = std::max(0, need - cache_.Usage().free_blocks);
    // Beyond the blocks the new positions need, a Reserve takes one for a copy of a shared last block.
    const int end = static_cast<int>(e.tokens.size() + tokens.size());
    const int bs = cache_.config().block_size;
    const bool cow = need > std::max(0, (end + bs - 1) / bs - static_cast<int>(table.size()));
    if (!Extend(cache_, id, tokens)) {
      ++counts_["exhausted"];
      EXPECT_GT(need, available);
      EXPECT_EQ(std::vector<int>(cache_.BlockTable(id).begin(), cache_.BlockTable(id).end()), table);
      EXPECT_EQ(cache_.AvailableBlocks(), available);
      EXPECT_EQ(cache_.Sequence(id).length(), static_cast<int>(e.tokens.size()));
      FreeOne(Pick());
      return false;
    }
    EXPECT_LE(need, available);
    if (cow) ++counts_["copy-on-write"];
    if (evictions > 0) ++counts_["eviction"];
    e.tokens.insert(e.tokens.end(), tokens.begin(), tokens.end());
    e.reserved = std::max(e.reserved, static_cast<int>(tokens.size())) - static_cast<int>(tokens.size());
    return true;
  }

  // A prefill chunk of the pending prompt, or a decode step of 1..3 tokens.
  void Advance(SeqId id) {
    Expected& e = live_[id];
    std::vector<int> tokens;
    if (!e.pending.empty()) {
      const int n = std::min(Uniform(1, 9), static_cast<int>(e.pending.size()));
      tokens.assign(e.pending.begin(), e.pending.begin() + n);
      if (Grow(id, tokens)) live_[id].pending.erase(live_[id].pending.begin(), live_[id].pending.begin() + n);
    } else {
      for (int n = Uniform(1, 3); n > 0; --n) tokens.push_back(Token());
      Grow(id, tokens);
    }
  }

  // Reserves and writes k positions but commits fewer: the rest stay reserved (written with values for
  // tokens that never come, which a later step must overwrite).
  void PartialCommit(SeqId id) {
    Expected& e = live_[id];
    if (!e.pending.empty() || static_cast<int>(e.tokens.size()) + 4 > kMaxPositions) return;
    std::vector<int> tokens = {Token(), Token(), Token(), Token()};
    KvSequence& seq = cache_.Sequence(id);
    try {
      seq.Reserve(4);
    } catch (const Error&) {
      ++counts_["exhausted"];
      return;
    }
    testing::WriteTokens(cache_, id, tokens);
    const int j = Uniform(0, 3);
    seq.Commit(std::span<const int>(tokens).first(static_cast<std::size_t>(j)));
    e.tokens.insert(e.tokens.end(), tokens.begin(), tokens.begin() + j);
    e.reserved = std::max(e.reserved, 4) - j;
    ++counts_["partial commit"];
  }

  void ForkOne(SeqId id) {
    if (live_.size() >= kMaxLive) return;
    const Expected& e = live_[id];
    if (e.reserved > 0) {
      EXPECT_THROW(cache_.Fork(id), Error);
      return;
    }
    const SeqId child = cache_.Fork(id);
    live_[child] = live_[id];
    ++counts_["fork"];
  }

  void FreeOne(SeqId id) {
    cache_.Free(id);
    live_.erase(id);
    EXPECT_FALSE(cache_.Contains(id));
  }

  // Free, then Add again with every token it had (committed and still pending): each full committed block
  // is still cached (nothing ran in between), so the prefix found covers at least those blocks (never the
  // whole prompt).
  void Preempt(SeqId id) {
    const Expected e = live_[id];
    std::vector<int> prompt = e.tokens;
    prompt.insert(prompt.end(), e.pending.begin(), e.pending.end());
    if (prompt.empty()) return;
    FreeOne(id);
    const SeqId again = AddSequence(prompt);
    const int bs = cache_.config().block_size;
    const int want =
        std::min(static_cast<int>(e.tokens.size()) / bs, (static_cast<int>(prompt.size()) - 1) / bs);
    EXPECT_GE(cache_.Sequence(again).length(), want * bs);  // more when another sequence cached the rest
    ++counts_["preempt"];
  }

  void Check() {
    cache_.CheckInvariants();
    const int bs = cache_.config().block_size;
    std::map<int, int> stored;  // block -> most committed positions any holder has in it
    for (const auto& [id, e] : live_) {
      ASSERT_TRUE(cache_.Contains(id));
      const std::span<const int> tokens = cache_.Tokens(id);
      ASSERT_EQ(std::vector<int>(tokens.begin(), tokens.end()), e.tokens) << "sequence " << id;
      ASSERT_EQ(cache_.Sequence(id).Layer(0).length, static_cast<int>(e.tokens.size()) + e.reserved);
      ASSERT_EQ(CountMismatches(cache_, id), 0) << "sequence " << id;
      const std::span<const int> table = cache_.BlockTable(id);
      for (std::size_t i = 0; i < table.size(); ++i) {
        const int in_block = std::clamp(static_cast<int>(e.tokens.size()) - static_cast<int>(i) * bs, 0, bs);
        stored[table[i]] = std::max(stored[table[i]], in_block);
      }
    }
    const PagedKvUsage u = cache_.Usage();
    EXPECT_EQ(u.free_blocks + u.cached_blocks + u.used_blocks, u.total_blocks);
    EXPECT_EQ(u.used_blocks, static_cast<int>(stored.size()));  // distinct blocks in the tables
    EXPECT_EQ(u.sequences, static_cast<int>(live_.size()));
    std::int64_t positions = 0;
    for (const auto& [block, n] : stored) positions += n;
    EXPECT_EQ(u.stored_positions, positions);
    EXPECT_EQ(u.fragmented_positions, static_cast<std::int64_t>(u.used_blocks) * bs - positions);
  }

  PagedKvCache cache_;
  std::mt19937 rng_;
  std::vector<int> documents_[4];
  std::map<SeqId, Expected> live_;
  std::map<std::string, int> counts_;
};

struct StressCase {
  KvDtype dtype;
  int block_size;
  int num_blocks;  // small enough that the pool runs out and cached blocks are evicted
};

class PagedKvStress : public ::testing::TestWithParam<StressCase> {};

TEST_P(PagedKvStress, EverySequenceHoldsWhatItsTokensSay) {
  const StressCase c = GetParam();
  Stress(c.dtype, c.block_size, c.num_blocks, 1234u + static_cast<unsigned>(c.block_size)).Run(3000);
}

INSTANTIATE_TEST_SUITE_P(
    DtypesAndBlockSizes, PagedKvStress,
    ::testing::Values(StressCase{KvDtype::kF32, 1, 160}, StressCase{KvDtype::kF32, 4, 40},
                      StressCase{KvDtype::kFp8E4M3, 2, 80}, StressCase{KvDtype::kFp8E4M3, 16, 10}),
    [](const ::testing::TestParamInfo<StressCase>& param_info) {
      return std::string(KvDtypeName(param_info.param.dtype) == "f32" ? "f32" : "fp8e4m3") + "_block" +
             std::to_string(param_info.param.block_size);
    });

}  // namespace
}  // namespace plumb
