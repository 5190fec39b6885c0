// Model::Step, the batched forward pass, against the one-sequence functions it must agree with:
//   - batch_invariant: every logit bitwise what Decode gives the same sequence run alone, token by token, in
//     either kernel family, whatever the other sequences in the step, the chunking (prefill chunks beside
//     decodes), the KV layout (contiguous or paged) and the thread count (1 or 2);
//   - the default (a BLAS GEMM for steps of several rows): within the phases' tolerance of those logits
//     (tests/model/forward_test.cpp: 1e-5 of the largest logit, FP32 rounding of a different summation
//     order), and the same greedy tokens;
//   - Prefill / Decode over a paged test KvSequence: bitwise the contiguous cache's results;
//   - bad input and an exhausted block pool: plumb::Error, and no sequence's committed length changes.
// The paged sequences are tests/support/kv_views.h's PagedTestKv (NaN-filled pool, shuffled block tables).
// The tiny Gemma 3s slide their window of 5 within these sequences of 8 to 10 tokens, so sliding-window
// attention is held to the same agreements over both cache layouts and in batched steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/kernels/int8_activations.h"
#include "plumb/kernels/kernels.h"
#include "plumb/model/model.h"
#include "support/golden.h"
#include "support/kv_views.h"

namespace plumb {
namespace {

using testing::PagedTestKv;
using testing::TestBlockPool;

constexpr double kPhaseTolerance = 1e-5;

// Logits of every token of `tokens`, each from Decode of that token after all before it (an empty cache).
std::vector<std::vector<float>> DecodeAlone(Model& model, const std::vector<int>& tokens) {
  ContiguousKvCache cache = model.NewKvCache(64);
  std::vector<std::vector<float>> logits;
  for (int token : tokens) {
    const std::span<const float> row = model.Decode(token, cache);
    logits.emplace_back(row.begin(), row.end());
  }
  return logits;
}

bool SameBits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

int Argmax(std::span<const float> logits) {
  return static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

class Steps : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string fixture = GetParam().substr(0, GetParam().find('/'));
    const std::string dir = testing::FixtureDir(fixture);
    const std::string file =
        GetParam().find('/') == std::string::npos ? "" : GetParam().substr(fixture.size());
    if (std::filesystem::exists(dir + "/manifest.json")) {
      golden_ = std::make_unique<testing::GoldenFixture>(dir);
    } else {  // tiny-gemma3: each file has its own golden, /model.<stem>.gguf → model.<stem>.manifest.json
      const std::string stem = file.substr(0, file.size() - std::string(".gguf").size());
      golden_ = std::make_unique<testing::GoldenFixture>(dir, dir + stem + ".manifest.json",
                                                         dir + stem + ".golden.safetensors");
    }
    model_ = std::make_unique<Model>(Model::Load(golden_->dir() + file));
    const std::vector<int>& p = golden_->prompt_ids();
    tokens_ = {p, std::vector<int>(p.rbegin(), p.rend()), std::vector<int>(p.begin() + 2, p.end())};
    tokens_[2].insert(tokens_[2].end(), p.begin(), p.begin() + 3);
  }
  void TearDown() override { kernels::SetNumThreads(0); }

  TestBlockPool NewPool(int block_size, int blocks, KvDtype dtype = KvDtype::kF32) const {
    const ModelConfig& c = model_->config();
    return TestBlockPool(c.num_layers, c.num_kv_heads, c.head_dim, block_size, blocks, dtype);
  }

  std::unique_ptr<testing::GoldenFixture> golden_;
  std::unique_ptr<Model> model_;
  std::vector<std::vector<int>> tokens_;  // three sequences' tokens
};

// A chunk of sequence `seq`: its tokens [begin, end).
struct Planned {
  int seq, begin, end;
  bool all_logits;
};
// Prefill chunks beside decodes, sequences joining late, chunk sizes 1 to 6.
const std::vector<std::vector<Planned>> kSchedule = {
    {{0, 0, 5, true}, {1, 0, 3, false}},
    {{0, 5, 6, false}, {1, 3, 9, true}, {2, 0, 4, true}},
    {{0, 6, 7, false}, {1, 9, 10, false}, {2, 4, 5, false}},
    {{2, 5, 8, false}, {0, 7, 8, true}},
};

// Runs kSchedule over a contiguous cache and two paged sequences (blocks of block_size), calling
// check(sequence, token index, that token's logits) for every row a step returns.
void RunSchedule(Model& model, const std::vector<std::vector<int>>& tokens, int block_size,
                 StepOptions options, const std::function<void(int, int, std::span<const float>)>& check) {
  const ModelConfig& mc = model.config();
  TestBlockPool pool(mc.num_layers, mc.num_kv_heads, mc.head_dim, block_size, 64 / block_size + 6,
                     KvDtype::kF32);
  ContiguousKvCache contiguous = model.NewKvCache(64);
  PagedTestKv paged_a(pool, 64), paged_b(pool, 64);
  KvSequence* kv[] = {&contiguous, &paged_a, &paged_b};
  for (const std::vector<Planned>& step : kSchedule) {
    std::vector<SequenceChunk> chunks;
    for (const Planned& c : step) {
      chunks.push_back({kv[c.seq], std::span(tokens[c.seq]).subspan(c.begin, c.end - c.begin), c.all_logits});
    }
    const std::span<const float> logits = model.Step(chunks, options);
    const std::size_t V = mc.vocab_size;
    std::size_t row = 0;
    for (const Planned& c : step) {
      for (int t = c.all_logits ? c.begin : c.end - 1; t < c.end; ++t, ++row) {
        check(c.seq, t, logits.subspan(row * V, V));
      }
    }
    ASSERT_EQ(row * V, logits.size());
  }
  EXPECT_EQ(contiguous.length(), 8);
  EXPECT_EQ(paged_a.length(), 10);
  EXPECT_EQ(paged_b.length(), 8);
}

// In both kernel families: the fast one's int8 GEMVs are per row too (kernels::GemvBatch).
TEST_P(Steps, BatchInvariantStepIsBitwiseDecodeAloneForAnyBatchLayoutAndThreads) {
  for (kernels::KernelFamily family : {kernels::KernelFamily::kExact, kernels::KernelFamily::kFast}) {
    kernels::SetFamily(family);
    kernels::SetNumThreads(1);
    std::vector<std::vector<std::vector<float>>> alone;
    for (const std::vector<int>& t : tokens_) alone.push_back(DecodeAlone(*model_, t));
    for (int threads : {1, 2}) {
      kernels::SetNumThreads(threads);
      RunSchedule(
          *model_, tokens_, 4, {.batch_invariant = true}, [&](int seq, int t, std::span<const float> got) {
            EXPECT_TRUE(SameBits(got, alone[seq][t])) << kernels::FamilyName(family) << ": sequence " << seq
                                                      << " token " << t << " at " << threads << " threads";
          });
    }
  }
  kernels::SetFamily(kernels::KernelFamily::kExact);
}

TEST_P(Steps, DefaultStepIsWithinTheToleranceOfDecodeAloneAndGreedyAgrees) {
  std::vector<std::vector<std::vector<float>>> alone;
  for (const std::vector<int>& t : tokens_) alone.push_back(DecodeAlone(*model_, t));
  RunSchedule(*model_, tokens_, 16, {}, [&](int seq, int t, std::span<const float> got) {
    const std::vector<float>& want = alone[seq][t];
    EXPECT_LE(testing::MaxAbsErrOverMaxAbsRef(got, std::vector<double>(want.begin(), want.end())),
              kPhaseTolerance)
        << "sequence " << seq << " token " << t;
    EXPECT_EQ(Argmax(got), Argmax(want)) << "sequence " << seq << " token " << t;
  });
}

// In the fast family a decode keeps its int8 kernels in a step that also prefills another prompt
// (ForwardPass::MultiplyMixed): its logits are bitwise those it gets in a step of decodes only, so a
// server's greedy tokens do not depend on whether another request's prompt shared the step. Q4_1: every
// projection has a multi-row int8 kernel (kernels::Int8BatchPays). With a plain kernels::Gemm over the
// mixed step's rows, as before MultiplyMixed, the decode's row differs.
TEST(MixedStep, AFastFamilyDecodeBesideAPromptIsBitwiseItsDecodeBesideADecode) {
  const testing::GoldenFixture golden(testing::FixtureDir("tiny-llama"));
  Model model = Model::Load(golden.dir() + "/model.q4_1.gguf");
  const std::vector<int>& prompt = golden.prompt_ids();
  const std::size_t V = model.config().vocab_size;
  const int token = prompt[1];
  kernels::SetFamily(kernels::KernelFamily::kFast);
  for (int threads : {1, 2}) {
    kernels::SetNumThreads(threads);
    ContiguousKvCache decoding = model.NewKvCache(64), partner = model.NewKvCache(64);
    ContiguousKvCache mixed = model.NewKvCache(64), prompted = model.NewKvCache(64);
    for (ContiguousKvCache* cache : {&decoding, &partner, &mixed}) model.Prefill(prompt, *cache);
    const std::span<const float> decodes = model.Step(std::vector<SequenceChunk>{
        {&decoding, std::span(&token, 1), false}, {&partner, std::span(&token, 1), false}});
    const std::vector<float> want(decodes.begin(), decodes.begin() + static_cast<std::ptrdiff_t>(V));
    // Another sequence's prompt chunk (rows 0-4), then the decode (row 5).
    const std::span<const float> got = model.Step(std::vector<SequenceChunk>{
        {&prompted, std::span(prompt).subspan(0, 5), false}, {&mixed, std::span(&token, 1), false}});
    ASSERT_EQ(got.size(), 2 * V);
    EXPECT_TRUE(SameBits(got.subspan(V, V), want)) << threads << " threads";
  }
  kernels::SetNumThreads(0);
  kernels::SetFamily(kernels::KernelFamily::kExact);
}

TEST_P(Steps, BatchedGreedyGenerationGivesEachPromptItsTokensAlone) {
  // Each prompt alone: Prefill, then greedy Decode.
  constexpr int kNew = 8;
  std::vector<std::vector<int>> expected;
  for (const std::vector<int>& prompt : tokens_) {
    ContiguousKvCache cache = model_->NewKvCache(64);
    int token = Argmax(model_->Prefill(prompt, cache));
    std::vector<int> out = {token};
    for (int i = 1; i < kNew; ++i) out.push_back(token = Argmax(model_->Decode(token, cache)));
    expected.push_back(out);
  }
  // All three at once: one step prefills every prompt, then each step decodes all three.
  TestBlockPool pool = NewPool(8, 32);
  PagedTestKv a(pool, 64), b(pool, 64), c(pool, 64);
  KvSequence* kv[] = {&a, &b, &c};
  std::vector<std::vector<int>> got(3);
  std::vector<SequenceChunk> chunks;
  for (int s = 0; s < 3; ++s) chunks.push_back({kv[s], tokens_[s]});
  for (int i = 0; i < kNew; ++i) {
    const std::span<const float> logits = model_->Step(chunks);
    const std::size_t V = model_->config().vocab_size;
    for (int s = 0; s < 3; ++s) got[s].push_back(Argmax(logits.subspan(s * V, V)));
    for (int s = 0; s < 3; ++s) chunks[s].tokens = std::span(&got[s].back(), 1);
  }
  EXPECT_EQ(got, expected);
}

TEST_P(Steps, PrefillAndDecodeOverPagedSequencesAreBitwiseTheContiguousCache) {
  const std::vector<int>& prompt = tokens_[0];
  for (KvDtype dtype : {KvDtype::kF32, KvDtype::kF16, KvDtype::kFp8E4M3}) {
    for (int block_size : {1, 4, 16}) {
      ContiguousKvCache contiguous = model_->NewKvCache(64, dtype);
      TestBlockPool pool = NewPool(block_size, 64 / block_size + 3, dtype);
      PagedTestKv paged(pool, 64);
      const std::span<const int> head = std::span(prompt).first(6), rest = std::span(prompt).subspan(6);
      const std::string what = std::string(KvDtypeName(dtype)) + " block " + std::to_string(block_size);
      ASSERT_TRUE(SameBits(model_->Prefill(head, paged, PrefillLogits::kAllRows),
                           model_->Prefill(head, contiguous, PrefillLogits::kAllRows)))
          << what;
      for (int token : rest) {
        const std::span<const float> from_paged = model_->Decode(token, paged);
        const std::vector<float> paged_logits(from_paged.begin(), from_paged.end());
        ASSERT_TRUE(SameBits(paged_logits, model_->Decode(token, contiguous))) << what;
      }
    }
  }
}

TEST_P(Steps, BadChunksThrowAndChangeNoSequence) {
  TestBlockPool pool = NewPool(4, 64);
  ContiguousKvCache contiguous = model_->NewKvCache(16);
  PagedTestKv paged(pool, 64);
  const std::vector<int> two = {1, 2}, bad = {3, model_->config().vocab_size};
  model_->Step(std::vector<SequenceChunk>{{&contiguous, two}, {&paged, two}});
  const auto expect_error = [&](std::vector<SequenceChunk> chunks, const std::string& needle) {
    try {
      model_->Step(chunks);
      ADD_FAILURE() << "expected plumb::Error containing '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_EQ(contiguous.length(), 2);
    EXPECT_EQ(paged.length(), 2);
  };
  expect_error({{&contiguous, two}, {&paged, bad}}, "token id");
  expect_error({{&paged, two}, {&paged, two}}, "same sequence");
  expect_error({{&paged, two}, {&contiguous, std::vector<int>(15, 1)}}, "context overflow");
  expect_error({{&paged, two}, {nullptr, two}}, "no KV sequence");
  expect_error({{&paged, {}}}, "no tokens");
  EXPECT_THROW(model_->Step({}), Error);
}

TEST_P(Steps, AnExhaustedPoolThrowsBeforeAnySequenceChanges) {
  TestBlockPool pool = NewPool(4, 3);  // 12 positions in all
  ContiguousKvCache contiguous = model_->NewKvCache(64);
  PagedTestKv a(pool, 64), b(pool, 64);
  const std::vector<int> four = {5, 6, 7, 8}, six = {1, 2, 3, 4, 5, 6};
  model_->Step(std::vector<SequenceChunk>{{&a, four}, {&contiguous, four}});
  try {
    model_->Step(std::vector<SequenceChunk>{{&contiguous, four}, {&a, four}, {&b, six}});  // b needs 2 blocks
    FAIL() << "expected the pool to run dry";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exhausted"), std::string::npos) << e.what();
  }
  EXPECT_EQ(contiguous.length(), 4);
  EXPECT_EQ(a.length(), 4);
  EXPECT_EQ(b.length(), 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Steps,
                         ::testing::Values("tiny-llama", "tiny-qwen2", "tiny-qwen3moe",
                                           "tiny-llama/model.q4_1.gguf", "tiny-gemma3/model.q.gguf",
                                           "tiny-gemma3/model.f32.softcap.gguf"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string name = p.param;
                           std::replace_if(
                               name.begin(), name.end(), [](char ch) { return !std::isalnum(ch); }, '_');
                           return name;
                         });

}  // namespace
}  // namespace plumb
