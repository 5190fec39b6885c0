// Checkpoints that Hugging Face transformers built and saved itself (fixtures/transformers, written by
// tools/reference/make_transformers_fixtures.py with the versions its manifests name): each one plumb runs
// gives transformers' logits and greedy ids, from the checkpoint and from its GGUF, and each one it does not
// run is refused naming its family. None runs silently wrong: the point of issues #31 and #35 and of
// docs/models.md "What plumb refuses".
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "../../src/model/families.h"
#include "plumb/core/error.h"
#include "plumb/formats/safetensors.h"
#include "plumb/kernels/int8_activations.h"
#include "plumb/kernels/kernels.h"
#include "plumb/kv/paged_kv_cache.h"
#include "plumb/model/model.h"
#include "support/golden.h"

namespace plumb {
namespace {

namespace fs = std::filesystem;

// The reference is transformers in float64 where the checkpoint records it (logits64: the newer families),
// else in float32 (eager attention; cos/sin from float32 angles); plumb computes in float32 with double RoPE
// angles and its own summation orders. Over these 2-layer, d = 64 models plumb's float32 roundings stay
// below ~2e-6 of max|logit| (a dot of 128 terms: ~sqrt(128)·u ≈ 7e-7 typical; three or four such roundings
// in a row through the norms); 1e-5 leaves a 5× margin, while the bugs this guards against (an unscaled or
// wrongly scaled RoPE, a missing window, another theta, a missing bias) move the logits by 1e-3 or more of
// max|logit| (the manifests of the generator record them).
constexpr double kTolerance = 1e-5;
// The fast family where its prefill runs the BF16 panels (kernels::UsesBf16Panels: AVX512-BF16 hosts), whose
// matmul inputs are rounded to BF16 (2^-9 relative) through two layers, the norms and the LM head: on these
// checkpoints plumb measures 0.0084-0.045 (Gemma 3 the most, as in transformers), and transformers in
// bfloat16 throughout (which rounds every activation too) 0.013-0.049, but Mixtral's 0.195, where its
// router picks another expert. 0.1 leaves 2.2x over plumb's worst, far below a misplaced or missing row of a
// panel (an error of the logits' own size); the bits themselves are the unit tests' (fma_family_test), the
// model code's bugs the exact family's 1e-5, and the greedy ids below are checked exactly in both families.
// The BF16 panels give the same bits on every host that runs them.
constexpr double kBf16Tolerance = 0.1;

std::vector<std::string> Checkpoints() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(testing::FixtureDir("transformers"))) {
    if (entry.is_directory()) names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

nlohmann::json Manifest(const std::string& dir) {
  std::ifstream in(dir + "/manifest.json");
  return nlohmann::json::parse(in);
}

// A fresh cache of `model` for one sequence: contiguous, or paged in blocks of 4 positions, so that the 31
// positions span eight blocks and every block boundary of the table is crossed.
class Cache {
 public:
  Cache(const Model& model, bool paged) {
    if (!paged) {
      contiguous_.emplace(model.NewKvCache());
      return;
    }
    const ModelConfig& c = model.config();
    PagedKvConfig config;
    config.n_layers = c.num_layers;
    config.n_kv_heads = c.num_kv_heads;
    config.head_dim = c.head_dim;
    config.block_size = 4;
    config.num_blocks = 16;
    config.max_positions = 64;
    pool_ = std::make_unique<PagedKvCache>(config);
    id_ = pool_->Add();
  }
  KvSequence& kv() { return contiguous_ ? static_cast<KvSequence&>(*contiguous_) : pool_->Sequence(id_); }

 private:
  std::optional<ContiguousKvCache> contiguous_;
  std::unique_ptr<PagedKvCache> pool_;
  SeqId id_{};
};

// transformers' float64 logits where the checkpoint has them (logits64), else its float32 ones.
std::vector<double> ExpectedLogits(const SafetensorsFile& expected) {
  for (const TensorInfo& info : expected.tensors()) {
    if (info.name != "logits64") continue;
    const auto bytes = expected.Bytes("logits64");
    std::vector<double> out(bytes.size() / sizeof(double));
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }
  const std::vector<float> f32 = expected.ReadF32("logits");
  return {f32.begin(), f32.end()};
}

// Directories of fixtures/transformers that hold a model.f16.gguf.
std::vector<std::string> GgufCheckpoints() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(testing::FixtureDir("transformers"))) {
    if (entry.is_directory() && fs::exists(entry.path() / "model.f16.gguf")) {
      names.push_back(entry.path().filename().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Logits of every position of the teacher-forced sequence, then plumb's own greedy continuation, with each
// kernel family (on these F16 weights the fast family runs the exact kernels' arithmetic, so one tolerance
// serves both, but where its prefill runs the BF16 panels: kBf16Tolerance) and each cache layout.
void ExpectTransformersOutput(const std::string& model_path, const std::string& expected_path) {
  SCOPED_TRACE(model_path);
  const SafetensorsFile expected = SafetensorsFile::Open(expected_path);
  const std::vector<std::int32_t> prompt = expected.ReadI32("prompt_ids");
  const std::vector<std::int32_t> greedy = expected.ReadI32("greedy_ids");
  const std::vector<double> want = ExpectedLogits(expected);
  double want_max = 0;
  for (double x : want) want_max = std::max(want_max, std::fabs(x));
  Model model = Model::Load(model_path);
  const int vocab = model.config().vocab_size;

  std::vector<int> sequence(prompt.begin(), prompt.end());
  sequence.insert(sequence.end(), greedy.begin(), greedy.end() - 1);
  ASSERT_EQ(want.size(), sequence.size() * static_cast<std::size_t>(vocab));
  const kernels::KernelFamily before = kernels::ActiveFamily();
  for (const kernels::KernelFamily family : {kernels::KernelFamily::kExact, kernels::KernelFamily::kFast}) {
    kernels::SetFamily(family);
    for (const bool paged : {false, true}) {
      SCOPED_TRACE(std::string(kernels::FamilyName(family)) + (paged ? ", paged" : ", contiguous"));
      {
        Cache cache(model, paged);
        const std::vector<float> got = model.Prefill(sequence, cache.kv(), PrefillLogits::kAllRows);
        ASSERT_EQ(got.size(), want.size());
        double max_err = 0;
        for (std::size_t i = 0; i < got.size(); ++i) max_err = std::max(max_err, std::fabs(got[i] - want[i]));
        const double relative = max_err / want_max;
        EXPECT_LE(relative, family == kernels::KernelFamily::kFast && kernels::Bf16PanelsAvailable()
                                ? kBf16Tolerance
                                : kTolerance)
            << "max |plumb − transformers| / max |logit| over all positions";
        if (!paged) {
          std::printf("%s: max |plumb - transformers| / max|logit| = %.3g (%s)\n", model_path.c_str(),
                      relative, kernels::FamilyName(family));
        }
      }
      Cache cache(model, paged);
      std::vector<int> ids;
      std::vector<float> logits =
          model.Prefill(std::vector<int>(prompt.begin(), prompt.end()), cache.kv(), PrefillLogits::kLastRow);
      for (std::size_t step = 0; step < greedy.size(); ++step) {
        const int next = static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        ids.push_back(next);
        if (step + 1 < greedy.size()) {
          const std::span<const float> row = model.Decode(next, cache.kv());
          logits.assign(row.begin(), row.end());
        }
      }
      EXPECT_EQ(ids, std::vector<int>(greedy.begin(), greedy.end())) << "greedy ids";
    }
  }
  kernels::SetFamily(before);
}

TEST(TransformersCheckpoints, EachRunsAsTransformersDoesOrIsRefusedNamingItsFamily) {
  const std::vector<std::string> names = Checkpoints();
  ASSERT_GE(names.size(), 12u) << "fixtures/transformers lost checkpoints";
  int ran = 0, refused = 0;
  for (const std::string& name : names) {
    const std::string dir = testing::FixtureDir("transformers") + "/" + name;
    const nlohmann::json manifest = Manifest(dir);
    const std::string expect = manifest.at("expect");
    if (expect == "runs") {
      ExpectTransformersOutput(dir, dir + "/expected.safetensors");
      ++ran;
    } else {
      ASSERT_EQ(expect, "refused") << name;
      const std::string type = manifest.at("model_type");
      try {
        Model::Load(dir);
        ADD_FAILURE() << name << " loaded; it must be refused";
      } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("model_type \"" + type + "\" is not a family plumb runs"), std::string::npos)
            << message;
      }
      ++refused;
    }
  }
  EXPECT_GE(ran, 15);
  EXPECT_GE(refused, 1);
}

// llama.cpp's converter writes Llama 3.1's scaling as rope_freqs.weight; the GGUF of the same random
// checkpoint must give transformers' output too.
TEST(TransformersCheckpoints, Llama3ScalingFromAGgufsRopeFreqs) {
  const std::string dir = testing::FixtureDir("transformers") + "/llama3-scaling";
  const Model gguf = Model::Load(dir + "/model.f32.gguf");
  const Model hf = Model::Load(dir);
  EXPECT_EQ(gguf.config().rope_scaling.type, RopeScalingType::kFactors);
  EXPECT_EQ(hf.config().rope_scaling.type, RopeScalingType::kLlama3);
  // Both are the llama3 rule's divisors rounded to float: llama.cpp's converter computes them in float32
  // and plumb in double, so they may differ in the last bit only.
  ASSERT_EQ(gguf.config().rope_freq_factors.size(), hf.config().rope_freq_factors.size());
  for (std::size_t i = 0; i < hf.config().rope_freq_factors.size(); ++i) {
    EXPECT_NEAR(gguf.config().rope_freq_factors[i], hf.config().rope_freq_factors[i],
                2e-7 * hf.config().rope_freq_factors[i])
        << "pair " << i;
  }
  ExpectTransformersOutput(dir + "/model.f32.gguf", dir + "/expected.safetensors");
}

// The same checkpoints as GGUFs (model.f16.gguf, written by tools/reference/export_gguf.py
// transformers-fixtures the way llama.cpp's converter writes each architecture: its metadata keys, tensor
// names, Q/K permutation, fused Phi-3 tensors, Gemma's norms + 1, stacked experts). Each loads through
// plumb's normal loader and gives transformers' logits and greedy ids: the F16 weights are the same numbers,
// so expected.safetensors applies.
TEST(TransformersGguf, EachRunsAsTransformersDoes) {
  const std::vector<std::string> names = GgufCheckpoints();
  // Every runnable family but qwen3-moe and smollm3, whose layouts llama.cpp's GGUF cannot say
  // (fixtures/transformers/README.md, "GGUF").
  ASSERT_GE(names.size(), 13u) << "fixtures/transformers lost GGUFs";
  for (const std::string& name : names) {
    const std::string dir = testing::FixtureDir("transformers") + "/" + name;
    ExpectTransformersOutput(dir + "/model.f16.gguf", dir + "/expected.safetensors");
  }
}

// The GGUF and the safetensors checkpoint must read into the same hyper-parameters: the tolerance above could
// hide a field that changes the logits only a little.
TEST(TransformersGguf, ConfigMatchesTheCheckpoints) {
  for (const std::string& name : GgufCheckpoints()) {
    SCOPED_TRACE(name);
    const std::string dir = testing::FixtureDir("transformers") + "/" + name;
    const ModelConfig g = Model::Load(dir + "/model.f16.gguf").config();
    const ModelConfig h = Model::Load(dir).config();
    // One name per family, whichever file it came from (but where llama.cpp writes it as another arch:
    // Mistral and Mixtral are "llama"s).
    if (FamilyOf(h).gguf_arch != nullptr) {
      EXPECT_EQ(g.model_type, h.model_type);
    }
    EXPECT_EQ(g.num_layers, h.num_layers);
    EXPECT_EQ(g.head_dim, h.head_dim);
    EXPECT_EQ(g.RotaryDim(), h.RotaryDim());
    EXPECT_EQ(g.rope_theta, h.rope_theta);
    EXPECT_EQ(g.tie_word_embeddings, h.tie_word_embeddings);
    EXPECT_EQ(g.attention_bias, h.attention_bias);
    EXPECT_EQ(g.sliding_window, h.sliding_window);
    for (int layer = 0; layer < h.num_layers; ++layer) {
      EXPECT_EQ(g.AttentionWindow(layer), h.AttentionWindow(layer)) << "layer " << layer;
      EXPECT_EQ(g.RopeTheta(layer), h.RopeTheta(layer)) << "layer " << layer;
      EXPECT_EQ(g.UsesRope(layer), h.UsesRope(layer)) << "layer " << layer;
      EXPECT_EQ(g.IsMoeLayer(layer), h.IsMoeLayer(layer)) << "layer " << layer;
    }
    EXPECT_EQ(g.mlp_activation, h.mlp_activation);
    EXPECT_EQ(g.scale_embedding, h.scale_embedding);
    EXPECT_EQ(g.qk_norm, h.qk_norm);
    EXPECT_EQ(g.qk_norm_whole, h.qk_norm_whole);
    EXPECT_EQ(g.sandwich_norm, h.sandwich_norm);
    EXPECT_EQ(g.pre_norm, h.pre_norm);
    EXPECT_EQ(g.attn_logit_softcap, h.attn_logit_softcap);
    EXPECT_EQ(g.final_logit_softcap, h.final_logit_softcap);
    // 0 means 1/sqrt(head_dim) for both.
    const auto scale = [](const ModelConfig& c) {
      return c.attention_scale > 0 ? c.attention_scale : static_cast<float>(1.0 / std::sqrt(c.head_dim));
    };
    EXPECT_FLOAT_EQ(scale(g), scale(h));
    EXPECT_EQ(g.num_experts, h.num_experts);
    EXPECT_EQ(g.experts_per_token, h.experts_per_token);
    EXPECT_EQ(g.moe_intermediate_size, h.moe_intermediate_size);
    EXPECT_EQ(g.rope_scaling.type == RopeScalingType::kLinear,
              h.rope_scaling.type == RopeScalingType::kLinear);
    EXPECT_EQ(g.rope_scaling.type == RopeScalingType::kLongRope,
              h.rope_scaling.type == RopeScalingType::kLongRope);
    EXPECT_EQ(g.rope_long_freq_factors, h.rope_long_freq_factors);
    EXPECT_FLOAT_EQ(g.rope_attention_factor, h.rope_attention_factor);
  }
}

// A GGUF of an architecture plumb does not run is refused naming the ones it does.
TEST(TransformersGguf, UnknownArchitectureIsRefusedNamingTheSupportedList) {
  const std::string source = testing::FixtureDir("transformers") + "/qwen2/model.f16.gguf";
  std::ifstream in(source, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // general.architecture is the first key: its value "qwen2" becomes "qwen9" in place (same length), and
  // every qwen2.* key with it stays as it is (refused or not, the architecture is judged first).
  const std::string from = "qwen2", to = "qwen9";
  const auto at = std::search(bytes.begin(), bytes.end(), from.begin(), from.end());
  ASSERT_NE(at, bytes.end());
  std::copy(to.begin(), to.end(), at);
  const fs::path path = fs::path(::testing::TempDir()) / "unknown-arch.gguf";
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  try {
    Model::Load(path.string());
    ADD_FAILURE() << "a 'qwen9' GGUF loaded";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("general.architecture 'qwen9' is not supported"), std::string::npos) << message;
    for (const char* arch : {"'llama'", "'qwen2'", "'qwen3'", "'qwen3moe'", "'gemma2'", "'gemma3'", "'olmo2'",
                             "'phi3'", "'smollm3'"}) {
      EXPECT_NE(message.find(arch), std::string::npos) << arch << " missing from: " << message;
    }
  }
  fs::remove(path);
}

}  // namespace
}  // namespace plumb
