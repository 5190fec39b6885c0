// Llama from GGUF: the tiny fixture checkpoint exported by tools/reference/export_gguf.py (llama.cpp's
// names, metadata and Q/K row permutation) must give exactly the logits of the safetensors original.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>

#include "plumb/core/error.h"
#include "plumb/formats/gguf.h"
#include "plumb/model/model.h"
#include "support/gguf_builder.h"
#include "support/golden.h"

namespace plumb {
namespace {

const std::string kTiny = testing::FixtureDir("tiny-llama");

// Logits of every prompt position (prefill) followed by 8 greedy decode steps.
std::vector<float> RunPromptAndDecode(Model& model, const std::vector<int>& prompt) {
  ContiguousKvCache cache = model.NewKvCache();
  std::vector<float> all = model.Prefill(prompt, cache, PrefillLogits::kAllRows);
  int token = prompt.back();
  for (int step = 0; step < 8; ++step) {
    const std::span<const float> logits = model.Decode(token, cache);
    all.insert(all.end(), logits.begin(), logits.end());
    token = static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  return all;
}

// A fixture checkpoint and its F32 GGUF give bitwise the same RunPromptAndDecode on the golden's prompt.
void ExpectF32GgufIsTheCheckpoint(const std::string& dir) {
  const testing::GoldenFixture golden(dir);
  Model from_safetensors = Model::Load(dir);
  Model from_gguf = Model::Load(dir + "/model.f32.gguf");
  const std::vector<float> expected = RunPromptAndDecode(from_safetensors, golden.prompt_ids());
  const std::vector<float> actual = RunPromptAndDecode(from_gguf, golden.prompt_ids());
  ASSERT_EQ(actual.size(), expected.size());
  EXPECT_EQ(std::memcmp(actual.data(), expected.data(), actual.size() * sizeof(float)), 0) << dir;
}

TEST(GgufModel, ConfigMatchesTheHuggingFaceConfig) {
  const ModelConfig hf = LoadConfigJson(kTiny + "/config.json");
  const ModelConfig gguf = ConfigFromGguf(GgufFile::Open(kTiny + "/model.f32.gguf"));
  EXPECT_EQ(gguf.hidden_size, hf.hidden_size);
  EXPECT_EQ(gguf.intermediate_size, hf.intermediate_size);
  EXPECT_EQ(gguf.num_layers, hf.num_layers);
  EXPECT_EQ(gguf.num_heads, hf.num_heads);
  EXPECT_EQ(gguf.num_kv_heads, hf.num_kv_heads);
  EXPECT_EQ(gguf.head_dim, hf.head_dim);
  EXPECT_EQ(gguf.vocab_size, hf.vocab_size);
  EXPECT_EQ(gguf.max_position_embeddings, hf.max_position_embeddings);
  EXPECT_EQ(gguf.rms_norm_eps, hf.rms_norm_eps);
  EXPECT_EQ(gguf.rope_theta, hf.rope_theta);
  EXPECT_EQ(gguf.tie_word_embeddings, hf.tie_word_embeddings);
  EXPECT_EQ(gguf.attention_bias, hf.attention_bias);
}

TEST(GgufModel, F32GgufGivesExactlyTheSafetensorsLogits) {
  // Same FP32 weights in the same order once the Q/K rows are un-permuted, so the same float operations:
  // the logits must be bitwise equal. A wrong un-permutation changes them at the first layer.
  ExpectF32GgufIsTheCheckpoint(kTiny);
}

TEST(GgufModel, StoredTypesStayQuantized) {
  // No whole-model dequantization: the matrices keep their GGUF type and point into the mapping.
  Model model = Model::Load(kTiny + "/model.q4_1.gguf");
  const LayerWeights& layer = model.weights().layers[0];
  EXPECT_EQ(layer.w_gate.type, GgmlType::Q4_1);
  EXPECT_EQ(layer.wq.type, GgmlType::Q4_1);  // un-permuted, still Q4_1
  EXPECT_EQ(layer.w_gate.Bytes(), static_cast<std::size_t>(layer.w_gate.rows) * layer.w_gate.cols / 32 * 20);
}

// GGUF files against the float64 reference run on gguf-py's own dequantization of the same file, thresholds
// and their reasons in each manifest:
//   - the tiny Llama exported as F16, Q8_0, Q4_0 and Q4_1 (fixtures/tiny-llama/gguf-goldens). The quantized
//     types move the logits by 1e-3..0.17 from the F32 model, so a block decoded wrongly (a swapped nibble, a
//     misread scale) cannot pass a 1e-5 threshold;
//   - the tiny Qwen3-MoE as Q8_0 and Q4_0 (fixtures/tiny-qwen3moe/gguf-goldens): stacked experts, a router
//     kept F32, QK-norm, every routing decision >= 1e-3 in router logit from flipping;
//   - the tiny Gemma 3s (fixtures/tiny-gemma3): the real 270M file's type mix (Q5_0, Q4_K, Q6_K, Q8_0) and an
//     all-F32 one with soft-capped logits, 7 layers whose sliding window of 5 the 20-token prompt and the
//     16 greedy steps slide well past.
struct GgufGoldenCase {
  const char* model;   // under fixtures/
  const char* golden;  // the golden's directory under fixtures/
  const char* stem;    // model.<stem>.{manifest.json,golden.safetensors} in it
};

class GgufGolden : public ::testing::TestWithParam<GgufGoldenCase> {};

TEST_P(GgufGolden, LogitsAndGreedyContinuationMatchTheReference) {
  const std::string type = GetParam().stem;
  const std::string dir = testing::FixtureDir(GetParam().golden);
  const testing::GoldenFixture golden(dir, dir + "/model." + type + ".manifest.json",
                                      dir + "/model." + type + ".golden.safetensors");
  Model model = Model::Load(testing::FixtureDir(GetParam().model));
  const int V = model.config().vocab_size;
  ContiguousKvCache cache = model.NewKvCache();
  std::map<std::string, std::vector<float>> plumb;
  plumb["logits"] = model.Prefill(golden.prompt_ids(), cache, PrefillLogits::kAllRows);
  std::vector<float> logits(plumb["logits"].end() - V, plumb["logits"].end());
  std::vector<int> greedy_ids;
  for (int i = 0; i < golden.greedy_steps(); ++i) {
    plumb["greedy.logits"].insert(plumb["greedy.logits"].end(), logits.begin(), logits.end());
    greedy_ids.push_back(static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    if (i + 1 < golden.greedy_steps()) {
      const std::span<const float> next = model.Decode(greedy_ids.back(), cache);
      logits.assign(next.begin(), next.end());
    }
  }
  EXPECT_EQ(greedy_ids, golden.Ids("greedy.ids"));
  EXPECT_EQ(golden.prompt_ids(), golden.Ids("prompt_ids"));
  for (const std::string name : {"logits", "greedy.logits"}) {
    const testing::GoldenCheck check = golden.Check(name);
    ASSERT_EQ(check.metric, "max_abs_err/max_abs_ref");
    const double error = testing::MaxAbsErrOverMaxAbsRef(plumb[name], golden.Values(name));
    EXPECT_LE(error, check.threshold) << type << " " << name;
    RecordProperty(type + "." + name, testing::FormatError(error));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Files, GgufGolden,
    ::testing::Values(GgufGoldenCase{"tiny-llama/model.f16.gguf", "tiny-llama/gguf-goldens", "f16"},
                      GgufGoldenCase{"tiny-llama/model.q8_0.gguf", "tiny-llama/gguf-goldens", "q8_0"},
                      GgufGoldenCase{"tiny-llama/model.q4_0.gguf", "tiny-llama/gguf-goldens", "q4_0"},
                      GgufGoldenCase{"tiny-llama/model.q4_1.gguf", "tiny-llama/gguf-goldens", "q4_1"},
                      GgufGoldenCase{"tiny-qwen3moe/model.q8_0.gguf", "tiny-qwen3moe/gguf-goldens", "q8_0"},
                      GgufGoldenCase{"tiny-qwen3moe/model.q4_0.gguf", "tiny-qwen3moe/gguf-goldens", "q4_0"},
                      GgufGoldenCase{"tiny-gemma3/model.q.gguf", "tiny-gemma3", "q"},
                      GgufGoldenCase{"tiny-gemma3/model.f32.softcap.gguf", "tiny-gemma3", "f32.softcap"}),
    [](const ::testing::TestParamInfo<GgufGoldenCase>& p) {
      std::string name =
          std::string(p.param.golden).substr(0, std::string(p.param.golden).find('/')) + "_" + p.param.stem;
      std::replace_if(
          name.begin(), name.end(), [](char c) { return !std::isalnum(c); }, '_');
      return name;
    });

// The tiny F32 GGUF rebuilt with one change, for the loader's errors.
struct Edit {
  std::string drop_key = {};
  std::string drop_tensor = {};
  std::string set_key = {};
  GgufValue set_value = {};
  std::string reshape_tensor = {};  // swap its two dims
  std::string add_tensor = {};      // an F32 tensor of add_dims, all ones
  std::vector<std::uint64_t> add_dims = {};
};

testing::GgufImage Rebuild(const Edit& edit, const std::string& path = kTiny + "/model.f32.gguf") {
  const GgufFile source = GgufFile::Open(path);
  testing::GgufBuilder builder;
  for (const auto& [key, value] : source.metadata()) {
    if (key == edit.drop_key || key == "general.alignment") continue;
    builder.Add(key, key == edit.set_key ? edit.set_value : value);
  }
  if (!edit.set_key.empty() && !source.Has(edit.set_key)) builder.Add(edit.set_key, edit.set_value);
  for (const GgufTensorInfo& t : source.tensors()) {
    if (t.name == edit.drop_tensor) continue;
    std::vector<std::uint64_t> dims = t.dims;
    if (t.name == edit.reshape_tensor) std::swap(dims[0], dims[1]);
    builder.AddTensor(t.name, t.type, dims, std::vector<std::uint8_t>(t.data, t.data + t.n_bytes));
  }
  if (!edit.add_tensor.empty()) {
    std::uint64_t n = 1;
    for (std::uint64_t d : edit.add_dims) n *= d;
    std::vector<std::uint8_t> bytes(n * sizeof(float));
    for (std::uint64_t i = 0; i < n; ++i) {
      const float one = 1.0f;
      std::memcpy(bytes.data() + i * sizeof(float), &one, sizeof one);
    }
    builder.AddTensor(edit.add_tensor, GgmlType::F32, edit.add_dims, bytes);
  }
  return builder.Build();
}

std::string LoadError(const Edit& edit, const std::string& path = kTiny + "/model.f32.gguf") {
  const testing::GgufImage image = Rebuild(edit, path);
  try {
    const auto file = std::make_shared<const GgufFile>(GgufFile::FromBytes(image.bytes, "edited.gguf"));
    Model::FromGguf(file);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(GgufModel, UnchangedRebuildLoads) {
  EXPECT_EQ(LoadError({}), "no error");
}

TEST(GgufModel, EveryMissingOrInconsistentPieceIsNamed) {
  const std::vector<std::pair<Edit, std::string>> cases = {
      {{.drop_key = "llama.block_count"}, "edited.gguf: metadata key 'llama.block_count' is missing"},
      {{.drop_key = "llama.attention.layer_norm_rms_epsilon"},
       "'llama.attention.layer_norm_rms_epsilon' is missing"},
      {{.drop_key = "general.architecture"}, "'general.architecture' is missing"},
      {{.set_key = "general.architecture", .set_value = testing::GgufString("gpt2")},
       "general.architecture 'gpt2' is not supported"},
      {{.set_key = "llama.block_count", .set_value = testing::GgufString("two")},
       "'llama.block_count' has type string"},
      {{.set_key = "llama.block_count", .set_value = testing::GgufUint32(3)},
       "missing tensor 'blk.2.attn_norm.weight'"},
      {{.set_key = "llama.embedding_length", .set_value = testing::GgufUint32(0)},
       "'llama.embedding_length' = 0 is out of range"},
      {{.set_key = "llama.rope.dimension_count", .set_value = testing::GgufUint32(8)},
       "partial rotary embeddings are not supported"},
      {{.set_key = "llama.attention.head_count_kv", .set_value = testing::GgufUint32(3)},
       "does not divide num_attention_heads"},
      {{.set_key = "llama.expert_count", .set_value = testing::GgufUint32(8)}, "mixture-of-experts"},
      {{.set_key = "llama.rope.scaling.type", .set_value = testing::GgufString("yarn")},
       "rope.scaling.type 'yarn' is not supported"},
      // Everything the file holds is understood or refused by name: an unknown key of the architecture
      // (Granite's attention scale here), a tensor no part of the model reads, an architecture not listed.
      {{.set_key = "llama.attention.scale", .set_value = testing::GgufFloat32(0.5f)},
       "edited.gguf: metadata key 'llama.attention.scale' = 0.5 is not one plumb implements"},
      {{.set_key = "llama.rope.scaling.attn_factor", .set_value = testing::GgufFloat32(2.0f)},
       "attn_factor = 2 is not supported"},
      {{.set_key = "llama.attention.value_length", .set_value = testing::GgufUint32(32)},
       "attention.value_length = 32 differs from attention.key_length = 16"},
      {{.add_tensor = "blk.0.attn_q_norm.weight", .add_dims = {16}},
       "edited.gguf: tensor 'blk.0.attn_q_norm.weight' (offset "},
      {{.add_tensor = "rope_freqs.weight", .add_dims = {7}}, "tensor 'rope_freqs.weight' (offset "},
      {{.set_key = "general.architecture", .set_value = testing::GgufString("deepseek2")},
       "general.architecture 'deepseek2' is not supported (plumb runs 'llama', 'qwen2', 'qwen3', 'qwen3moe', "
       "'gemma2', 'gemma3', 'olmo2', 'phi3' and 'smollm3'"},
      {{.drop_tensor = "blk.1.ffn_down.weight"}, "edited.gguf: missing tensor 'blk.1.ffn_down.weight'"},
      {{.drop_tensor = "token_embd.weight"}, "missing tensor 'token_embd.weight'"},
      {{.reshape_tensor = "blk.0.attn_k.weight"}, "tensor 'blk.0.attn_k.weight' (offset "},
      {{.reshape_tensor = "blk.0.ffn_up.weight"}, "dims {160, 64}, expected {64, 160}"},
  };
  for (const auto& [edit, expected] : cases) {
    const std::string message = LoadError(edit);
    EXPECT_NE(message.find(expected), std::string::npos) << "wanted '" << expected << "'\ngot: " << message;
  }
}

// The tiny Qwen3-MoE as llama.cpp's qwen3moe: its hyper-parameters, its F32 file against the safetensors
// checkpoint, and what a malformed MoE file is refused for.
const std::string kMoe = testing::FixtureDir("tiny-qwen3moe");

TEST(GgufModel, Qwen3MoeConfigAndF32LogitsMatchTheSafetensorsCheckpoint) {
  const ModelConfig hf = LoadConfigJson(kMoe + "/config.json");
  const ModelConfig gguf = ConfigFromGguf(GgufFile::Open(kMoe + "/model.f32.gguf"));
  EXPECT_EQ(gguf.model_type, "qwen3_moe");
  EXPECT_EQ(gguf.num_experts, hf.num_experts);
  EXPECT_EQ(gguf.experts_per_token, hf.experts_per_token);
  EXPECT_EQ(gguf.moe_intermediate_size, hf.moe_intermediate_size);
  EXPECT_EQ(gguf.moe_renormalize, hf.moe_renormalize);
  EXPECT_TRUE(gguf.qk_norm && hf.qk_norm);
  EXPECT_EQ(gguf.head_dim, hf.head_dim);
  // No Q/K permutation for qwen3moe and the same FP32 experts: bitwise the same logits.
  ExpectF32GgufIsTheCheckpoint(kMoe);
  // The experts stay in the file's type, each a view of its slice of the stacked tensor.
  Model q8 = Model::Load(kMoe + "/model.q8_0.gguf");
  const LayerWeights& layer = q8.weights().layers[1];
  ASSERT_EQ(layer.experts.size(), 8u);
  EXPECT_EQ(layer.experts[7].w_down.type, GgmlType::Q8_0);
  EXPECT_EQ(layer.experts[7].w_down.Row(0),
            layer.experts[0].w_down.Row(0) + 7 * layer.experts[0].w_down.Bytes());
  EXPECT_EQ(layer.router.type, GgmlType::F32);
}

TEST(GgufModel, AMalformedMoeFileIsRefusedNamingWhat) {
  const std::string f32 = kMoe + "/model.f32.gguf";
  const std::vector<std::pair<Edit, std::string>> cases = {
      {{.set_key = "qwen3moe.expert_used_count", .set_value = testing::GgufUint32(9)},
       "qwen3moe.expert_used_count = 9 exceeds qwen3moe.expert_count = 8"},
      {{.drop_key = "qwen3moe.expert_feed_forward_length"},
       "metadata key 'qwen3moe.expert_feed_forward_length' is missing"},
      {{.set_key = "qwen3moe.expert_count", .set_value = testing::GgufUint32(4)},
       "tensor 'blk.0.ffn_gate_inp.weight' (offset "},
      {{.drop_tensor = "blk.1.ffn_down_exps.weight"}, "missing tensor 'blk.1.ffn_down_exps.weight'"},
      {{.reshape_tensor = "blk.0.ffn_up_exps.weight"}, "dims {32, 64, 8}, expected {64, 32, 8}"},
      {{.drop_tensor = "blk.0.attn_k_norm.weight"}, "missing tensor 'blk.0.attn_k_norm.weight'"},
  };
  for (const auto& [edit, expected] : cases) {
    const std::string message = LoadError(edit, f32);
    EXPECT_NE(message.find(expected), std::string::npos) << "wanted '" << expected << "'\ngot: " << message;
  }
}

TEST(GgufModel, ATensorNoPartReadsIsRefusedNamingIt) {
  const std::string message = LoadError({.add_tensor = "blk.1.attn_k.bias", .add_dims = {32}});
  EXPECT_NE(message.find("tensor 'blk.1.attn_k.bias' (offset "), std::string::npos) << message;
  EXPECT_NE(message.find("is not part of the llama model plumb computes"), std::string::npos) << message;
}

// llama.cpp's form of Llama 3.1's RoPE scaling: rope_freqs.weight, one divisor per pair, read as is; and
// rope.scaling.factor, which divides every frequency (llama.cpp's freq_scale = 1 / factor).
TEST(GgufModel, RopeScalingFromRopeFreqsOrTheLinearFactor) {
  const std::string path = kTiny + "/model.f32.gguf";
  std::string message = LoadError({.add_tensor = "rope_freqs.weight", .add_dims = {8}}, path);
  EXPECT_EQ(message, "no error");
  // No rope.scaling.type: llama.cpp divides by rope.scaling.factor all the same.
  const testing::GgufImage image =
      Rebuild({.set_key = "llama.rope.scaling.factor", .set_value = testing::GgufFloat32(4.0f)}, path);
  const ModelConfig c = ConfigFromGguf(GgufFile::FromBytes(image.bytes, "linear.gguf"));
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_EQ(c.rope_freq_factors, std::vector<float>(8, 4.0f));
  message =
      LoadError({.set_key = "llama.rope.scaling.factor", .set_value = testing::GgufFloat32(-2.0f)}, path);
  EXPECT_NE(message.find("rope.scaling.factor = -2 must be a non-negative number"), std::string::npos)
      << message;
}

TEST(GgufModel, Gemma3ReadsItsFixedHyperParametersAndNamesWhatItRefuses) {
  const std::string path = testing::FixtureDir("tiny-gemma3") + "/model.q.gguf";
  const ModelConfig c = Model::Load(path).config();
  EXPECT_EQ(c.model_type, "gemma3");
  EXPECT_EQ(c.sliding_window, 5);
  for (int l = 0; l < c.num_layers; ++l) {  // layer 5 of 7 global: (l + 1) % 6 == 0
    EXPECT_EQ(c.IsLocalLayer(l), l != 5) << "layer " << l;
    EXPECT_EQ(c.RopeTheta(l), l == 5 ? 1e6f : 1e4f) << "layer " << l;
    EXPECT_EQ(c.AttentionWindow(l), l == 5 ? 0 : 5) << "layer " << l;
  }
  EXPECT_TRUE(c.qk_norm && c.sandwich_norm && c.scale_embedding);
  EXPECT_EQ(c.mlp_activation, MlpActivation::kGeluTanh);
  EXPECT_EQ(c.final_logit_softcap, 0.0f);
  EXPECT_EQ(Model::Load(testing::FixtureDir("tiny-gemma3") + "/model.f32.softcap.gguf")
                .config()
                .final_logit_softcap,
            30.0f);

  const std::vector<std::pair<Edit, std::string>> cases = {
      {{.drop_tensor = "blk.3.attn_q_norm.weight"}, "missing tensor 'blk.3.attn_q_norm.weight'"},
      {{.drop_tensor = "blk.0.post_ffw_norm.weight"}, "missing tensor 'blk.0.post_ffw_norm.weight'"},
      {{.set_key = "gemma3.attn_logit_softcapping", .set_value = testing::GgufFloat32(50.0f)},
       "gemma3.attn_logit_softcapping is not supported"},
      {{.set_key = "gemma3.final_logit_softcapping", .set_value = testing::GgufFloat32(-1.0f)},
       "'gemma3.final_logit_softcapping' = -1 must be a non-negative number"},
      {{.set_key = "gemma3.rope.scaling.type", .set_value = testing::GgufString("yarn")},
       "rope.scaling.type 'yarn' is not supported"},
      {{.add_tensor = "rope_freqs.weight", .add_dims = {128}},
       "a 'gemma3' model has no per-pair RoPE factors"},
  };
  for (const auto& [edit, expected] : cases) {
    const std::string message = LoadError(edit, path);
    EXPECT_NE(message.find(expected), std::string::npos) << "wanted '" << expected << "'\ngot: " << message;
  }
  EXPECT_EQ(LoadError({}, path), "no error");
}

}  // namespace
}  // namespace plumb
