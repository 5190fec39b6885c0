// config.json parsing: the fields plumb reads, their defaults, and a clear error for each kind of mistake.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>

#include "../../src/model/families.h"
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

// The family table: each name belongs to one row, and each reader finds the row by it.
TEST(Families, EachNameNamesOneRow) {
  for (const Family& f : Families()) {
    for (const char* name : {f.name, f.hf_model_type, f.hf_architecture, f.gguf_arch}) {
      if (name == nullptr) continue;
      // A row may use one name for two keys (llama is both its model_type and its GGUF arch), never another
      // row's.
      for (const Family& other : Families()) {
        if (&other == &f) continue;
        for (const char* theirs : {other.name, other.hf_model_type, other.hf_architecture, other.gguf_arch}) {
          EXPECT_FALSE(theirs != nullptr && std::string(theirs) == name) << name << " in two rows";
        }
      }
    }
    EXPECT_EQ(FindFamilyByName(f.name), &f);
    EXPECT_EQ(FindFamilyByHfModelType(f.hf_model_type), &f);
    if (f.gguf_arch != nullptr) {
      EXPECT_EQ(FindFamilyByGgufArch(f.gguf_arch), &f);
    }
    ModelConfig c;
    c.model_type = f.name;
    EXPECT_EQ(&FamilyOf(c), &f);
  }
  EXPECT_EQ(Families().size(), 11u);
  EXPECT_EQ(FindFamilyByName("gemma3_text"), nullptr) << "one name per family: plumb's is gemma3";
  EXPECT_EQ(&FamilyOf(ModelConfig{}), FindFamilyByName("llama")) << "a hand-made config is a Llama";
}

// config.json's refusal lists every row, and each row's config.json reads into its name.
TEST(Families, ReadersTakeTheirNamesAndListsFromTheTable) {
  nlohmann::json j = LlamaConfig();
  j["model_type"] = "granite";
  const std::string message = ErrorOf(j);
  for (const Family& f : Families()) {
    EXPECT_NE(message.find(f.hf_model_type), std::string::npos) << f.hf_model_type << ": " << message;
    j = LlamaConfig();
    j["model_type"] = f.hf_model_type;
    j.erase("hidden_act");
    if (f.experts != ExpertLayout::kNone) {
      j["num_experts_per_tok"] = 1;
      j[f.experts == ExpertLayout::kMixtral ? "num_local_experts" : "num_experts"] = 2;
      j["moe_intermediate_size"] = 32;
    }
    ModelConfig c;
    try {
      c = ParseConfigJson(j.dump(), "cfg.json");
    } catch (const Error& e) {
      ADD_FAILURE() << f.name << ": " << e.what();
      continue;
    }
    EXPECT_EQ(c.model_type, f.name);
    EXPECT_EQ(c.mlp_activation, f.activation) << f.name;
    EXPECT_EQ(c.scale_embedding, f.scale_embedding) << f.name;
    EXPECT_EQ(c.pre_norm, f.pre_norm) << f.name;
    EXPECT_EQ(c.sandwich_norm, f.sandwich_norm) << f.name;
    EXPECT_EQ(c.qk_norm, f.qk_norm) << f.name;
    EXPECT_EQ(c.qk_norm_whole, f.qk_norm_whole) << f.name;
    EXPECT_EQ(c.attention_bias, f.attention_bias == BiasRule::kAlways) << f.name;
    EXPECT_EQ(c.IsMoe(), f.experts != ExpertLayout::kNone) << f.name;
    EXPECT_EQ(c.attn_logit_softcap, f.default_attn_softcap) << f.name;
    EXPECT_EQ(c.final_logit_softcap, f.default_final_softcap) << f.name;
    EXPECT_EQ(c.sliding_window > 0, f.window == WindowRule::kPeriodic) << f.name;  // Gemma's default 4096
  }
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

TEST(Config, FamiliesPlumbDoesNotRunAreRefusedNamingTheList) {
  for (const char* type : {"gemma3", "qwen2_moe", "granite", "gpt_oss", "deepseek_v3", "olmo"}) {
    nlohmann::json j = LlamaConfig();
    j["model_type"] = type;
    const std::string message = ErrorOf(j);
    EXPECT_NE(message.find(std::string("model_type \"") + type + "\" is not a family plumb runs"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("(llama, mistral, qwen2"), std::string::npos) << message;
  }
  EXPECT_NE(ErrorOf([] {
              nlohmann::json j = LlamaConfig();
              j["model_type"] = "gemma3";
              return j;
            }())
                .find("a multimodal gemma3 checkpoint's text model is model_type gemma3_text"),
            std::string::npos);
  nlohmann::json j = LlamaConfig();
  j.erase("model_type");
  EXPECT_NE(ErrorOf(j).find("model_type is missing"), std::string::npos) << ErrorOf(j);
  // plumb estimate reads the shapes of any family.
  j = LlamaConfig();
  j["model_type"] = "qwen3";
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_EQ(ParseConfigJson(j.dump(), "cfg.json", ConfigPurpose::kShapes).hidden_size, 64);
}

// Gemma 2 and 3, OLMo 2, Phi-3, SmolLM3 and Mixtral: each family's switches from its config.json, with
// transformers' defaults where a key is absent, and the layouts plumb does not run refused.
TEST(Config, EachFamilyReadsItsSwitches) {
  const auto parse = [](const nlohmann::json& j) { return ParseConfigJson(j.dump(), "cfg.json"); };
  nlohmann::json j = LlamaConfig();
  j.erase("hidden_act");
  j["model_type"] = "gemma2";
  j["architectures"] = {"Gemma2ForCausalLM"};
  ModelConfig c = parse(j);  // transformers' Gemma2Config defaults
  EXPECT_EQ(c.mlp_activation, MlpActivation::kGeluTanh);
  EXPECT_TRUE(c.scale_embedding && c.sandwich_norm && c.pre_norm);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.attn_logit_softcap, 50.0f);
  EXPECT_EQ(c.final_logit_softcap, 30.0f);
  EXPECT_EQ(c.attention_scale, 1.0f / 16.0f);  // query_pre_attn_scalar 256
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_TRUE(c.IsLocalLayer(0));
  EXPECT_FALSE(c.IsLocalLayer(1));
  j["attn_logit_softcapping"] = nullptr;  // null switches it off
  j["query_pre_attn_scalar"] = 24;
  j["sliding_window"] = 6;
  j["layer_types"] = {"sliding_attention", "full_attention"};
  c = parse(j);
  EXPECT_EQ(c.attn_logit_softcap, 0.0f);
  EXPECT_EQ(c.attention_scale, static_cast<float>(1.0 / std::sqrt(24.0)));
  EXPECT_EQ(c.sliding_window_pattern, 2);
  j["hidden_activation"] = "gelu";
  EXPECT_NE(ErrorOf(j).find("hidden_activation"), std::string::npos) << ErrorOf(j);
  j.erase("hidden_activation");
  j["num_hidden_layers"] = 3;
  j["layer_types"] = {"sliding_attention", "full_attention", "full_attention"};  // not periodic
  EXPECT_NE(ErrorOf(j).find("layer_types[2]"), std::string::npos) << ErrorOf(j);

  j = LlamaConfig();
  j.erase("hidden_act");
  j["model_type"] = "gemma3_text";
  j["layer_types"] = {"sliding_attention", "full_attention"};
  j["sliding_window"] = 8;
  j["rope_parameters"] = {{"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 1e6}}},
                          {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 1e4}}}};
  c = parse(j);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.rope_theta, 1e6f);
  EXPECT_EQ(c.rope_theta_local, 1e4f);
  EXPECT_EQ(c.RopeFreqFactors(0), nullptr);  // the local layer rotates unscaled
  ASSERT_NE(c.RopeFreqFactors(1), nullptr);
  EXPECT_EQ(c.RopeFreqFactors(1)[0], 8.0f);
  j["rope_parameters"]["sliding_attention"] = {{"rope_type", "linear"}, {"factor", 2.0}, {"rope_theta", 1e4}};
  EXPECT_NE(ErrorOf(j).find("sliding_attention"), std::string::npos) << ErrorOf(j);

  j = LlamaConfig();
  j["model_type"] = "olmo2";
  c = parse(j);
  EXPECT_FALSE(c.pre_norm);
  EXPECT_TRUE(c.sandwich_norm && c.qk_norm && c.qk_norm_whole);
  j["attention_bias"] = true;
  EXPECT_NE(ErrorOf(j).find("attention_bias"), std::string::npos) << ErrorOf(j);

  j = LlamaConfig();
  j["model_type"] = "phi3";
  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e4}, {"partial_rotary_factor", 0.75}};
  c = parse(j);
  EXPECT_EQ(c.RotaryDim(), 12);                    // head_dim 16 · 0.75
  j["rope_parameters"]["rope_type"] = "longrope";  // Phi-3.5 / Phi-4-mini's: a divisor per rotated pair
  EXPECT_NE(ErrorOf(j).find("short_factor must list a divisor for each of the 6 rotated pairs"),
            std::string::npos)
      << ErrorOf(j);
  j["rope_parameters"]["short_factor"] = {1, 1, 1, 1, 1, 1};
  j["rope_parameters"]["long_factor"] = {1, 2, 4, 8, 16, 32};
  j["original_max_position_embeddings"] = 32;  // Phi-3 writes it at the top level
  c = parse(j);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLongRope);
  EXPECT_FLOAT_EQ(c.rope_attention_factor, static_cast<float>(std::sqrt(1 + std::log(4.0) / std::log(32.0))));
  EXPECT_EQ(c.RopeFreqFactors(0, 32)[5], 1.0f);   // a pass that fits the original context: short
  EXPECT_EQ(c.RopeFreqFactors(0, 33)[5], 32.0f);  // one past it: long
  j["rope_parameters"]["long_factor"][3] = -1;
  EXPECT_NE(ErrorOf(j).find("long_factor[3] = -1"), std::string::npos) << ErrorOf(j);
  j = LlamaConfig();
  j["rope_scaling"] = {{"rope_type", "longrope"}, {"short_factor", {1}}, {"long_factor", {1}}};
  EXPECT_NE(ErrorOf(j).find("\"longrope\" is not supported"), std::string::npos) << ErrorOf(j);
  j = LlamaConfig();
  j["partial_rotary_factor"] = 0.5;  // transformers' Llama would rotate all: refused, not guessed
  EXPECT_NE(ErrorOf(j).find("plumb reads it for phi3"), std::string::npos) << ErrorOf(j);

  j = LlamaConfig();
  j["model_type"] = "smollm3";
  j["num_hidden_layers"] = 8;
  c = parse(j);  // transformers' default: every fourth layer without RoPE
  EXPECT_EQ(c.nope_layers, (std::vector<int>{3, 7}));
  j["num_hidden_layers"] = 2;
  j["no_rope_layers"] = {1, 2};
  EXPECT_NE(ErrorOf(j).find("no_rope_layers[1]"), std::string::npos) << ErrorOf(j);

  j = LlamaConfig();
  j["model_type"] = "mixtral";
  j["num_local_experts"] = 8;
  j["num_experts_per_tok"] = 2;
  c = parse(j);
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.moe_intermediate_size, c.intermediate_size);
  EXPECT_TRUE(c.moe_renormalize);
  EXPECT_TRUE(c.IsMoeLayer(0));
  j["num_experts_per_tok"] = 9;
  EXPECT_NE(ErrorOf(j).find("num_experts_per_tok = 9"), std::string::npos) << ErrorOf(j);
}

// Qwen3: QK-norm; Qwen3-MoE: the experts, in both spellings of their count, and which layers are MoE.
TEST(Config, Qwen3AndQwen3MoeReadTheirArchitecture) {
  nlohmann::json j = LlamaConfig();
  j["model_type"] = "qwen3";
  const ModelConfig dense = ParseConfigJson(j.dump(), "cfg.json");
  EXPECT_TRUE(dense.qk_norm);
  EXPECT_FALSE(dense.attention_bias);
  EXPECT_FALSE(dense.IsMoe());
  j["model_type"] = "qwen3_moe";
  j["architectures"] = {"Qwen3MoeForCausalLM"};
  j["num_experts"] = 8;
  j["num_experts_per_tok"] = 2;
  j["moe_intermediate_size"] = 32;
  j["num_hidden_layers"] = 4;
  j["mlp_only_layers"] = {0};
  j["decoder_sparse_step"] = 2;
  const ModelConfig moe = ParseConfigJson(j.dump(), "cfg.json");
  EXPECT_EQ(moe.num_experts, 8);
  EXPECT_EQ(moe.experts_per_token, 2);
  EXPECT_EQ(moe.moe_intermediate_size, 32);
  EXPECT_FALSE(moe.moe_renormalize);  // transformers' default for norm_topk_prob
  // Layer l is MoE when (l + 1) % 2 == 0 and l is not in mlp_only_layers: 1 and 3.
  EXPECT_EQ(std::vector<bool>({moe.IsMoeLayer(0), moe.IsMoeLayer(1), moe.IsMoeLayer(2), moe.IsMoeLayer(3)}),
            std::vector<bool>({false, true, false, true}));
  EXPECT_EQ(ParseConfigJson(ConfigToJson(moe), "round trip").mlp_only_layers, moe.mlp_only_layers);
  // transformers 5 writes num_local_experts for the same field.
  j.erase("num_experts");
  j["num_local_experts"] = 8;
  EXPECT_EQ(ParseConfigJson(j.dump(), "cfg.json").num_experts, 8);
  const auto refused = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& needle) {
    nlohmann::json k = j;
    edit(k);
    const std::string message = ErrorOf(k);
    EXPECT_NE(message.find(needle), std::string::npos) << "wanted '" << needle << "' in: " << message;
  };
  refused([](auto& k) { k["num_experts"] = 4; }, "num_experts = 4 and num_local_experts = 8 disagree");
  refused([](auto& k) { k["num_experts_per_tok"] = 9; }, "num_experts_per_tok = 9 must be in [1, 8]");
  refused([](auto& k) { k.erase("moe_intermediate_size"); }, "moe_intermediate_size");
  refused([](auto& k) { k["mlp_only_layers"] = {7}; }, "mlp_only_layers[0] = 7 is not a layer in [0, 4)");
  refused([](auto& k) { k["decoder_sparse_step"] = 0; }, "decoder_sparse_step = 0 must be positive");
  refused([](auto& k) { k["use_sliding_window"] = true; }, "use_sliding_window = true");
}

// Every key that changes the math of a family plumb runs is read or refused by name and value.
TEST(Config, MathChangingFieldsAreReadOrRefusedByName) {
  const auto refused = [](const std::function<void(nlohmann::json&)>& edit, const std::string& needle) {
    nlohmann::json j = LlamaConfig();
    edit(j);
    const std::string message = ErrorOf(j);
    EXPECT_NE(message.find(needle), std::string::npos) << "wanted '" << needle << "' in: " << message;
  };
  refused([](auto& j) { j["hidden_act"] = "gelu"; }, "cfg.json: hidden_act = \"gelu\" is not supported");
  refused([](auto& j) { j["mlp_bias"] = true; }, "mlp_bias = true is not supported");
  refused([](auto& j) { j["architectures"] = {"LlamaForSequenceClassification"}; },
          "architectures = [\"LlamaForSequenceClassification\"]: plumb runs [\"LlamaForCausalLM\"]");
  refused([](auto& j) { j["partial_rotary_factor"] = 0.5; }, "partial_rotary_factor = 0.5");  // not phi3
  refused(
      [](auto& j) {
        j["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 5e5}, {"factor", 4.0}};
      },
      "rope_parameters.rope_type = \"yarn\" is not supported");
  refused(
      [](auto& j) {
        j["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}};
      },
      "rope_scaling.rope_type = \"dynamic\"");
  refused(
      [](auto& j) {
        j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 5e5}, {"beta_fast", 32}};
      },
      "rope_parameters.beta_fast = 32 is not a field plumb knows");
  refused(
      [](auto& j) {
        j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e6}};
      },
      "rope_parameters.rope_theta = 1000000.0 contradicts rope_theta = 500000.0");
  refused(
      [](auto& j) {
        j["rope_parameters"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}};
      },
      "rope_parameters.high_freq_factor is missing");
  refused(
      [](auto& j) {
        j["rope_scaling"] = {{"rope_type", "llama3"},
                             {"factor", 8.0},
                             {"low_freq_factor", 4.0},
                             {"high_freq_factor", 1.0},
                             {"original_max_position_embeddings", 8192}};
      },
      "low_freq_factor = 4 must be below high_freq_factor = 1");
  refused(
      [](auto& j) {
        j["model_type"] = "qwen2";
        j["architectures"] = {"Qwen2ForCausalLM"};
        j["use_sliding_window"] = true;
      },
      "use_sliding_window = true");
  refused(
      [](auto& j) {
        j["model_type"] = "mistral";
        j["sliding_window"] = 6;
        j["layer_types"] = {"sliding_attention", "full_attention"};
      },
      "layer_types[1] = \"full_attention\"");
}

TEST(Config, RopeThetaAndLlama3ScalingInBothSpellings) {
  nlohmann::json v5 = LlamaConfig();
  v5.erase("rope_theta");
  v5["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 250000.0}};
  const ModelConfig plain = ParseConfigJson(v5.dump(), "cfg.json");
  EXPECT_EQ(plain.rope_theta, 250000.0f);
  EXPECT_EQ(plain.rope_scaling.type, RopeScalingType::kNone);
  EXPECT_TRUE(plain.rope_freq_factors.empty());

  // head_dim 16, theta 1e4: pair wavelengths 2π·1e4^(i/8) = 6.3, 19.9, 62.8, 198.7, 628, ...; with the
  // original context 256 and factors 1 and 4, pairs 0-2 are kept (below 64), pair 3 is smoothed and pairs
  // 4-7 are divided by 8 (above 256). Pair 3: s = (256 / 198.69 − 1) / 3, f = 1 / ((1 − s) / 8 + s).
  const nlohmann::json llama3 = {{"rope_type", "llama3"},
                                 {"factor", 8.0},
                                 {"low_freq_factor", 1.0},
                                 {"high_freq_factor", 4.0},
                                 {"original_max_position_embeddings", 256}};
  const std::vector<float> expected = {1.0f, 1.0f, 1.0f, 4.781833995199632f, 8.0f, 8.0f, 8.0f, 8.0f};
  nlohmann::json v4 = LlamaConfig();
  v4["rope_theta"] = 10000.0;
  v4["rope_scaling"] = llama3;
  v5 = LlamaConfig();
  v5.erase("rope_theta");
  v5["rope_parameters"] = llama3;
  v5["rope_parameters"]["rope_theta"] = 10000.0;
  for (const nlohmann::json& j : {v4, v5}) {
    const ModelConfig c = ParseConfigJson(j.dump(), "cfg.json");
    EXPECT_EQ(c.rope_theta, 10000.0f);
    EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLlama3);
    EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 256);
    EXPECT_EQ(c.rope_freq_factors, expected) << j.dump();
    EXPECT_NE(c.RopeFreqFactors(1), nullptr);
    // Written back (plumb pack) in transformers 4's spelling, and read to the same config.
    const ModelConfig again = ParseConfigJson(ConfigToJson(c), "again.json");
    EXPECT_EQ(again.rope_freq_factors, expected);
    EXPECT_EQ(again.rope_scaling.factor, 8.0);
  }
  nlohmann::json linear = LlamaConfig();
  linear["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  EXPECT_EQ(ParseConfigJson(linear.dump(), "cfg.json").rope_freq_factors, std::vector<float>(8, 2.0f));
}

TEST(Config, MistralWindowCoversEveryLayerAndQwen2AlwaysHasBiases) {
  nlohmann::json j = LlamaConfig();
  j["model_type"] = "mistral";
  j["architectures"] = {"MistralForCausalLM"};
  j["sliding_window"] = 6;
  j["attention_bias"] = true;  // Mistral's attention has no biases, whatever this says (transformers too)
  const ModelConfig c = ParseConfigJson(j.dump(), "cfg.json");
  EXPECT_FALSE(c.attention_bias);
  for (int layer = 0; layer < c.num_layers; ++layer) {
    EXPECT_EQ(c.AttentionWindow(layer), 6);
    EXPECT_EQ(c.RopeTheta(layer), 500000.0f);  // no RoPE base of its own, unlike Gemma 3's local layers
  }
  EXPECT_EQ(ParseConfigJson(ConfigToJson(c), "again.json").sliding_window, 6);
  j["sliding_window"] = nullptr;
  EXPECT_EQ(ParseConfigJson(j.dump(), "cfg.json").AttentionWindow(0), 0);
  j = LlamaConfig();
  j["model_type"] = "qwen2";
  j["attention_bias"] = false;  // Qwen2Attention has q/k/v biases regardless
  EXPECT_TRUE(ParseConfigJson(j.dump(), "cfg.json").attention_bias);
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
