// plumb roofline on the tiny fixture model with tiny probes (fast): the JSON schema (every key and its type,
// docs/roofline.md "JSON"), that the cost columns are the cost model's, the SVG, and one clear error line for
// each kind of bad input. Measured figures are only checked to be positive: nothing asserts a speed.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/golden.h"
#include "support/process.h"

namespace plumb {
namespace {

using testing::ProcessResult;
using testing::RunPlumb;
using T = nlohmann::json::value_t;

const std::string kModel = testing::FixtureDir("tiny-llama") + "/model.q8_0.gguf";
const std::string kFast =
    " --probe-mib 4 --probe-repetitions 1 --steps 1 --prefill-runs 1 --prompt-tokens 8 --threads 1";

void ExpectKeys(const nlohmann::json& object, std::initializer_list<std::pair<const char*, T>> keys) {
  ASSERT_TRUE(object.is_object()) << object.dump();
  EXPECT_EQ(object.size(), keys.size()) << object.dump(2);
  for (const auto& [key, type] : keys) {
    ASSERT_TRUE(object.contains(key)) << key;
    const nlohmann::json& v = object.at(key);
    if (type == T::number_float) {
      EXPECT_TRUE(v.is_number()) << key << ": " << v.dump();
    } else {
      EXPECT_EQ(v.type(), type) << key << ": " << v.dump();
    }
  }
}

constexpr T kNumber = T::number_float;
constexpr T kInt = T::number_unsigned;
constexpr T kString = T::string;

// Every ForwardKernel, in order; `quantize` (the fast family's int8 rounding of x) only where it ran.
void ExpectKernels(const nlohmann::json& kernels, bool quantize) {
  ASSERT_EQ(kernels.size(), quantize ? 17u : 16u);
  EXPECT_EQ(kernels[0]["name"], "embedding");
  EXPECT_EQ(kernels[2]["name"], quantize ? "quantize" : "q_proj");
  EXPECT_EQ(kernels[kernels.size() - 1]["name"], "lm_head");
  for (const nlohmann::json& k : kernels) {
    ExpectKeys(k, {{"name", kString},
                   {"instances", kInt},
                   {"shape", kString},
                   {"flops", kNumber},
                   {"bytes", kNumber},
                   {"weight_bytes", kNumber},
                   {"activation_bytes", kNumber},
                   {"kv_bytes", kNumber},
                   {"intensity", kNumber},
                   {"roofline_seconds", kNumber},
                   {"measured_seconds", kNumber},
                   {"regime", kString}});
    EXPECT_GT(k["measured_seconds"].get<double>(), 0) << k.dump();
  }
}

TEST(RooflineCliTest, JsonSchemaIsStable) {
  const ProcessResult r = RunPlumb("roofline --model " + kModel +
                                   " --batch 1,3 --context 0,20 --kv-budget-mib 1 --json" + kFast + "");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output);
  ExpectKeys(j, {{"schema", kString},
                 {"schema_version", kInt},
                 {"model", T::object},
                 {"kernels", kString},
                 {"host", T::object},
                 {"decode_kernels", T::object},
                 {"prefill_kernels", T::object},
                 {"decode", T::array},
                 {"prefill", T::object}});
  EXPECT_EQ(j["schema"], "plumb.roofline");
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["kernels"].get<std::string>().rfind("fast (int8 activations for GGUF Q4_0", 0), 0u)
      << j["kernels"];
  ExpectKeys(j["model"], {{"path", kString},
                          {"dtype", kString},
                          {"parameters", kNumber},
                          {"weight_bytes", kNumber},
                          {"kv_dtype", kString},
                          {"kv_bytes_per_token", kNumber},
                          {"layers", kInt},
                          {"hidden_size", kInt}});
  EXPECT_EQ(j["model"]["dtype"], "Q8_0");
  EXPECT_EQ(j["model"]["kv_bytes_per_token"], 2 * 2 * 32 * 4);  // K and V × 2 layers × 2 heads × 16 × FP32
  ExpectKeys(j["host"], {{"threads", kInt},
                         {"isa", kString},
                         {"probe_bytes", kInt},
                         {"bandwidth", T::array},
                         {"peak_flops_per_core", kNumber},
                         {"peak_flops", kNumber},
                         {"ridge", kNumber}});
  ASSERT_EQ(j["host"]["bandwidth"].size(), 1u);
  ExpectKeys(j["host"]["bandwidth"][0], {{"threads", kInt}, {"bytes_per_second", kNumber}});
  ExpectKeys(j["decode_kernels"], {{"batch", kInt}, {"context", kInt}, {"kernels", T::array}});
  // Q8_0 has int8 kernels and roofline runs the fast family by default: a batch-1 decode step quantizes x
  // (its first --batch is 1); an 8-token prefill does it inside its projections.
  ExpectKernels(j["decode_kernels"]["kernels"], /*quantize=*/true);
  ExpectKeys(j["prefill_kernels"], {{"prompt", kInt}, {"kernels", T::array}});
  ExpectKernels(j["prefill_kernels"]["kernels"], /*quantize=*/false);
  // The tiny model's q_proj at batch 1: 2·64·64 FLOPs in each of 2 layers.
  EXPECT_EQ(j["decode_kernels"]["kernels"][3]["name"], "q_proj");
  EXPECT_EQ(j["decode_kernels"]["kernels"][3]["flops"], 2 * 2 * 64 * 64);
  ASSERT_EQ(j["decode"].size(), 4u);
  for (const nlohmann::json& d : j["decode"]) {
    const bool skipped = d["skipped"].get<bool>();
    ExpectKeys(d, {{"context", kInt},
                   {"batch", kInt},
                   {"step_bytes", kNumber},
                   {"step_flops", kNumber},
                   {"intensity", kNumber},
                   {"bandwidth_ceiling_tokens_per_second", kNumber},
                   {"compute_ceiling_tokens_per_second", kNumber},
                   {"skipped", T::boolean},
                   {"kv_bytes", kNumber},
                   {"measured_tokens_per_second", skipped ? T::null : kNumber},
                   {"mbu", skipped ? T::null : kNumber}});
  }
  EXPECT_FALSE(j["decode"][0]["skipped"].get<bool>());
  ExpectKeys(j["prefill"], {{"prompt", kInt},
                            {"flops", kNumber},
                            {"bytes", kNumber},
                            {"intensity", kNumber},
                            {"compute_ceiling_tokens_per_second", kNumber},
                            {"measured_tokens_per_second", kNumber},
                            {"mfu", kNumber}});
}

// The kernel-by-kernel decode table is the first --batch at the first --context, timed: with --batch 3,1
// it used to describe batch 1 and print zeros (that row's timer was only run for batch 1).
TEST(RooflineCliTest, KernelTableIsTheFirstBatchAndContextMeasured) {
  const ProcessResult r =
      RunPlumb("roofline --model " + kModel + " --batch 3,1 --context 20 --json" + kFast + "");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["decode_kernels"]["batch"], 3);
  EXPECT_EQ(j["decode_kernels"]["context"], 20);
  const nlohmann::json& q_proj = j["decode_kernels"]["kernels"][2];
  ASSERT_EQ(q_proj["name"], "q_proj");
  EXPECT_EQ(q_proj["flops"], 3 * 2 * 2 * 64 * 64);  // 3 rows, 2 layers
  EXPECT_GT(q_proj["measured_seconds"].get<double>(), 0.0);
}

TEST(RooflineCliTest, TablesAndSvg) {
  const std::string svg = ::testing::TempDir() + "/roofline_test.svg";
  const ProcessResult r = RunPlumb("roofline --model " + testing::FixtureDir("tiny-llama") +
                                   " --batch 1,2 --context 4,16 --svg " + svg + kFast + "");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* needle : {"host: read bandwidth", "FP32 FMA peak", "| q_proj | 2 | 1×64 · 64×64 |",
                             "| q_proj | 2 | 8×64 · 64×64 |", "decode against the roofline", "MFU %"}) {
    EXPECT_NE(r.output.find(needle), std::string::npos) << needle << "\n" << r.output;
  }
  std::ifstream file(svg);
  std::stringstream text;
  text << file.rdbuf();
  EXPECT_EQ(text.str().rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(text.str().find("bandwidth ceiling, context 16"), std::string::npos);
  EXPECT_NE(text.str().find("measured, batch 2"), std::string::npos);
  EXPECT_NE(text.str().find("</svg>"), std::string::npos);
}

TEST(RooflineCliTest, RepacksWithDtype) {
  const ProcessResult r = RunPlumb("roofline --model " + testing::FixtureDir("tiny-llama") +
                                   " --dtype int4-sym-g32 --batch 1 --context 4 --json" + kFast + "");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["model"]["dtype"], "int4-sym-g32");
}

TEST(RooflineCliTest, BadInputGivesOneClearLine) {
  const std::pair<std::string, const char*> cases[] = {
      {"--batch 1", "--model"},
      {"--model /nonexistent/model.gguf", "/nonexistent/model.gguf"},
      {"--model " + kModel + " --batch 0", "--batch"},
      {"--model " + kModel + " --context 500", "--context: 500"},
      {"--model " + kModel + " --kv-dtype f8", "f8"},
      {"--model " + kModel + " --dtype q4_k", "--dtype: plumb repacks a model only to"},
      {"--model " + kModel + " --steps x", "--steps"},
      {"--model " + kModel + " --prompt-tokens 1000", "--prompt-tokens"},
  };
  for (const auto& [args, needle] : cases) {
    const ProcessResult r = RunPlumb("roofline " + args + kFast);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.output;
    EXPECT_EQ(r.output.rfind("plumb: error: ", 0), 0u) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace plumb
