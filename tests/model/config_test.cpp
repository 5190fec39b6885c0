// config.json parsing: the fields plumb reads, their defaults, and a clear error for each kind of mistake.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "plumb/core/error.h"
#include "plumb/model/config.h"

namespace plumb {
namespace {

nlohmann::json LlamaConfig() {
  return {{"model_type", "llama"},
          {"hidden_size", 64},
          {"intermediate_size", 160},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 500000.0},
          {"vocab_size", 320},
          {"max_position_embeddings", 128},
          {"tie_word_embeddings", false},
          {"bos_token_id", 1},
          {"eos_token_id", 2}};
}

// The message of the plumb::Error that parsing `config` throws ("" if it does not throw).
std::string ErrorOf(const nlohmann::json& config) {
  try {
    ParseConfigJson(config.dump(), "cfg.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Config, ReadsEveryFieldAndDerivesHeadDim) {
  const ModelConfig c = ParseConfigJson(LlamaConfig().dump(), "cfg.json");
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 160);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);  // hidden_size / num_attention_heads
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
  EXPECT_EQ(c.vocab_size, 320);
  EXPECT_EQ(c.max_position_embeddings, 128);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, std::vector<int>{2});
}

TEST(Config, ExplicitHeadDimListOfEosAndDefaults) {
  nlohmann::json j = LlamaConfig();
  j["head_dim"] = 32;
  j["eos_token_id"] = {2, 7};
  j.erase("num_key_value_heads");
  j.erase("rope_theta");
  j.erase("tie_word_embeddings");
  const ModelConfig c = ParseConfigJson(j.dump(), "cfg.json");
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.num_kv_heads, 4);  // multi-head attention when absent
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.0f);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{2, 7}));
}

TEST(Config, Qwen2ImpliesAttentionBias) {
  nlohmann::json j = LlamaConfig();
  j["model_type"] = "qwen2";
  EXPECT_TRUE(ParseConfigJson(j.dump(), "cfg.json").attention_bias);
}

TEST(Config, GemmaCheckpointsAreRefusedWithTheReason) {
  for (const char* type : {"gemma3", "gemma3_text", "gemma2"}) {
    nlohmann::json j = LlamaConfig();
    j["model_type"] = type;
    const std::string message = ErrorOf(j);
    EXPECT_NE(message.find("plumb runs Gemma 3 from a GGUF file"), std::string::npos) << message;
    EXPECT_NE(message.find(type), std::string::npos) << message;
  }
}

TEST(Config, EachMistakeNamesTheFileAndField) {
  const auto expect_error = [](nlohmann::json j, const std::string& needle) {
    const std::string message = ErrorOf(j);
    EXPECT_NE(message.find("cfg.json"), std::string::npos) << message;
    EXPECT_NE(message.find(needle), std::string::npos) << "wanted '" << needle << "' in: " << message;
  };
  nlohmann::json j = LlamaConfig();
  j.erase("hidden_size");
  expect_error(j, "missing required field \"hidden_size\"");
  j = LlamaConfig();
  j["vocab_size"] = "320";
  expect_error(j, "\"vocab_size\" must be an integer");
  j = LlamaConfig();
  j["num_key_value_heads"] = 3;
  expect_error(j, "does not divide num_attention_heads");
  j = LlamaConfig();
  j["num_hidden_layers"] = 0;
  expect_error(j, "\"num_hidden_layers\" must be positive");
  j = LlamaConfig();
  j["rms_norm_eps"] = "tiny";
  expect_error(j, "\"rms_norm_eps\" must be a number");
  j = LlamaConfig();
  j["eos_token_id"] = 320;
  expect_error(j, "eos_token_id = 320");
  j = LlamaConfig();
  j["head_dim"] = 15;
  expect_error(j, "head_dim = 15 must be even");
  j = LlamaConfig();
  j["tie_word_embeddings"] = 1;
  expect_error(j, "\"tie_word_embeddings\" must be true or false");
  j = LlamaConfig();
  j["rope_scaling"] = {{"rope_type", "llama3"}};
  expect_error(j, "rope_scaling");
  j = LlamaConfig();
  j["hidden_size"] = 1LL << 40;
  expect_error(j, "out of range");
}

// Found reviewing the reader while writing fuzz/config_json_fuzz.cpp: a float field beyond float's range was
// converted anyway (undefined behaviour; in practice infinity, which passed the positivity checks), and an
// integer above INT64_MAX wrapped to a negative number in the message.
TEST(Config, NumbersBeyondTheirTypeAreErrorsNamingTheField) {
  const auto expect = [](const char* key, const nlohmann::json& value, const std::string& needle) {
    nlohmann::json j = LlamaConfig();
    j[key] = value;
    const std::string message = ErrorOf(j);
    EXPECT_NE(message.find(needle), std::string::npos) << message;
  };
  expect("rms_norm_eps", 1e300, "cfg.json: field \"rms_norm_eps\" = 1e+300 is beyond float's range");
  expect("rope_theta", -1e39, "field \"rope_theta\" = -1e+39 is beyond float's range");
  expect("hidden_size", 18446744073709551615ull,
         "field \"hidden_size\" = 18446744073709551615 is out of range");
}

TEST(Config, InvalidJsonGivesTheByteOffset) {
  try {
    ParseConfigJson("{\"hidden_size\": 64,,}", "cfg.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("invalid JSON at byte"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ParseConfigJson("[1, 2]", "cfg.json"), Error);
  // A number beyond double's range is nlohmann's out_of_range.406, not a parse_error; it escaped the reader
  // (the gap fuzz/safetensors_fuzz.cpp found in the safetensors reader).
  try {
    ParseConfigJson("{\"rms_norm_eps\": 1e400}", "cfg.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cfg.json: invalid JSON"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("1e400"), std::string::npos) << e.what();
  }
  EXPECT_THROW(LoadConfigJson("/nonexistent/config.json"), Error);
}

}  // namespace
}  // namespace plumb
