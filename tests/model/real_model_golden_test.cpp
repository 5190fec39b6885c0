// The real models plumb is tested on, each against the float64 NumPy reference run on gguf-py's
// dequantization of the same file:
//   - SmolLM2-135M-Instruct Q4_1, the default model (fixtures/smollm2,
//   tools/reference/make_smollm2_golden.py);
//   - Gemma 3 270M Q4_K_M (fixtures/gemma3, tools/reference/make_gemma3_golden.py).
// scripts/fetch-model gets both. For each prompt of a fixture:
//   * plumb's tokenizer gives the reference's prompt ids (made by an independent tokenizer: HF tokenizers
//     for SmolLM2, sentencepiece for Gemma 3, each built from the GGUF vocabulary);
//   * the logits at the reference's top-64 ids, at every prompt position and every greedy step, and the
//     full logits of the last prompt position, within the manifest's threshold (10x the float32-vs-float64
//     difference the reference measured on itself; reasons in the manifest);
//   * the greedy continuation, exactly (the manifest states the smallest top-1/top-2 gap against what the
//     threshold allows two engines to disagree by).
// Logits are compared at the golden ids rather than ids by rank: below the top few, logits within the
// threshold of each other may legitimately swap places.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "plumb/engine/text_model.h"
#include "support/golden.h"

namespace plumb {
namespace {

// A real model and its golden fixture.
struct RealModel {
  const char* fixture;  // fixtures/<fixture>
  const char* file;     // models/<file>
  const char* fetch;    // scripts/fetch-model <fetch>
  const char* sha256;   // the file scripts/fetch-model pins
  std::size_t prompts;  // in the fixture
};

class RealModelGolden : public ::testing::TestWithParam<RealModel> {
 protected:
  void SetUp() override {
    const RealModel& m = GetParam();
    if (loaded_for_ == m.fixture) return;  // one model loaded at a time, kept for the model's tests
    delete loaded_;
    delete golden_;
    loaded_ = nullptr;
    loaded_for_.clear();
    golden_ = new testing::GoldenFixture(testing::FixtureDir(m.fixture));
    const std::string path = std::string(PLUMB_SOURCE_DIR) + "/models/" + m.file;
    // A failure, not a skip: the test command fetches the models before running the tests.
    ASSERT_TRUE(std::filesystem::exists(path)) << path << " is missing: run scripts/fetch-model " << m.fetch;
    loaded_ = new TextModel(TextModel::Load(path));
    loaded_for_ = m.fixture;
  }
  static void TearDownTestSuite() {
    delete loaded_;
    delete golden_;
    loaded_ = nullptr;
    golden_ = nullptr;
    loaded_for_.clear();
  }

  // The logits at `ids` ([rows][k]) of each row of `logits` ([rows][V]).
  static std::vector<float> AtIds(const std::vector<float>& logits, const std::vector<int>& ids, int k) {
    const int V = loaded_->model.config().vocab_size;
    std::vector<float> picked(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) picked[i] = logits[(i / k) * V + ids[i]];
    return picked;
  }

  void ExpectWithin(const std::string& name, const std::vector<float>& actual) {
    const testing::GoldenCheck check = golden_->Check(name);
    ASSERT_EQ(check.metric, "max_abs_err/max_abs_ref") << name;
    const double error = testing::MaxAbsErrOverMaxAbsRef(actual, golden_->Values(name));
    EXPECT_LE(error, check.threshold) << name;
    RecordProperty(name, testing::FormatError(error));
  }

  static testing::GoldenFixture* golden_;
  static TextModel* loaded_;
  static std::string loaded_for_;
};
testing::GoldenFixture* RealModelGolden::golden_ = nullptr;
TextModel* RealModelGolden::loaded_ = nullptr;
std::string RealModelGolden::loaded_for_;

TEST_P(RealModelGolden, TheFixtureIsForThisModelFile) {
  EXPECT_EQ(golden_->manifest().at("model").at("file"), GetParam().file);
  EXPECT_EQ(golden_->manifest().at("model").at("sha256"), GetParam().sha256)
      << "scripts/fetch-model pins this SHA-256; the golden must be of the same file";
  EXPECT_EQ(golden_->manifest().at("prompts").size(), GetParam().prompts);
}

TEST_P(RealModelGolden, EveryPromptTokensLogitsAndGreedyContinuation) {
  const int k = golden_->manifest().at("top_k").get<int>();
  const int steps = golden_->manifest().at("greedy_steps").get<int>();
  const int V = loaded_->model.config().vocab_size;
  for (const auto& prompt : golden_->manifest().at("prompts")) {
    const std::string name = prompt.at("name");
    SCOPED_TRACE(name);
    const std::vector<int> expected_ids = golden_->Ids(name + ".prompt_ids");
    // Gemma 3's prompt texts write "<bos>" themselves: the tokenizer adds no second one (docs/tokenizers.md).
    const std::vector<int> ids = loaded_->tokenizer->Encode(prompt.at("text").get<std::string>(), true, true);
    EXPECT_EQ(ids, expected_ids) << "plumb's tokenizer disagrees with the reference's";

    ContiguousKvCache cache = loaded_->model.NewKvCache(static_cast<int>(expected_ids.size()) + steps);
    const std::vector<float> logits = loaded_->model.Prefill(expected_ids, cache, PrefillLogits::kAllRows);
    ExpectWithin(name + ".prompt.top64.logits", AtIds(logits, golden_->Ids(name + ".prompt.top64.ids"), k));
    ExpectWithin(name + ".last.logits", std::vector<float>(logits.end() - V, logits.end()));

    // Greedy continuation through Decode (no stop at EOS: the fixture runs all 64 steps).
    std::vector<float> step_logits(logits.end() - V, logits.end());
    std::vector<float> greedy_logits;
    std::vector<int> greedy;
    for (int i = 0; i < steps; ++i) {
      greedy_logits.insert(greedy_logits.end(), step_logits.begin(), step_logits.end());
      greedy.push_back(
          static_cast<int>(std::max_element(step_logits.begin(), step_logits.end()) - step_logits.begin()));
      if (i + 1 < steps) {
        const std::span<const float> next = loaded_->model.Decode(greedy.back(), cache);
        step_logits.assign(next.begin(), next.end());
      }
    }
    EXPECT_EQ(greedy, golden_->Ids(name + ".greedy.ids"));
    ExpectWithin(name + ".greedy.top64.logits",
                 AtIds(greedy_logits, golden_->Ids(name + ".greedy.top64.ids"), k));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, RealModelGolden,
    ::testing::Values(RealModel{"smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "smollm2",
                                "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", 4},
                      RealModel{"gemma3", "gemma-3-270m-q4_k_m.gguf", "gemma3",
                                "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818", 4}),
    [](const ::testing::TestParamInfo<RealModel>& p) { return std::string(p.param.fixture); });

}  // namespace
}  // namespace plumb
