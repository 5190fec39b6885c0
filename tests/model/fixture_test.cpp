// The model against the golden fixtures that the independent NumPy float64 reference wrote
// (tools/reference/make_fixtures.py): every tensor the manifest lists, each with the manifest's own metric
// and threshold (the thresholds and why they are what they are live in fixtures/<name>/manifest.json).
#include <gtest/gtest.h>

#include <map>

#include "plumb/model/model.h"
#include "support/golden.h"

namespace plumb {
namespace {

using testing::GoldenFixture;

class GoldenModel : public ::testing::TestWithParam<std::string> {};

// Everything plumb computes for the fixture's prompt, under the manifest's names.
std::map<std::string, std::vector<float>> RunPlumb(Model& model, const GoldenFixture& golden,
                                                   std::vector<int>& greedy_ids) {
  const ModelConfig& c = model.config();
  const std::vector<int>& prompt = golden.prompt_ids();
  const int P = static_cast<int>(prompt.size());
  ContiguousKvCache cache = model.NewKvCache();
  PrefillTrace trace;
  std::map<std::string, std::vector<float>> out;
  out["logits"] = model.Prefill(prompt, cache, PrefillLogits::kAllRows, &trace);
  out["embedding.output"] = trace.embedding;
  for (int l = 0; l < c.num_layers; ++l)
    out["layer." + std::to_string(l) + ".output"] = trace.layer_outputs[l];
  out["final_norm.output"] = trace.final_norm;
  for (int l = 0; l < c.num_layers; ++l) {
    std::vector<float>& k = out["kv.layer." + std::to_string(l) + ".k"];
    std::vector<float>& v = out["kv.layer." + std::to_string(l) + ".v"];
    for (int h = 0; h < c.num_kv_heads; ++h) {  // the fixture's [n_kv_heads][P][head_dim]
      for (int p = 0; p < P; ++p) {
        k.insert(k.end(), cache.Key(l, h, p), cache.Key(l, h, p) + c.head_dim);
        v.insert(v.end(), cache.Value(l, h, p), cache.Value(l, h, p) + c.head_dim);
      }
    }
  }
  // Greedy continuation through Decode: row i of greedy.logits is what token i was chosen from.
  std::vector<float>& greedy_logits = out["greedy.logits"];
  std::vector<float> logits(out["logits"].end() - c.vocab_size, out["logits"].end());
  for (int i = 0; i < golden.greedy_steps(); ++i) {
    greedy_logits.insert(greedy_logits.end(), logits.begin(), logits.end());
    const int token = static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    greedy_ids.push_back(token);
    if (i + 1 < golden.greedy_steps()) {
      const std::span<const float> next = model.Decode(token, cache);
      logits.assign(next.begin(), next.end());
    }
  }
  return out;
}

TEST_P(GoldenModel, EveryManifestTensorWithinItsStatedTolerance) {
  const GoldenFixture golden(testing::FixtureDir(GetParam()));
  Model model = Model::Load(golden.dir());
  std::vector<int> greedy_ids;
  const std::map<std::string, std::vector<float>> plumb = RunPlumb(model, golden, greedy_ids);

  int checked = 0;
  for (const std::string& name : golden.TensorNames()) {
    const testing::GoldenCheck check = golden.Check(name);
    SCOPED_TRACE(GetParam() + " " + name);
    if (check.metric == "exact") {
      const std::vector<int> expected = golden.Ids(name);
      if (name == "prompt_ids")
        EXPECT_EQ(golden.prompt_ids(), expected);
      else if (name == "greedy.ids")
        EXPECT_EQ(greedy_ids, expected);
      else
        FAIL() << "no plumb counterpart for exact tensor " << name;
    } else {
      ASSERT_EQ(check.metric, "max_abs_err/max_abs_ref");
      auto it = plumb.find(name);
      ASSERT_NE(it, plumb.end()) << "no plumb counterpart for " << name;
      const std::vector<double> expected = golden.Values(name);
      ASSERT_EQ(it->second.size(), expected.size());
      const double error = testing::MaxAbsErrOverMaxAbsRef(it->second, expected);
      EXPECT_LE(error, check.threshold) << "max_abs_err/max_abs_ref = " << error;
      RecordProperty(name, std::to_string(error));
    }
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(plumb.size()) + 2) << "every computed tensor must be in the manifest";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GoldenModel,
                         ::testing::Values("tiny-llama", "tiny-qwen2", "tiny-qwen3moe"));

}  // namespace
}  // namespace plumb
