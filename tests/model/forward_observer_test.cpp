// ForwardObserver (model/forward_observer.h): what Prefill, Decode and Step report, and that reporting
// changes no result. Checked on the tiny Llama fixture:
//   - every kernel of every layer is reported once per pass, in the order the header lists, with the rows it
//     ran over (the LM head over the logit rows only);
//   - the activations are the residual stream: layer 0's input is the embedding, each layer's kAfterMlp is
//   the
//     next layer's input, and for Prefill they are exactly PrefillTrace's tensors;
//   - logits are bitwise the same with and without an observer.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "plumb/kernels/int8_activations.h"
#include "plumb/model/forward_observer.h"
#include "plumb/model/model.h"
#include "support/golden.h"

namespace plumb {
namespace {

struct Recorder : ForwardObserver {
  struct Kernel {
    ForwardKernel kernel;
    int layer, rows;
    double seconds;
  };
  struct Activation {
    ActivationPoint point;
    int layer, rows, cols;
    std::vector<float> data;
  };
  int passes_begun = 0, passes_ended = 0;
  ForwardPhase phase = ForwardPhase::kDecode;
  int pass_rows = 0;
  std::vector<Kernel> kernels;
  std::vector<Activation> activations;  // the residual stream's points, in order
  std::vector<Activation> new_kv;       // kNewKeys and kNewValues, in order

  void OnPassBegin(ForwardPhase p, int rows) override {
    ++passes_begun;
    phase = p;
    pass_rows = rows;
  }
  void OnKernel(const KernelTiming& t) override { kernels.push_back({t.kernel, t.layer, t.rows, t.seconds}); }
  void OnActivation(ActivationPoint point, int layer, const float* data, int rows, int cols) override {
    const bool kv = point == ActivationPoint::kNewKeys || point == ActivationPoint::kNewValues;
    (kv ? new_kv : activations)
        .push_back({point, layer, rows, cols, std::vector<float>(data, data + rows * cols)});
  }
  void OnPassEnd() override { ++passes_ended; }
};

class ForwardObserverTest : public ::testing::Test {
 protected:
  ForwardObserverTest() : golden_(testing::FixtureDir("tiny-llama")), model_(Model::Load(golden_.dir())) {}

  // The kernels one pass must report, in order: embedding, 13 per layer (and `quantize` before the
  // projections of a one-row pass whose weights run the fast family's int8 kernels, 4 more), final_norm,
  // lm_head.
  static void ExpectKernelSequence(const Model& model, const Recorder& r, int rows, int logit_rows,
                                   bool quantized = false) {
    using K = ForwardKernel;
    std::vector<K> layer = {K::kAttnNorm};
    const auto quantize = [&] {
      if (quantized) layer.push_back(K::kQuantize);
    };
    quantize();
    layer.insert(layer.end(), {K::kQProj, K::kKProj, K::kVProj, K::kRope, K::kKvWrite, K::kAttention});
    quantize();
    layer.insert(layer.end(), {K::kOProj, K::kMlpNorm});
    quantize();
    layer.insert(layer.end(), {K::kGateProj, K::kUpProj, K::kSwiGlu});
    quantize();
    layer.push_back(K::kDownProj);
    const int layers = model.config().num_layers;
    ASSERT_EQ(r.kernels.size(), 3 + layer.size() * layers);
    std::size_t i = 0;
    EXPECT_EQ(r.kernels[i].kernel, ForwardKernel::kEmbedding);
    EXPECT_EQ(r.kernels[i++].layer, -1);
    for (int l = 0; l < layers; ++l) {
      for (K k : layer) {
        EXPECT_EQ(r.kernels[i].kernel, k) << "kernel " << i;
        EXPECT_EQ(r.kernels[i].layer, l);
        EXPECT_EQ(r.kernels[i].rows, rows);
        EXPECT_GE(r.kernels[i].seconds, 0.0);
        ++i;
      }
    }
    EXPECT_EQ(r.kernels[i].kernel, ForwardKernel::kFinalNorm);
    EXPECT_EQ(r.kernels[i + 1].kernel, ForwardKernel::kLmHead);
    EXPECT_EQ(r.kernels[i + 1].rows, logit_rows);
    EXPECT_EQ(r.passes_begun, 1);
    EXPECT_EQ(r.passes_ended, 1);
  }
  void ExpectKernelSequence(const Recorder& r, int rows, int logit_rows) const {
    ExpectKernelSequence(model_, r, rows, logit_rows);
  }

  // Layer inputs chain: layer 0's input is the embedding rows, and kAfterMlp of l is the input of l + 1.
  void ExpectActivationChain(const Recorder& r, int rows) const {
    const int layers = model_.config().num_layers;
    const int d = model_.config().hidden_size;
    ASSERT_EQ(r.activations.size(), static_cast<std::size_t>(3 * layers + 1));
    for (int l = 0; l < layers; ++l) {
      const auto& input = r.activations[3 * l];
      EXPECT_EQ(input.point, ActivationPoint::kLayerInput);
      EXPECT_EQ(r.activations[3 * l + 1].point, ActivationPoint::kAfterAttention);
      EXPECT_EQ(r.activations[3 * l + 2].point, ActivationPoint::kAfterMlp);
      EXPECT_EQ(input.layer, l);
      EXPECT_EQ(input.rows, rows);
      EXPECT_EQ(input.cols, d);
      if (l > 0) {
        EXPECT_EQ(input.data, r.activations[3 * l - 1].data) << "layer " << l;
      }
      // Attention changes the residual stream (a layer that reported a stale buffer would not).
      EXPECT_NE(r.activations[3 * l + 1].data, input.data);
    }
    EXPECT_EQ(r.activations.back().point, ActivationPoint::kFinalNorm);
    EXPECT_EQ(r.activations.back().layer, -1);
  }

  testing::GoldenFixture golden_;
  Model model_;
};

TEST_F(ForwardObserverTest, PrefillReportsEveryKernelAndMatchesTheTrace) {
  const std::vector<int>& prompt = golden_.prompt_ids();
  const int P = static_cast<int>(prompt.size());
  ContiguousKvCache plain_cache = model_.NewKvCache(64);
  PrefillTrace trace;
  const std::vector<float> plain = model_.Prefill(prompt, plain_cache, PrefillLogits::kAllRows, &trace);

  Recorder r;
  model_.set_observer(&r);
  ContiguousKvCache cache = model_.NewKvCache(64);
  const std::vector<float> observed = model_.Prefill(prompt, cache, PrefillLogits::kAllRows);
  model_.set_observer(nullptr);

  EXPECT_EQ(r.phase, ForwardPhase::kPrefill);
  EXPECT_EQ(r.pass_rows, P);
  ExpectKernelSequence(r, P, P);
  ExpectActivationChain(r, P);
  EXPECT_EQ(r.activations[0].data, trace.embedding);
  for (int l = 0; l < model_.config().num_layers; ++l)
    EXPECT_EQ(r.activations[3 * l + 2].data, trace.layer_outputs[l]) << "layer " << l;
  EXPECT_EQ(r.activations.back().data, trace.final_norm);
  ASSERT_EQ(observed.size(), plain.size());
  EXPECT_EQ(std::memcmp(observed.data(), plain.data(), plain.size() * sizeof(float)), 0);
}

// The new keys and values reported are what the cache holds: an F32 cache stores them unrounded.
TEST_F(ForwardObserverTest, NewKeysAndValuesAreWhatAnF32CacheStores) {
  const std::vector<int>& prompt = golden_.prompt_ids();
  const int P = static_cast<int>(prompt.size());
  const ModelConfig& c = model_.config();
  Recorder r;
  model_.set_observer(&r);
  ContiguousKvCache cache = model_.NewKvCache(64, KvDtype::kF32);
  model_.Prefill(prompt, cache);
  model_.set_observer(nullptr);
  ASSERT_EQ(r.new_kv.size(), static_cast<std::size_t>(2 * c.num_layers));
  for (int l = 0; l < c.num_layers; ++l) {
    const Recorder::Activation& k = r.new_kv[2 * l];
    const Recorder::Activation& v = r.new_kv[2 * l + 1];
    EXPECT_EQ(k.point, ActivationPoint::kNewKeys);
    EXPECT_EQ(v.point, ActivationPoint::kNewValues);
    ASSERT_EQ(k.layer, l);
    ASSERT_EQ(k.rows, P);
    ASSERT_EQ(k.cols, c.num_kv_heads * c.head_dim);
    for (int p = 0; p < P; ++p)
      for (int h = 0; h < c.num_kv_heads; ++h)
        for (int j = 0; j < c.head_dim; ++j) {
          const std::size_t at = static_cast<std::size_t>((p * c.num_kv_heads + h) * c.head_dim + j);
          ASSERT_EQ(k.data[at], cache.Key(l, h, p)[j]) << "layer " << l << " position " << p;
          ASSERT_EQ(v.data[at], cache.Value(l, h, p)[j]) << "layer " << l << " position " << p;
        }
  }
}

TEST_F(ForwardObserverTest, DecodeAndStepReportTheSameActivations) {
  const std::vector<int>& prompt = golden_.prompt_ids();
  ContiguousKvCache decode_cache = model_.NewKvCache(64);
  ContiguousKvCache step_cache = model_.NewKvCache(64);
  model_.Prefill(prompt, decode_cache);
  model_.Prefill(prompt, step_cache);
  const int token = prompt.back();

  Recorder decoded;
  model_.set_observer(&decoded);
  const std::span<const float> decode_logits = model_.Decode(token, decode_cache);
  const std::vector<float> decode_copy(decode_logits.begin(), decode_logits.end());
  Recorder stepped;
  model_.set_observer(&stepped);
  const int one[] = {token};
  const SequenceChunk chunk{&step_cache, one, false};
  const std::span<const float> step_logits =
      model_.Step(std::span(&chunk, 1), StepOptions{.batch_invariant = true});
  model_.set_observer(nullptr);

  EXPECT_EQ(decoded.phase, ForwardPhase::kDecode);
  EXPECT_EQ(stepped.phase, ForwardPhase::kStep);
  ExpectKernelSequence(decoded, 1, 1);
  ExpectKernelSequence(stepped, 1, 1);
  ExpectActivationChain(decoded, 1);
  ExpectActivationChain(stepped, 1);
  // A batch-invariant step of one token is bitwise Decode, activations included.
  ASSERT_EQ(decoded.activations.size(), stepped.activations.size());
  for (std::size_t i = 0; i < decoded.activations.size(); ++i)
    EXPECT_EQ(decoded.activations[i].data, stepped.activations[i].data) << "activation " << i;
  ASSERT_EQ(step_logits.size(), decode_copy.size());
  EXPECT_EQ(std::memcmp(step_logits.data(), decode_copy.data(), decode_copy.size() * sizeof(float)), 0);
}

// In the fast family a one-row pass over Q4_1 weights reports its quantizations as their own kernel (none
// for the LM head, which stays exact), and
// computes the same bits as without an observer (where GemvShared quantizes inside the projections); a
// prefill of several rows quantizes inside its projections, with no line of its own.
TEST_F(ForwardObserverTest, TheFastFamilysQuantizationIsAKernelOfItsOwnInADecode) {
  Model q4 = Model::Load(golden_.dir() + "/model.q4_1.gguf");
  kernels::SetFamily(kernels::KernelFamily::kFast);
  const std::vector<int>& prompt = golden_.prompt_ids();
  const int P = static_cast<int>(prompt.size());
  ContiguousKvCache plain_cache = q4.NewKvCache(64);
  ContiguousKvCache cache = q4.NewKvCache(64);
  q4.Prefill(prompt, plain_cache);
  Recorder prefill;
  q4.set_observer(&prefill);
  q4.Prefill(prompt, cache);
  q4.set_observer(nullptr);
  ExpectKernelSequence(q4, prefill, P, 1);

  const std::span<const float> plain_logits = q4.Decode(prompt.back(), plain_cache);
  const std::vector<float> plain(plain_logits.begin(), plain_logits.end());
  Recorder decoded;
  q4.set_observer(&decoded);
  const std::span<const float> observed = q4.Decode(prompt.back(), cache);
  q4.set_observer(nullptr);
  kernels::SetFamily(kernels::KernelFamily::kExact);
  ExpectKernelSequence(q4, decoded, 1, 1, /*quantized=*/true);
  ASSERT_EQ(observed.size(), plain.size());
  EXPECT_EQ(std::memcmp(observed.data(), plain.data(), plain.size() * sizeof(float)), 0);
  // A Q4_1 LM head keeps the exact kernels in the fast family (its exact kernels are vector code:
  // kernels::ExactRowDotsAreVectorized): the logits are the exact GEMV of the final norm.
  const WeightMatrix& head = q4.weights().LmHead();
  EXPECT_TRUE(head.exact_only);
  const std::vector<float>& final_norm = decoded.activations.back().data;
  std::vector<float> exact_logits(head.rows);
  kernels::Gemv(head, final_norm.data(), exact_logits.data());
  EXPECT_EQ(std::memcmp(plain.data(), exact_logits.data(), plain.size() * sizeof(float)), 0);
}

TEST(ForwardKernelNames, EveryKernelHasItsOwnName) {
  std::vector<std::string> names;
  for (int k = 0; k < kForwardKernelCount; ++k) {
    const std::string name(ForwardKernelName(static_cast<ForwardKernel>(k)));
    EXPECT_NE(name, "unknown");
    for (const std::string& other : names) EXPECT_NE(name, other);
    names.push_back(name);
  }
  EXPECT_EQ(ForwardKernelName(ForwardKernel::kQProj), "q_proj");
  EXPECT_EQ(ActivationPointName(ActivationPoint::kAfterMlp), "after_mlp");
  EXPECT_EQ(ActivationPointName(ActivationPoint::kNewValues), "new_values");
}

}  // namespace
}  // namespace plumb
