// plumb estimate as a user runs it: the JSON schema (every key and its type, docs/roofline.md "JSON"), the
// textbook figures through the CLI, the flags that override a preset, and one clear error line for each
// kind of bad input.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "support/golden.h"
#include "support/process.h"

namespace plumb {
namespace {

using testing::ProcessResult;
using testing::RunPlumb;

nlohmann::json Json(const std::string& args) {
  const ProcessResult r = RunPlumb("estimate " + args + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(r.output);
}

void ExpectKeys(const nlohmann::json& object,
                std::initializer_list<std::pair<const char*, nlohmann::json::value_t>> keys) {
  ASSERT_TRUE(object.is_object());
  EXPECT_EQ(object.size(), keys.size()) << object.dump(2);
  for (const auto& [key, type] : keys) {
    ASSERT_TRUE(object.contains(key)) << key;
    const nlohmann::json& v = object.at(key);
    if (type == nlohmann::json::value_t::number_float) {
      EXPECT_TRUE(v.is_number()) << key;
    } else {
      EXPECT_EQ(v.type(), type) << key << ": " << v.dump();
    }
  }
}

using T = nlohmann::json::value_t;
constexpr T kNumber = T::number_float;  // any number
constexpr T kInt = T::number_unsigned;
constexpr T kString = T::string;

TEST(EstimateCliTest, JsonSchemaIsStable) {
  const nlohmann::json j =
      Json("--model-card llama-3-70b --hardware h100-sxm --batch 1,64 --context 128,4096");
  ExpectKeys(j, {{"schema", kString},
                 {"schema_version", kInt},
                 {"model", T::object},
                 {"hardware", T::object},
                 {"contexts", T::array},
                 {"decode", T::array}});
  EXPECT_EQ(j["schema"], "plumb.estimate");
  EXPECT_EQ(j["schema_version"], 1);
  ExpectKeys(j["model"], {{"card", kString},
                          {"parameters", kNumber},
                          {"active_parameters", kNumber},
                          {"dtype", kString},
                          {"bytes_per_parameter", kNumber},
                          {"weight_bytes", kNumber},
                          {"kv_dtype", kString},
                          {"kv_bytes_per_token", kNumber},
                          {"layers", kInt},
                          {"hidden_size", kInt},
                          {"kv_heads", kInt},
                          {"head_dim", kInt}});
  ExpectKeys(j["hardware"], {{"name", kString},
                             {"peak_flops", kNumber},
                             {"bandwidth", kNumber},
                             {"memory_bytes", kNumber},
                             {"source", kString},
                             {"tp", kInt},
                             {"memory_utilization", kNumber},
                             {"usable_memory_bytes", kNumber},
                             {"ridge", kNumber},
                             {"batch1_intensity", kNumber}});
  ASSERT_EQ(j["contexts"].size(), 2u);
  for (const nlohmann::json& c : j["contexts"]) {
    ExpectKeys(c, {{"context", kInt},
                   {"kv_bytes_per_sequence", kNumber},
                   {"prefill_flops", kNumber},
                   {"prefill_seconds", kNumber},
                   {"compute_bound_batch", kNumber},
                   {"max_sequences", kNumber}});
  }
  ASSERT_EQ(j["decode"].size(), 4u);
  for (const nlohmann::json& r : j["decode"]) {
    ExpectKeys(r, {{"context", kInt},
                   {"batch", kInt},
                   {"step_bytes", kNumber},
                   {"step_flops", kNumber},
                   {"step_seconds", kNumber},
                   {"tokens_per_second", kNumber},
                   {"bound", kString},
                   {"kv_bytes", kNumber},
                   {"fits", T::boolean}});
  }
  EXPECT_EQ(j["model"]["kv_bytes_per_token"], 327680);
  EXPECT_EQ(j["contexts"][1]["kv_bytes_per_sequence"], 1342177280);
  EXPECT_EQ(j["contexts"][1]["compute_bound_batch"], -1);
}

TEST(EstimateCliTest, TextbookFiguresThroughTheCli) {
  const nlohmann::json j = Json("--model-card llama-3-70b --hardware h100 --context 1 --batch 1");
  EXPECT_NEAR(j["decode"][0]["step_seconds"].get<double>(), 41.8e-3, 0.42e-3);
  EXPECT_NEAR(j["hardware"]["ridge"].get<double>(), 295.2, 0.1);
  const nlohmann::json int4 =
      Json("--model-card llama-3-70b --hardware h100-sxm --dtype int4 --context 1 --batch 1");
  EXPECT_NEAR(int4["decode"][0]["step_seconds"].get<double>(), 10.4e-3, 0.104e-3);
  EXPECT_EQ(int4["hardware"]["batch1_intensity"], 4);
}

TEST(EstimateCliTest, OverridesReplaceThePreset) {
  const nlohmann::json j = Json(
      "--model-card mistral-7b --hardware h200 --peak-tflops 100 --bandwidth-gbs 1000 --memory-gb 10 --tp 2");
  EXPECT_DOUBLE_EQ(j["hardware"]["peak_flops"].get<double>(), 100e12);
  EXPECT_DOUBLE_EQ(j["hardware"]["bandwidth"].get<double>(), 1000e9);
  EXPECT_DOUBLE_EQ(j["hardware"]["memory_bytes"].get<double>(), 10e9);
  EXPECT_DOUBLE_EQ(j["hardware"]["usable_memory_bytes"].get<double>(), 2 * 10e9 * 0.9);
  // A config.json is a model card too: the tiny fixture's shapes.
  const nlohmann::json tiny =
      Json("--model-card " + testing::FixtureDir("tiny-llama") + "/config.json --hardware b200 --dtype q8_0");
  EXPECT_EQ(tiny["model"]["hidden_size"], 64);
  EXPECT_EQ(tiny["model"]["dtype"], "q8_0");
}

TEST(EstimateCliTest, TableNamesTheFigures) {
  const ProcessResult r = RunPlumb("estimate --model-card smollm2-135m --hardware h100-sxm --context 4096");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* needle :
       {"ridge 295.2 FLOP/B", "| context | batch |", "bandwidth", "compute-bound from batch"}) {
    EXPECT_NE(r.output.find(needle), std::string::npos) << needle << "\n" << r.output;
  }
}

// One command sets a MoE with latent attention beside a dense 70B on one GPU: each card's tables, then the
// two side by side; the MoE's lines state the routing assumption and the attention FLOPs counted.
TEST(EstimateCliTest, MoeBesideDenseOnOneGpu) {
  const ProcessResult r =
      RunPlumb("estimate --model-card deepseek-v3,llama-3-70b --hardware h200 --dtype fp8 --batch 1,64");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* needle :
       {"plumb estimate: deepseek-v3 on h200", "plumb estimate: llama-3-70b on h200", "active per token",
        "route independently and uniformly", "E·(1 − (1 − k/E)^B)", "B 1: 8.0", "absorbed form",
        "side by side at context 4096 on h200", "| deepseek-v3 | 671 G | 36.6 G |"}) {
    EXPECT_NE(r.output.find(needle), std::string::npos) << needle << "\n" << r.output;
  }
  // The dense card's model line is the one it always had: no active count.
  const std::size_t llama = r.output.find("plumb estimate: llama-3-70b");
  ASSERT_NE(llama, std::string::npos);
  const std::size_t line = r.output.find("model:", llama);
  EXPECT_EQ(r.output.substr(line, r.output.find('\n', line) - line).find("active"), std::string::npos);
}

TEST(EstimateCliTest, MoeFiguresInJson) {
  const nlohmann::json ds =
      Json("--model-card deepseek-v3 --hardware h200 --dtype fp8 --batch 1 --context 1");
  EXPECT_EQ(ds["model"]["kv_bytes_per_token"], (512 + 64) * 61 * 2);  // the latent and RoPE key, FP16
  EXPECT_NEAR(ds["model"]["parameters"].get<double>() / 1e9, 671, 0.5);
  EXPECT_NEAR(ds["model"]["active_parameters"].get<double>() / 1e9, 36.6, 0.05);
  // Batch 1 reads the active parameters only, a byte each in FP8 (+ row scales, norms, KV): not 671 GB.
  EXPECT_NEAR(ds["decode"][0]["step_bytes"].get<double>() / ds["model"]["active_parameters"].get<double>(), 1,
              0.01);
  const nlohmann::json mx = Json("--model-card mixtral-8x7b --hardware h100 --batch 1 --context 1");
  EXPECT_NEAR(mx["model"]["parameters"].get<double>() / 1e9, 46.7, 0.05);
  EXPECT_EQ(mx["model"]["kv_bytes_per_token"], 2 * 32 * 8 * 128 * 2);  // ordinary GQA attention
}

// DeepSeek-V3's config.json (its shape keys, with the rope_scaling and FP8 quantization_config the loader
// would refuse) as a model card gives the preset's figures.
TEST(EstimateCliTest, MoeConfigJsonIsAModelCard) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("plumb-estimate-ds-" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << R"({"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
    "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_hidden_layers": 61,
    "num_attention_heads": 128, "num_key_value_heads": 128, "n_shared_experts": 1, "n_routed_experts": 256,
    "num_experts_per_tok": 8, "first_k_dense_replace": 3, "kv_lora_rank": 512, "q_lora_rank": 1536,
    "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "vocab_size": 129280,
    "max_position_embeddings": 163840, "rms_norm_eps": 1e-06, "rope_theta": 10000, "tie_word_embeddings": false,
    "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096},
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "weight_block_size": [128, 128]}})";
  const nlohmann::json file = Json("--model-card " + path.string() + " --hardware h200 --dtype fp8");
  const nlohmann::json card = Json("--model-card deepseek-v3 --hardware h200 --dtype fp8");
  std::filesystem::remove(path);
  for (const char* key : {"parameters", "active_parameters", "weight_bytes", "kv_bytes_per_token"}) {
    EXPECT_EQ(file["model"][key], card["model"][key]) << key;
  }
  EXPECT_EQ(file["decode"], card["decode"]);
}

// Speculative decoding (docs/roofline.md "Speculative decoding"): the expected tokens per target step and the
// speedup from α, k and the draft's cost, given as a ratio.
TEST(EstimateCliTest, SpeculativeSpeedupFromACostRatio) {
  const nlohmann::json j = Json(
      "--model-card llama-3-70b --hardware h100-sxm --acceptance 0.8 --draft-tokens 4 --draft-cost 0.05");
  ExpectKeys(j["speculative"], {{"acceptance", kNumber},
                                {"draft_tokens", kInt},
                                {"draft_cost", kNumber},
                                {"draft_card", T::null},
                                {"draft_step_seconds", T::null},
                                {"target_step_seconds", T::null},
                                {"verify_cost", kNumber},
                                {"tokens_per_step", kNumber},
                                {"speedup", kNumber},
                                {"formula", kString}});
  const double alpha = 0.8, c = 0.05, tokens = (1 - std::pow(alpha, 5)) / (1 - alpha);
  EXPECT_NEAR(j["speculative"]["tokens_per_step"].get<double>(), tokens, 1e-9);
  EXPECT_NEAR(j["speculative"]["speedup"].get<double>(), tokens / (4 * c + 1), 1e-9);
  EXPECT_EQ(j["speculative"]["draft_tokens"], 4);
  // Without --acceptance the JSON has no speculative object (JsonSchemaIsStable's keys).
  EXPECT_FALSE(Json("--model-card llama-3-70b --hardware h100-sxm").contains("speculative"));
}

// --draft-card: c is the draft's batch-1 decode step over the target's, both bandwidth-bound on the same
// hardware, which the two cards' own estimates give.
TEST(EstimateCliTest, SpeculativeCostFromADraftCard) {
  const std::string common = " --hardware h100-sxm --batch 1 --context 2048";
  const nlohmann::json j =
      Json("--model-card llama-3-70b --draft-card llama-3-8b --acceptance 0.7 --draft-tokens 5" + common);
  const double target = Json("--model-card llama-3-70b" + common)["decode"][0]["step_seconds"].get<double>();
  const double draft = Json("--model-card llama-3-8b" + common)["decode"][0]["step_seconds"].get<double>();
  const nlohmann::json& s = j["speculative"];
  EXPECT_EQ(s["draft_card"], "llama-3-8b");
  EXPECT_NEAR(s["target_step_seconds"].get<double>(), target, 1e-9 * target);
  EXPECT_NEAR(s["draft_step_seconds"].get<double>(), draft, 1e-9 * draft);
  EXPECT_NEAR(s["draft_cost"].get<double>(), draft / target, 1e-9);
  EXPECT_GT(s["draft_cost"].get<double>(), 0.1);  // 8 B of 70 B parameters, and its KV
  EXPECT_LT(s["draft_cost"].get<double>(), 0.13);
  const double tokens = (1 - std::pow(0.7, 6)) / (1 - 0.7);
  EXPECT_NEAR(s["speedup"].get<double>(), tokens / (5 * draft / target + 1), 1e-9);

  const ProcessResult r = RunPlumb(
      "estimate --model-card llama-3-70b --draft-card llama-3-8b --acceptance 0.7 "
      "--draft-tokens 5" +
      common);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* needle : {"speculative: k 5 draft tokens, acceptance α 0.700", "(llama-3-8b ",
                             "(1 − α^(k+1)) / (1 − α) = 2.941", "speedup ≈ that / (k·c + v) = ",
                             "v = 1.00 target steps: one bandwidth-bound step"}) {
    EXPECT_NE(r.output.find(needle), std::string::npos) << needle << "\n" << r.output;
  }
}

// --verify-cost: a verification step that costs v decode steps (a CPU's, docs/performance.md) divides the
// expected tokens per step by k·c + v instead of k·c + 1.
TEST(EstimateCliTest, SpeculativeVerifyCostDividesTheTokensPerStep) {
  const nlohmann::json j = Json(
      "--model-card smollm2-135m --hardware h100-sxm --acceptance 0.9 --draft-tokens 4 --draft-cost 0.25 "
      "--verify-cost 2.8");
  const nlohmann::json& s = j["speculative"];
  EXPECT_EQ(s["verify_cost"].get<double>(), 2.8);
  const double tokens = (1 - std::pow(0.9, 5)) / (1 - 0.9);
  EXPECT_NEAR(s["speedup"].get<double>(), tokens / (4 * 0.25 + 2.8), 1e-9);
  EXPECT_LT(s["speedup"].get<double>(), 1.1);  // what the Q4_1 target's n-gram runs measured: about 1
}

TEST(EstimateCliTest, BadInputGivesOneClearLine) {
  const std::pair<const char*, const char*> cases[] = {
      {"--hardware h100-sxm", "--model-card is required"},
      {"--model-card llama-3-8b", "--hardware is required"},
      {"--model-card gpt-9 --hardware h100-sxm", "'gpt-9' is neither a preset"},
      {"--model-card llama-3-8b --hardware tpu", "unknown hardware 'tpu'"},
      {"--model-card llama-3-8b --hardware h100-sxm --dtype q9", "unknown weight dtype 'q9'"},
      {"--model-card llama-3-8b --hardware h100-sxm --kv-dtype int3", "int3"},
      {"--model-card llama-3-8b --hardware h100-sxm --tp 0", "--tp"},
      {"--model-card llama-3-8b --hardware h100-sxm --batch 0", "--batch"},
      {"--model-card llama-3-8b --hardware h100-sxm --context x", "--context"},
      {"--model-card llama-3-8b --hardware h100-sxm --peak-tflops -3",
       "--peak-tflops: expected a positive number"},
      {"--model-card llama-3-8b --hardware h100-sxm --memory-utilization 1.5", "--memory-utilization"},
      {"--model-card deepseek-v3,llama-3-70b --hardware h200 --json", "--json: one model card at a time"},
      {"--model-card deepseek-v3,gpt-9 --hardware h200", "'gpt-9' is neither a preset"},
      {"--model-card llama-3-8b --hardware h100-sxm --acceptance 1.5 --draft-cost 0.1",
       "--acceptance: expected a number in [0, 1], got '1.5'"},
      {"--model-card llama-3-8b --hardware h100-sxm --verify-cost 2", "--verify-cost needs --acceptance"},
      {"--model-card llama-3-8b --hardware h100-sxm --acceptance 0.5 --draft-cost 0.1 --verify-cost 0",
       "--verify-cost"},
      {"--model-card llama-3-8b --hardware h100-sxm --acceptance 0.5",
       "exactly one of --draft-cost C and --draft-card NAME"},
      {"--model-card llama-3-8b --hardware h100-sxm --acceptance 0.5 --draft-cost 0.1 --draft-card "
       "llama-3-8b",
       "exactly one of --draft-cost C and --draft-card NAME"},
      {"--model-card llama-3-8b --hardware h100-sxm --draft-cost 0.1", "--draft-cost needs --acceptance"},
      {"--model-card llama-3-8b --hardware h100-sxm --acceptance 0.5 --draft-cost -1", "--draft-cost"},
      {"--model-card llama-3-8b --hardware h100-sxm --acceptance 0.5 --draft-cost 0.1 --draft-tokens 0",
       "--draft-tokens"},
      {"--model-card llama-3-70b --hardware h100-sxm --acceptance 0.5 --draft-card gpt-9",
       "'gpt-9' is neither a preset"},
  };
  for (const auto& [args, needle] : cases) {
    const ProcessResult r = RunPlumb(std::string("estimate ") + args);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.output;
    EXPECT_EQ(r.output.rfind("plumb: error: ", 0), 0u) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace plumb
