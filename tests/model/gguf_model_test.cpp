// Llama from GGUF: the tiny fixture checkpoint exported by tools/reference/export_gguf.py (llama.cpp's
// names, metadata and Q/K row permutation) must give exactly the logits of the safetensors original.
#include <gtest/gtest.h>

#include <cstring>

#include "plumb/core/error.h"
#include "plumb/formats/gguf.h"
#include "plumb/model/model.h"
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
  const testing::GoldenFixture golden(kTiny);
  Model from_safetensors = Model::Load(kTiny);
  Model from_gguf = Model::Load(kTiny + "/model.f32.gguf");
  const std::vector<float> expected = RunPromptAndDecode(from_safetensors, golden.prompt_ids());
  const std::vector<float> actual = RunPromptAndDecode(from_gguf, golden.prompt_ids());
  ASSERT_EQ(actual.size(), expected.size());
  EXPECT_EQ(std::memcmp(actual.data(), expected.data(), actual.size() * sizeof(float)), 0);
}

TEST(GgufModel, StoredTypesStayQuantized) {
  // No whole-model dequantization: the matrices keep their GGUF type and point into the mapping.
  Model model = Model::Load(kTiny + "/model.q4_1.gguf");
  const LayerWeights& layer = model.weights().layers[0];
  EXPECT_EQ(layer.w_gate.type, GgmlType::Q4_1);
  EXPECT_EQ(layer.wq.type, GgmlType::Q4_1);  // un-permuted, still Q4_1
  EXPECT_EQ(layer.w_gate.Bytes(), static_cast<std::size_t>(layer.w_gate.rows) * layer.w_gate.cols / 32 * 20);
}

}  // namespace
}  // namespace plumb
