// The cost model against hand-computed figures: every kernel of the tiny fixture model (d 64, ffn 160, 2
// layers, 4 heads of 16, 2 KV heads, vocab 320, FP32), the Llama-3-8B/70B shapes, and the textbook figures
// issue 7 lists (docs/roofline.md "Checks"). No timing is asserted.
#include <gtest/gtest.h>

#include <cmath>

#include "plumb/model/model.h"
#include "plumb/roofline/cost_model.h"
#include "plumb/roofline/host_probe.h"
#include "plumb/roofline/json_writer.h"
#include "plumb/roofline/presets.h"
#include "support/errors.h"
#include "support/golden.h"

namespace plumb::roofline {
namespace {

using plumb::testing::ExpectMessageHas;

ModelConfig Tiny() {
  return LoadConfigJson(plumb::testing::FixtureDir("tiny-llama") + "/config.json");
}

const CostOptions kF32{4, 4};

TEST(CostModelTest, TinyModelDecodeStepKernelByKernel) {
  const ModelConfig c = Tiny();
  const WeightBytes w = WeightBytesFor(c, ParseWeightDtype("f32"));
  const PassCost p = DecodeStepCost(c, w, kF32, 1, 10);  // 10 cached positions: attention sees 11
  const KernelCost& q = p.Kernel(ForwardKernel::kQProj);
  EXPECT_EQ(q.instances, 2);
  EXPECT_EQ(q.shape, "1×64 · 64×64");
  EXPECT_DOUBLE_EQ(q.flops, 2.0 * 64 * 64);
  EXPECT_DOUBLE_EQ(q.weight_bytes, 64.0 * 64 * 4);
  EXPECT_DOUBLE_EQ(q.activation_bytes, (64 + 64) * 4.0);
  const KernelCost& k = p.Kernel(ForwardKernel::kKProj);
  EXPECT_DOUBLE_EQ(k.flops, 2.0 * 64 * 32);
  EXPECT_DOUBLE_EQ(k.weight_bytes, 32.0 * 64 * 4);
  const KernelCost& o = p.Kernel(ForwardKernel::kOProj);  // + the residual add: 64 more FLOPs, 64 more reads
  EXPECT_DOUBLE_EQ(o.flops, 2.0 * 64 * 64 + 64);
  EXPECT_DOUBLE_EQ(o.activation_bytes, (64 + 64 + 64) * 4.0);
  const KernelCost& gate = p.Kernel(ForwardKernel::kGateProj);
  EXPECT_DOUBLE_EQ(gate.flops, 2.0 * 64 * 160);
  EXPECT_DOUBLE_EQ(gate.weight_bytes, 160.0 * 64 * 4);
  const KernelCost& down = p.Kernel(ForwardKernel::kDownProj);
  EXPECT_DOUBLE_EQ(down.flops, 2.0 * 160 * 64 + 64);
  // Attention: 4 query heads × 11 keys × (q·k + p·v = 4·16 FLOPs); the 2 KV heads' 11 keys and values.
  const KernelCost& att = p.Kernel(ForwardKernel::kAttention);
  EXPECT_DOUBLE_EQ(att.flops, 4.0 * 16 * 4 * 11);
  EXPECT_DOUBLE_EQ(att.kv_bytes, 2.0 * 11 * 32 * 4);
  EXPECT_DOUBLE_EQ(p.Kernel(ForwardKernel::kKvWrite).kv_bytes, 2.0 * 32 * 4);
  EXPECT_DOUBLE_EQ(p.Kernel(ForwardKernel::kAttnNorm).flops, 4.0 * 64);
  EXPECT_DOUBLE_EQ(p.Kernel(ForwardKernel::kAttnNorm).weight_bytes, 64.0 * 4);
  EXPECT_DOUBLE_EQ(p.Kernel(ForwardKernel::kRope).flops, 3.0 * (64 + 32));
  EXPECT_DOUBLE_EQ(p.Kernel(ForwardKernel::kSwiGlu).flops, 5.0 * 160);
  const KernelCost& head = p.Kernel(ForwardKernel::kLmHead);
  EXPECT_EQ(head.instances, 1);
  EXPECT_DOUBLE_EQ(head.flops, 2.0 * 64 * 320);
  EXPECT_DOUBLE_EQ(head.weight_bytes, 320.0 * 64 * 4);
  EXPECT_DOUBLE_EQ(p.Kernel(ForwardKernel::kEmbedding).weight_bytes, 64.0 * 4);  // one row
  // Weights read by the step: per layer 4 attention + 3 MLP matrices and 2 norms, then one embedding row,
  // the final norm and the head.
  const double per_layer = (2 * 64 * 64 + 2 * 32 * 64 + 3 * 160 * 64 + 2 * 64) * 4.0;
  EXPECT_DOUBLE_EQ(p.WeightBytes(), 2 * per_layer + 64 * 4 + 64 * 4 + 320 * 64 * 4);
  EXPECT_DOUBLE_EQ(p.KvBytes(), 2 * (2.0 * 11 * 32 * 4 + 2.0 * 32 * 4));
}

// The fast family's quantization of x: the four projection inputs of a layer (q/k/v's and gate/up's d =
// 64, o's 64, down's 160) for a one-row pass, and nothing for several rows or in the exact family.
TEST(CostModelTest, Int8ActivationsAddAQuantizeKernelToOneRowPasses) {
  const ModelConfig c = Tiny();
  const WeightBytes w = WeightBytesFor(c, ParseWeightDtype("q4_1"));
  CostOptions fast = kF32;
  fast.int8_activations = true;
  const PassCost p = DecodeStepCost(c, w, fast, 1, 10);
  const KernelCost& q = p.Kernel(ForwardKernel::kQuantize);
  const double e = 64 + 64 + 64 + 160;
  EXPECT_EQ(q.instances, 2);
  EXPECT_EQ(q.shape, "1×352");
  EXPECT_DOUBLE_EQ(q.flops, 5 * e);
  EXPECT_DOUBLE_EQ(q.weight_bytes, 0);
  EXPECT_DOUBLE_EQ(q.activation_bytes, e * 4 + e * 1.25);    // read as FP32; int8 codes and d, s per 32 out
  EXPECT_EQ(p.kernels[1].kernel, ForwardKernel::kAttnNorm);  // in ForwardKernel order
  EXPECT_EQ(p.kernels[2].kernel, ForwardKernel::kQuantize);
  EXPECT_DOUBLE_EQ(p.Bytes() - DecodeStepCost(c, w, kF32, 1, 10).Bytes(), 2 * q.Bytes());
  for (const PassCost& none :
       {DecodeStepCost(c, w, fast, 2, 10), PrefillCost(c, w, fast, 5), DecodeStepCost(c, w, kF32, 1, 10)}) {
    for (const KernelCost& k : none.kernels) EXPECT_NE(k.kernel, ForwardKernel::kQuantize);
  }
}

TEST(CostModelTest, TinyModelPrefill) {
  const ModelConfig c = Tiny();
  const PassCost p = PrefillCost(c, WeightBytesFor(c, ParseWeightDtype("f32")), kF32, 5);
  EXPECT_EQ(p.Kernel(ForwardKernel::kQProj).shape, "5×64 · 64×64");
  EXPECT_DOUBLE_EQ(p.Kernel(ForwardKernel::kQProj).flops, 2.0 * 5 * 64 * 64);
  EXPECT_DOUBLE_EQ(p.Kernel(ForwardKernel::kQProj).weight_bytes, 64.0 * 64 * 4);  // read once for 5 rows
  // Causal: 1 + 2 + ... + 5 = 15 (query, key) pairs per head; the 5 cached positions read once.
  EXPECT_DOUBLE_EQ(p.Kernel(ForwardKernel::kAttention).flops, 4.0 * 16 * 4 * 15);
  EXPECT_DOUBLE_EQ(p.Kernel(ForwardKernel::kAttention).kv_bytes, 2.0 * 5 * 32 * 4);
  EXPECT_DOUBLE_EQ(p.Kernel(ForwardKernel::kLmHead).flops, 2.0 * 64 * 320);  // the last row's logits only
  EXPECT_DOUBLE_EQ(p.Kernel(ForwardKernel::kEmbedding).weight_bytes, 5 * 64.0 * 4);
}

TEST(CostModelTest, LoadedModelBytesAreWhatDecodeReads) {
  for (const char* file : {"model.safetensors", "model.q4_1.gguf", "model.q8_0.gguf"}) {
    const Model model = Model::Load(plumb::testing::FixtureDir("tiny-llama") + "/" + file);
    const WeightBytes w = WeightBytesOf(model.weights());
    EXPECT_DOUBLE_EQ(w.Stored(), static_cast<double>(model.weights().Bytes())) << file;
    // The decode step's weights are ModelWeights::BytesReadPerDecodeStep (an untied head: no double count).
    const PassCost p = DecodeStepCost(model.config(), w, kF32, 1, 0);
    EXPECT_DOUBLE_EQ(p.WeightBytes(), static_cast<double>(model.weights().BytesReadPerDecodeStep())) << file;
  }
}

TEST(CostModelTest, Llama3ShapesAndParameters) {
  // Hugging Face's parameter counts of meta-llama/Meta-Llama-3-8B and -70B.
  EXPECT_DOUBLE_EQ(ParameterCount(ModelCard("llama-3-8b")), 8030261248.0);
  EXPECT_DOUBLE_EQ(ParameterCount(ModelCard("Llama-3-70B")), 70553706496.0);
  const ModelConfig c = ModelCard("llama-3-70b");
  const PassCost p = DecodeStepCost(c, WeightBytesFor(c, ParseWeightDtype("bf16"), 2), {2, 2}, 1, 4095);
  EXPECT_EQ(p.Kernel(ForwardKernel::kQProj).shape, "1×8192 · 8192×8192");
  EXPECT_DOUBLE_EQ(p.Kernel(ForwardKernel::kQProj).weight_bytes, 8192.0 * 8192 * 2);
  EXPECT_DOUBLE_EQ(p.Kernel(ForwardKernel::kKProj).weight_bytes, 1024.0 * 8192 * 2);
  EXPECT_DOUBLE_EQ(p.Kernel(ForwardKernel::kGateProj).flops, 2.0 * 8192 * 28672);
  EXPECT_DOUBLE_EQ(p.Kernel(ForwardKernel::kDownProj).weight_bytes, 8192.0 * 28672 * 2);
  // 4096 positions × 8 KV heads × 128 × (K and V) × 2 bytes, per layer.
  EXPECT_DOUBLE_EQ(p.Kernel(ForwardKernel::kAttention).kv_bytes, 4096.0 * 1024 * 2 * 2);
  EXPECT_DOUBLE_EQ(p.Kernel(ForwardKernel::kAttention).flops, 4.0 * 128 * 64 * 4096);
  const ModelConfig c8 = ModelCard("llama-3-8b");
  const PassCost p8 = PrefillCost(c8, WeightBytesFor(c8, ParseWeightDtype("f16"), 2), {2, 2}, 512);
  EXPECT_EQ(p8.Kernel(ForwardKernel::kUpProj).shape, "512×4096 · 4096×14336");
  EXPECT_DOUBLE_EQ(p8.Kernel(ForwardKernel::kUpProj).flops, 2.0 * 512 * 4096 * 14336);
  EXPECT_DOUBLE_EQ(p8.Kernel(ForwardKernel::kAttention).flops, 4.0 * 128 * 32 * (512.0 * 513 / 2));
}

// Gemma 3 270M: 3 global layers see the whole context, 15 local ones at most their 512-token window; the
// extra norms and GeGLU are kernels of their own.
TEST(CostModel, Gemma3CountsTheWindowOfItsLocalLayers) {
  const ModelConfig c = ModelCard("gemma-3-270m");
  const PassCost p = DecodeStepCost(c, WeightBytesFor(c, ParseWeightDtype("f16"), 4), {2, 2}, 1, 4095);
  const KernelCost& global = p.Kernel(ForwardKernel::kAttention);
  const KernelCost& local = p.Kernel(ForwardKernel::kWindowAttention);
  EXPECT_EQ(global.instances, 3);
  EXPECT_EQ(local.instances, 15);
  // positions × 1 KV head × 256 × (K and V) × 2 bytes; FLOPs 4 · head_dim · heads per position.
  EXPECT_DOUBLE_EQ(global.kv_bytes, 4096.0 * 256 * 2 * 2);
  EXPECT_DOUBLE_EQ(local.kv_bytes, 512.0 * 256 * 2 * 2);
  EXPECT_DOUBLE_EQ(local.flops, 4.0 * 256 * 4 * 512);
  EXPECT_DOUBLE_EQ(p.Kernel(ForwardKernel::kGeGlu).flops, 9.0 * 2048);
  EXPECT_EQ(p.Kernel(ForwardKernel::kQkNorm).instances, 18);
  EXPECT_EQ(p.Kernel(ForwardKernel::kPostMlpNorm).instances, 18);
  EXPECT_THROW(p.Kernel(ForwardKernel::kSwiGlu), Error);
  // A prefill of 1000 tokens: a local layer's query i sees min(i + 1, 512) keys.
  const PassCost prefill = PrefillCost(c, WeightBytesFor(c, ParseWeightDtype("f16"), 4), {2, 2}, 1000);
  EXPECT_DOUBLE_EQ(prefill.Kernel(ForwardKernel::kWindowAttention).flops,
                   4.0 * 256 * 4 * (512.0 * 513 / 2 + (1000.0 - 512) * 512));
}

// DeepSeek-V3: 671B parameters, 36.6B of them active per token (its README_WEIGHTS.md: the main model, the
// MTP module left out; the head counted, the embedding not: a lookup reads one row); quoted to 1B and
// 0.1B, so within half of that. Mixtral 8x7B: 46.7B and 12.9B (Mistral's figures, the embedding counted in
// the 12.9B), to 0.1B. docs/roofline.md "Mixture of experts and latent attention".
TEST(CostModelTest, MoeTotalAndActiveParametersAreThePublishedOnes) {
  const ModelConfig ds = ModelCard("deepseek-v3");
  EXPECT_NEAR(ParameterCount(ds) / 1e9, 671, 0.5);
  EXPECT_NEAR(ActiveParameterCount(ds) / 1e9, 36.6, 0.05);
  const ModelConfig mx = ModelCard("mixtral-8x7b");
  EXPECT_NEAR(ParameterCount(mx) / 1e9, 46.7, 0.05);
  EXPECT_NEAR((ActiveParameterCount(mx) + 32000.0 * 4096) / 1e9, 12.9, 0.05);
  // Per layer 4 attention matrices, 8 experts of 3 [14336][4096] matrices, the [8][4096] router and 2 norms.
  const double mx_layer =
      2 * 4096.0 * 4096 + 2 * 4096.0 * 1024 + 8 * 3 * 4096.0 * 14336 + 8 * 4096 + 2 * 4096;
  EXPECT_DOUBLE_EQ(ParameterCount(mx), 32 * mx_layer + 4096 + 2 * 32000.0 * 4096);
  EXPECT_DOUBLE_EQ(ParameterCount(mx) - ActiveParameterCount(mx),
                   32 * 6 * 3 * 4096.0 * 14336 + 32000.0 * 4096);
  // A dense model's active parameters are all but its untied embedding.
  const ModelConfig llama = ModelCard("llama-3-70b");
  EXPECT_DOUBLE_EQ(ActiveParameterCount(llama), ParameterCount(llama) - 128256.0 * 8192);
}

TEST(CostModelTest, MlaCachesTheLatentAndOneRopeKeyPerLayer) {
  const ModelConfig ds = ModelCard("deepseek-v3");
  EXPECT_DOUBLE_EQ(KvBytesPerToken(ds, 2), (512 + 64) * 61 * 2.0);
  EXPECT_DOUBLE_EQ(KvBytesPerToken(ModelCard("llama-3-70b"), 2), 327680);  // the dense formula, unchanged
  const PassCost p = DecodeStepCost(ds, WeightBytesFor(ds, ParseWeightDtype("fp8"), 2), {2, 2}, 1, 4095);
  const KernelCost& att = p.Kernel(ForwardKernel::kAttention);
  EXPECT_EQ(att.instances, 61);
  EXPECT_DOUBLE_EQ(att.kv_bytes, 4096.0 * 576 * 2);
  // Absorbed: q·[c, k_rope] over 512 + 64 and p·c over 512, 2 FLOPs a multiply-add, per head and key.
  EXPECT_DOUBLE_EQ(att.flops, 2.0 * (2 * 512 + 64) * 128 * 4096);
  EXPECT_DOUBLE_EQ(p.Kernel(ForwardKernel::kKvWrite).kv_bytes, 576 * 2.0);
  EXPECT_DOUBLE_EQ(p.Kernel(ForwardKernel::kKProj).flops, 2.0 * 7168 * 576);  // kv_a_proj_with_mqa
  EXPECT_DOUBLE_EQ(p.Kernel(ForwardKernel::kVProj).flops, 2.0 * 128 * 512 * (128 + 128));  // W_UK, W_UV
}

TEST(CostModelTest, ExpertsTouchedIsKAtOneRowAndAllAtMany) {
  EXPECT_DOUBLE_EQ(ExpertsTouched(256, 8, 1), 8);
  EXPECT_DOUBLE_EQ(ExpertsTouched(8, 2, 1), 2);
  EXPECT_NEAR(ExpertsTouched(256, 8, 2), 8 + 8 * (1 - 8.0 / 256), 1e-12);  // the second row's new ones
  EXPECT_NEAR(ExpertsTouched(256, 8, 4096), 256, 1e-9);
  EXPECT_NEAR(ExpertsTouched(8, 2, 64), 8, 1e-7);
  EXPECT_DOUBLE_EQ(ExpertsTouched(0, 0, 5), 0);
}

// A decode step reads the routed experts the batch touches, the shared one, attention, the router and the
// head: at batch 1, 8 + 1 experts a MoE layer; at 64 rows ExpertsTouched(256, 8, 64) + 1.
TEST(CostModelTest, MoeDecodeReadsTheExpertsTheBatchTouches) {
  const ModelConfig ds = ModelCard("deepseek-v3");
  const WeightBytes w = WeightBytesFor(ds, ParseWeightDtype("fp8"), 2);
  const double expert = w.expert_gate + w.expert_up + w.expert_down;
  EXPECT_DOUBLE_EQ(w.expert_gate, 2048 * (7168 + 4.0));  // FP8: a byte and a row scale
  const PassCost one = DecodeStepCost(ds, w, {2, 2}, 1, 0);
  const PassCost many = DecodeStepCost(ds, w, {2, 2}, 64, 0);
  auto moe_bytes = [](const PassCost& p) {
    double bytes = 0;
    for (const KernelCost& k : p.kernels) {
      if (k.instances == 58) bytes += k.instances * k.weight_bytes;
    }
    return bytes;
  };
  EXPECT_NEAR(moe_bytes(one), 58 * (9 * expert) + w.router, 1);
  EXPECT_NEAR(moe_bytes(many), 58 * ((ExpertsTouched(256, 8, 64) + 1) * expert) + w.router, 1);
  // The weights a batch-1 step reads: the active parameters (in FP8, with row scales and 16-bit norms).
  EXPECT_NEAR(one.WeightBytes() / ActiveParameterCount(ds), 1.0, 0.01);
  // FLOPs are per row: 9 experts × 3 matrices × 2 FLOPs per weight, whatever the batch.
  EXPECT_NEAR(many.Flops() / one.Flops(), 64, 0.01 * 64);
  // Dense layers 0-2 keep an 18432-wide MLP.
  EXPECT_EQ(one.Kernel(ForwardKernel::kGateProj).instances, 3);
  EXPECT_DOUBLE_EQ(one.Kernel(ForwardKernel::kGateProj).flops, 2.0 * 7168 * 18432);
}

TEST(CostModelTest, MoeComputeBoundBatchIsTheSmallestThatCrossesTheRidge) {
  for (const char* card : {"deepseek-v3", "mixtral-8x7b"}) {
    const ModelConfig c = ModelCard(card);
    const WeightBytes w = WeightBytesFor(c, ParseWeightDtype("fp8"), 2);
    const Roof roof = HardwarePreset("h200").roof();
    const long long b = ComputeBoundBatch(c, w, {2, 2}, 1, roof);
    ASSERT_GT(b, 1) << card;
    auto bound = [&](long long batch) {
      const PassCost p = DecodeStepCost(c, w, {2, 2}, static_cast<int>(batch), 1);
      return roof.ComputeBound(p.Flops(), p.Bytes());
    };
    EXPECT_TRUE(bound(b)) << card;
    EXPECT_FALSE(bound(b - 1)) << card;
  }
}

// gpt-oss's cards against OpenAI's published counts (the model card: 116.8B total and 5.1B active for 120b,
// 20.9B and 3.6B for 20b), within 1 %; MXFP4 weights are 4.25 bits each.
TEST(CostModelTest, GptOssCardsHaveThePublishedParameterCounts) {
  const struct {
    const char* card;
    double total, active;
  } cards[] = {{"gpt-oss-120b", 116.8e9, 5.13e9}, {"gpt-oss-20b", 20.9e9, 3.61e9}};
  for (const auto& c : cards) {
    const ModelConfig config = ModelCard(c.card);
    EXPECT_NEAR(ParameterCount(config) / c.total, 1.0, 0.01) << c.card;
    EXPECT_NEAR(ActiveParameterCount(config) / c.active, 1.0, 0.01) << c.card;
  }
  const WeightBytes w = WeightBytesFor(ModelCard("gpt-oss-120b"), ParseWeightDtype("mxfp4"), 2);
  EXPECT_NEAR(w.Stored() / ParameterCount(ModelCard("gpt-oss-120b")), 0.5 + 1.0 / 32, 0.01);
}

// A dense card is costed as before: the figures TextbookFigures and Llama3ShapesAndParameters pin, and no
// expert or router bytes.
TEST(CostModelTest, DenseCardsHaveNoExperts) {
  const ModelConfig c = ModelCard("llama-3-70b");
  const WeightBytes w = WeightBytesFor(c, ParseWeightDtype("f16"), 2);
  EXPECT_EQ(w.router + w.expert_gate + w.expert_up + w.expert_down, 0);
  const PassCost p = DecodeStepCost(c, w, {2, 2}, 8, 100);
  EXPECT_EQ(p.Kernel(ForwardKernel::kGateProj).instances, 80);
  int gates = 0;
  for (const KernelCost& k : p.kernels) gates += k.kernel == ForwardKernel::kGateProj ? 1 : 0;
  EXPECT_EQ(gates, 1);
  EXPECT_DOUBLE_EQ(p.Kernel(ForwardKernel::kGateProj).weight_bytes, 28672.0 * 8192 * 2);
}

EstimateSettings Llama70bOnH100(const std::string& dtype, std::vector<int> contexts) {
  EstimateSettings s;
  s.config = ModelCard("llama-3-70b");
  s.dtype = ParseWeightDtype(dtype);
  s.kv_element_bytes = 2;
  s.hardware = HardwarePreset("h100-sxm");
  s.batches = {1};
  s.contexts = std::move(contexts);
  return s;
}

TEST(CostModelTest, TextbookFigures) {
  const Estimate e = MakeEstimate(Llama70bOnH100("f16", {1, 4096}));
  // 2 (K and V) × 80 layers × 8 KV heads × 128 × 2 bytes.
  EXPECT_DOUBLE_EQ(e.kv_bytes_per_token, 327680);
  EXPECT_DOUBLE_EQ(e.contexts[1].kv_bytes_per_sequence, 1342177280);  // 1.34 GB for a 4,096-token prompt
  // "140 GB of FP16 weights": 70.55 G parameters × 2 bytes = 141.1 GB stored (the textbook rounds to 70 G).
  EXPECT_NEAR(e.weight_bytes / 1e9, 141.1, 0.1);
  // "read in ≈ 41.8 ms on an H100, ≈ 24 tok/s": the step reads all but the embedding (139 GB) in 41.5 ms;
  // within 1 % of the textbook's 140 GB / 3.35 TB/s.
  EXPECT_NEAR(e.rows[0].step_seconds, 41.8e-3, 0.01 * 41.8e-3);
  EXPECT_NEAR(e.rows[0].tokens_per_second, 24, 0.5);
  EXPECT_FALSE(e.rows[0].compute_bound);
  EXPECT_NEAR(e.ridge, 295, 0.5);  // 989 TFLOP/s / 3.35 TB/s
  EXPECT_DOUBLE_EQ(e.batch1_intensity, 1.0);
  // INT4 (½ byte a parameter, no scales): ≈ 10.4 ms a step.
  const Estimate int4 = MakeEstimate(Llama70bOnH100("int4", {1}));
  EXPECT_NEAR(int4.rows[0].step_seconds, 10.4e-3, 0.01 * 10.4e-3);
  EXPECT_DOUBLE_EQ(int4.batch1_intensity, 4.0);
}

TEST(CostModelTest, Batch1IntensityIsTwoOverBytesPerParameter) {
  const ModelConfig c = ModelCard("llama-3-70b");
  for (const char* name : {"f32", "f16", "fp8-e4m3", "q8_0", "q4_k", "int4-sym-g128", "int4"}) {
    const WeightDtype dtype = ParseWeightDtype(name);
    const PassCost p = DecodeStepCost(c, WeightBytesFor(c, dtype, 2), {2, 2}, 1, 0);
    // The projection's own intensity: its activations are 0.05 % of its weight bytes even at INT4.
    const KernelCost& q = p.Kernel(ForwardKernel::kQProj);
    EXPECT_NEAR(q.Intensity(), 2 / dtype.BytesPerParameter(), 2e-3 * q.Intensity()) << name;
  }
}

TEST(CostModelTest, BytesPerParameterOfEveryFamily) {
  EXPECT_DOUBLE_EQ(ParseWeightDtype("f32").BytesPerParameter(), 4);
  EXPECT_DOUBLE_EQ(ParseWeightDtype("BF16").BytesPerParameter(), 2);
  EXPECT_DOUBLE_EQ(ParseWeightDtype("fp8").BytesPerParameter(), 1);
  EXPECT_DOUBLE_EQ(ParseWeightDtype("q8_0").BytesPerParameter(), 34.0 / 32);  // FP16 scale + 32 int8
  EXPECT_DOUBLE_EQ(ParseWeightDtype("q4_0").BytesPerParameter(), 18.0 / 32);
  EXPECT_DOUBLE_EQ(ParseWeightDtype("q4_1").BytesPerParameter(), 20.0 / 32);
  EXPECT_DOUBLE_EQ(ParseWeightDtype("q4_k").BytesPerParameter(), 144.0 / 256);
  EXPECT_DOUBLE_EQ(ParseWeightDtype("q6_k").BytesPerParameter(), 210.0 / 256);
  EXPECT_DOUBLE_EQ(ParseWeightDtype("int4-sym-g128").BytesPerParameter(), 0.5 + 2.0 / 128);
  EXPECT_DOUBLE_EQ(ParseWeightDtype("int4-asym-g32").BytesPerParameter(), 0.5 + 2.0 / 32 + 0.5 / 32);
  EXPECT_DOUBLE_EQ(ParseWeightDtype("int4-asym-f16zero-g64").BytesPerParameter(), 0.5 + 4.0 / 64);
  // A row that is not a whole number of blocks still stores whole blocks; FP8 adds a scale per row.
  EXPECT_DOUBLE_EQ(ParseWeightDtype("q4_0").MatrixBytes(3, 40), 3 * 2 * 18.0);
  EXPECT_DOUBLE_EQ(ParseWeightDtype("fp8-e5m2").MatrixBytes(3, 40), 3 * (40 + 4.0));
  // Microscaled: 4 or 8 bits an element and a one-byte scale per block of 32 (NVFP4: 16); a partial block
  // still has its scale, an odd FP4 row its last byte.
  EXPECT_DOUBLE_EQ(ParseWeightDtype("mxfp4").BytesPerParameter(), 0.5 + 1.0 / 32);
  EXPECT_DOUBLE_EQ(ParseWeightDtype("nvfp4").BytesPerParameter(), 0.5 + 1.0 / 16);
  EXPECT_DOUBLE_EQ(ParseWeightDtype("mxfp8-e4m3").BytesPerParameter(), 1.0 + 1.0 / 32);
  EXPECT_DOUBLE_EQ(ParseWeightDtype("nvfp4").MatrixBytes(3, 45), 3 * (23 + 3.0));
  // Block-scaled FP8: a byte an element and an FP32 scale per 128 x 128 block, partial blocks whole.
  EXPECT_DOUBLE_EQ(ParseWeightDtype("fp8-block128").BytesPerParameter(), 1.0 + 4.0 / 16384);
  EXPECT_DOUBLE_EQ(ParseWeightDtype("fp8-block128").MatrixBytes(130, 300), 130 * 300 + 4.0 * 2 * 3);
}

TEST(CostModelTest, ComputeBoundBatchIsWhereTheStepCrossesTheRidge) {
  const ModelConfig c = ModelCard("llama-3-70b");
  const WeightBytes w = WeightBytesFor(c, ParseWeightDtype("f16"), 2);
  const Roof roof = HardwarePreset("h100-sxm").roof();
  const long long b = ComputeBoundBatch(c, w, {2, 2}, 1, roof);
  ASSERT_GT(b, 1);
  auto bound = [&](long long batch) {
    const PassCost p = DecodeStepCost(c, w, {2, 2}, static_cast<int>(batch), 1);
    return roof.ComputeBound(p.Flops(), p.Bytes());
  };
  EXPECT_TRUE(bound(b));
  EXPECT_FALSE(bound(b - 1));
  EXPECT_NEAR(static_cast<double>(b), roof.Ridge(), 0.15 * roof.Ridge());  // ≈ ridge × bytes/param ÷ 2
  // At 4,096 tokens each sequence's KV (1.34 GB for 0.15 TFLOP) keeps decode bandwidth-bound at any batch.
  EXPECT_EQ(ComputeBoundBatch(c, w, {2, 2}, 4096, roof), -1);
}

TEST(CostModelTest, MemoryFitAndTensorParallel) {
  EstimateSettings s = Llama70bOnH100("f16", {4096});
  EXPECT_EQ(MakeEstimate(s).contexts[0].max_sequences, 0);  // 141 GB of weights in 72 GB
  s.tp = 4;                                                 // 288 GB usable: (288 − 141.1) GB / 1.342 GB
  const Estimate e = MakeEstimate(s);
  EXPECT_EQ(e.contexts[0].max_sequences,
            static_cast<long long>((4 * 80e9 * 0.9 - e.weight_bytes) / 1342177280.0));
  EXPECT_NEAR(e.rows[0].step_seconds, MakeEstimate(Llama70bOnH100("f16", {4096})).rows[0].step_seconds / 4,
              1e-12);
}

TEST(CostModelTest, ErrorsNameTheValue) {
  ExpectMessageHas(plumb::testing::ErrorOf([] { ParseWeightDtype("q9_9"); }), {"q9_9", "q4_k", "int4"});
  ExpectMessageHas(plumb::testing::ErrorOf([] { ModelCard("gpt-5"); }), {"gpt-5", "llama-3-8b"});
  ExpectMessageHas(plumb::testing::ErrorOf([] { HardwarePreset("tpu-v9"); }), {"tpu-v9", "h100-sxm"});
  const ModelConfig c = Tiny();
  const WeightBytes w = WeightBytesFor(c, ParseWeightDtype("f32"));
  ExpectMessageHas(plumb::testing::ErrorOf([&] { DecodeStepCost(c, w, kF32, 0, 1); }), {"batch", "0"});
  ExpectMessageHas(plumb::testing::ErrorOf([&] { PrefillCost(c, w, kF32, 0); }), {"prompt", "0"});
}

TEST(HostProbeTest, PeakFlopsIsPositive) {
  const PeakFlops peak = MeasurePeakFlops(1, 1000, 1);
  EXPECT_GT(peak.flops_per_second, 0);
  EXPECT_TRUE(std::string(peak.isa) == "avx512" || std::string(peak.isa) == "avx2" ||
              std::string(peak.isa) == "scalar");
}

TEST(JsonWriterTest, IndentsEscapesAndNullsNonFinite) {
  JsonWriter j;
  j.BeginObject().Key("a").Value(1).Key("b").BeginArray().Value(0.5).Value("x\"\n").EndArray();
  j.Key("c").BeginObject().EndObject().Key("d").Value(std::nan("")).Key("e").Value(true).EndObject();
  EXPECT_EQ(j.str(),
            "{\n  \"a\": 1,\n  \"b\": [\n    0.5,\n    \"x\\\"\\u000a\"\n  ],\n  \"c\": {},\n  \"d\": null,\n"
            "  \"e\": true\n}\n");
  JsonWriter open;
  open.BeginArray();
  EXPECT_THROW(open.str(), Error);
}

}  // namespace
}  // namespace plumb::roofline
