// plumb_cuda_runner's plain C++ parts (cuda/runner/options.h): the command line, which cases it runs or
// skips, and the form in which it judges an output. Built everywhere, nvcc or not: the kernels themselves are
// checked only by running the runner on a GPU (docs/fixtures.md, "CUDA harness").
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "../../cuda/runner/options.h"

namespace plumb::cuda {
namespace {

RunnerOptions Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "plumb_cuda_runner");
  return ParseRunnerOptions(static_cast<int>(args.size()), args.data());
}

std::string ErrorOf(std::vector<const char*> args) {
  try {
    Parse(std::move(args));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RunnerOptions, ParsesEveryFlagInAnyOrder) {
  const RunnerOptions o = Parse({"--results", "out", "--cases", "^gemv\\.", "--suite", "fixtures/suite"});
  EXPECT_EQ(o.suite, "fixtures/suite");
  EXPECT_EQ(o.results, "out");
  EXPECT_EQ(o.cases, "^gemv\\.");
  EXPECT_EQ(Parse({"--suite", "s", "--results", "r"}).cases, "");
  // --precision: what the kernels round, and the allowances the judgement declares for it.
  EXPECT_TRUE(Parse({"--suite", "s", "--results", "r"}).Allowances().empty());
  const RunnerOptions bf16 = Parse({"--suite", "s", "--results", "r", "--precision", "bf16"});
  EXPECT_EQ(bf16.Allowances(), (std::vector<std::string>{"bf16_activations", "bf16_outputs"}));
  for (const std::string& a : bf16.Allowances()) EXPECT_TRUE(fixtures::IsAllowance(a)) << a;
}

TEST(RunnerOptions, RejectsBadCommandLinesNamingTheArgument) {
  EXPECT_NE(ErrorOf({"--suite", "s"}).find("--results DIR is required"), std::string::npos);
  EXPECT_NE(ErrorOf({"--results", "r"}).find("--suite DIR is required"), std::string::npos);
  EXPECT_NE(ErrorOf({"--suite", "s", "--results", "r", "--gpu", "0"}).find("unknown argument \"--gpu\""),
            std::string::npos);
  EXPECT_NE(ErrorOf({"--suite", "s", "--results"}).find("--results needs a value"), std::string::npos);
  EXPECT_NE(ErrorOf({"--suite", "a", "--suite", "b", "--results", "r"}).find("--suite given twice"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"--suite", "", "--results", "r"}).find("--suite DIR is required"), std::string::npos);
  EXPECT_NE(ErrorOf({"--suite", "s", "--results", "r", "--cases", "gemv("}).find("not a valid regular"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf({"--suite", "s", "--results", "r", "--precision", "fp8"}).find("fp32 or bf16, not \"fp8\""),
      std::string::npos);
}

fixtures::Case MakeCase(std::string name, std::string op, nlohmann::json params = nlohmann::json::object()) {
  fixtures::Case c;
  c.name = std::move(name);
  c.op = std::move(op);
  c.file = c.name + ".safetensors";
  c.params = std::move(params);
  return c;
}

TEST(SelectCases, RunsWhatTheKernelsCoverAndSaysWhyItSkipsTheRest) {
  const std::vector<fixtures::Case> cases = {
      MakeCase("gemv.q4_0.n37_k320", "gemv", {{"weight_dtype", "q4_0"}}),
      MakeCase("gemv.q4_k.n8_k256", "gemv", {{"weight_dtype", "q4_k"}}),
      MakeCase("gemm.awq.m3", "gemm", {{"weight_dtype", "awq"}}),
      MakeCase("rmsnorm.r3", "rmsnorm"),
      MakeCase("rope.interleaved", "rope", {{"pairing", "interleaved"}}),
      MakeCase("rope.yarn", "rope", {{"pairing", "yarn"}}),
      MakeCase("attention_decode.vllm.fp8", "attention_decode",
               {{"layout", "vllm"}, {"kv_dtype", "fp8_e5m2"}}),
      MakeCase("attention_decode.hnd.f16", "attention_decode", {{"layout", "hnd"}, {"kv_dtype", "f16"}}),
      MakeCase("reshape_and_cache.nhd.i8", "reshape_and_cache", {{"layout", "nhd"}, {"kv_dtype", "int8"}}),
      MakeCase("softmax.r4", "softmax"),
      MakeCase("kv_quant.int8", "kv_quant", {{"format", "int8"}}),
      MakeCase("layer.smollm2.0", "layer"),
      MakeCase("moe_route.softmax_topk.e8_k2", "moe_route", {{"routing", "softmax_topk"}}),
      MakeCase("moe_route.sigmoid_group_topk.e256", "moe_route", {{"routing", "sigmoid_group_topk"}}),
      MakeCase("moe_route.sparsemixer.e16", "moe_route", {{"routing", "sparsemixer"}}),
      MakeCase("moe_experts.mxfp4.e8_k2", "moe_experts", {{"weight_dtype", "mxfp4"}}),
      MakeCase("moe_experts.q4_0.e8_k2", "moe_experts", {{"weight_dtype", "q4_0"}}),
      MakeCase("moe_align_block_size.e8_k2_b16.m40", "moe_align_block_size", {{"block_size", 16}}),
      MakeCase("mla_decode.h2_r512_bs64", "mla_decode", {{"kv_lora_rank", 512}}),
      MakeCase("mla_prefill.h4_r96_bs16", "mla_prefill", {{"rows", 5}}),
      MakeCase("mla_prefill_fp8.h4", "mla_prefill_fp8"),  // an op of another name: not these kernels
  };
  const CaseSelection all = SelectCases(cases, "");
  std::vector<std::string> run;
  for (const fixtures::Case* c : all.run) run.push_back(c->name);
  EXPECT_EQ(run,
            (std::vector<std::string>{"gemv.q4_0.n37_k320", "gemm.awq.m3", "rmsnorm.r3", "rope.interleaved",
                                      "attention_decode.vllm.fp8", "softmax.r4", "layer.smollm2.0",
                                      "moe_route.softmax_topk.e8_k2", "moe_route.sigmoid_group_topk.e256",
                                      "moe_experts.mxfp4.e8_k2", "moe_align_block_size.e8_k2_b16.m40",
                                      "mla_decode.h2_r512_bs64", "mla_prefill.h4_r96_bs16"}));
  std::vector<std::string> skipped;
  for (const auto& [c, reason] : all.skipped) skipped.push_back(c->name + ": " + reason);
  EXPECT_EQ(skipped, (std::vector<std::string>{
                         "gemv.q4_k.n8_k256: weight_dtype \"q4_k\" not implemented",
                         "rope.yarn: pairing \"yarn\" not implemented",
                         "attention_decode.hnd.f16: layout \"hnd\" not implemented",
                         "reshape_and_cache.nhd.i8: kv_dtype \"int8\" not implemented",
                         "kv_quant.int8: format \"int8\" not implemented",
                         "moe_route.sparsemixer.e16: routing \"sparsemixer\" not implemented",
                         "moe_experts.q4_0.e8_k2: weight_dtype \"q4_0\" not implemented",
                         "mla_prefill_fp8.h4: op mla_prefill_fp8 not implemented",
                     }));
  EXPECT_EQ(all.not_matched, 0);

  // --cases searches anywhere in the name; what it leaves out is neither run nor skipped, only counted.
  const CaseSelection some = SelectCases(cases, "^(gemv|layer)\\.");
  ASSERT_EQ(some.run.size(), 2u);
  EXPECT_EQ(some.run[0]->name, "gemv.q4_0.n37_k320");
  EXPECT_EQ(some.run[1]->name, "layer.smollm2.0");
  ASSERT_EQ(some.skipped.size(), 1u);
  EXPECT_EQ(some.not_matched, 18);
  EXPECT_EQ(SelectCases(cases, "fp8").run.size(), 1u);
  const CaseSelection moe = SelectCases(cases, "^moe_");
  EXPECT_EQ(moe.run.size(), 4u);
  EXPECT_EQ(moe.skipped.size(), 2u);
  // Multi-head latent attention: both ops, whatever their params (FP32 cache only, the suite's one form).
  const CaseSelection mla = SelectCases(cases, "^mla_(decode|prefill)\\.");
  ASSERT_EQ(mla.run.size(), 2u);
  EXPECT_EQ(mla.run[0]->op, "mla_decode");
  EXPECT_EQ(mla.run[1]->op, "mla_prefill");
  EXPECT_TRUE(mla.skipped.empty());
  EXPECT_EQ(UnsupportedReason(MakeCase("mla_decode.t", "mla_decode")), "");
  EXPECT_EQ(UnsupportedReason(MakeCase("mla_prefill.t", "mla_prefill")), "");
}

// Block-scaled FP8 (docs/formats.md "Block-scaled FP8 (128×128)"): gemv and gemm both run it; a block size
// the harness does not know is still a skip.
TEST(SelectCases, RunsBlockScaledFp8GemvAndGemm) {
  const std::vector<fixtures::Case> cases = {
      MakeCase("gemv.fp8_block128.n130_k300", "gemv", {{"weight_dtype", "fp8_block128"}}),
      MakeCase("gemm.fp8_block128.m5_n37_k333", "gemm", {{"weight_dtype", "fp8_block128"}}),
      MakeCase("gemv.fp8_block64.n37_k333", "gemv", {{"weight_dtype", "fp8_block64"}}),
      MakeCase("moe_experts.fp8_block128.e8_k2", "moe_experts", {{"weight_dtype", "fp8_block128"}}),
  };
  const CaseSelection sel = SelectCases(cases, "fp8_block");
  std::vector<std::string> run;
  for (const fixtures::Case* c : sel.run) run.push_back(c->name);
  EXPECT_EQ(run, (std::vector<std::string>{"gemv.fp8_block128.n130_k300", "gemm.fp8_block128.m5_n37_k333"}));
  std::vector<std::string> skipped;
  for (const auto& [c, reason] : sel.skipped) skipped.push_back(c->name + ": " + reason);
  EXPECT_EQ(skipped, (std::vector<std::string>{
                         "gemv.fp8_block64.n37_k333: weight_dtype \"fp8_block64\" not implemented",
                         "moe_experts.fp8_block128.e8_k2: weight_dtype \"fp8_block128\" not implemented",
                     }));
}

// attention_prefill: the paged NHD layout and the contiguous cache, every KV dtype attention_decode takes,
// with or without a window; the vLLM layout (not one the op defines) and an unknown dtype are skips.
// sampling and speculative_verify run whatever their params (each filter is in the kernel).
TEST(SelectCases, RunsPrefillSamplingAndSpeculativeVerify) {
  const std::vector<fixtures::Case> cases = {
      MakeCase("attention_prefill.nhd.f32", "attention_prefill", {{"layout", "nhd"}, {"kv_dtype", "f32"}}),
      MakeCase("attention_prefill.nhd.fp8_e4m3", "attention_prefill",
               {{"layout", "nhd"}, {"kv_dtype", "fp8_e4m3"}}),
      MakeCase("attention_prefill.contiguous.f32.window14", "attention_prefill",
               {{"layout", "contiguous"}, {"kv_dtype", "f32"}, {"window", 14}}),
      MakeCase("attention_prefill.contiguous.bf16", "attention_prefill",
               {{"layout", "contiguous"}, {"kv_dtype", "bf16"}}),
      MakeCase("attention_prefill.vllm.f16", "attention_prefill", {{"layout", "vllm"}, {"kv_dtype", "f16"}}),
      MakeCase("attention_prefill.nhd.int8", "attention_prefill", {{"layout", "nhd"}, {"kv_dtype", "int8"}}),
      MakeCase("attention_prefill.contiguous", "attention_prefill", {{"layout", "contiguous"}}),
      MakeCase("sampling.top_k_top_p_min_p", "sampling", {{"top_k", 50}, {"top_p", 0.8}, {"min_p", 0.02}}),
      MakeCase("sampling.greedy", "sampling", {{"temperature", 0.0}}),
      MakeCase("speculative_verify.v37_k4", "speculative_verify", {{"k", 4}, {"vocab", 37}}),
      MakeCase("speculative_decode.v37", "speculative_decode"),  // an op of another name
  };
  const CaseSelection all = SelectCases(cases, "");
  std::vector<std::string> run;
  for (const fixtures::Case* c : all.run) run.push_back(c->name);
  EXPECT_EQ(run, (std::vector<std::string>{"attention_prefill.nhd.f32", "attention_prefill.nhd.fp8_e4m3",
                                           "attention_prefill.contiguous.f32.window14",
                                           "attention_prefill.contiguous.bf16", "sampling.top_k_top_p_min_p",
                                           "sampling.greedy", "speculative_verify.v37_k4"}));
  std::vector<std::string> skipped;
  for (const auto& [c, reason] : all.skipped) skipped.push_back(c->name + ": " + reason);
  EXPECT_EQ(skipped, (std::vector<std::string>{
                         "attention_prefill.vllm.f16: layout \"vllm\" not implemented",
                         "attention_prefill.nhd.int8: kv_dtype \"int8\" not implemented",
                         "attention_prefill.contiguous: kv_dtype \"\" not implemented",
                         "speculative_decode.v37: op speculative_decode not implemented",
                     }));
  // --cases picks them out by name like any other op.
  const CaseSelection prefill = SelectCases(cases, "^attention_prefill\\.contiguous");
  EXPECT_EQ(prefill.run.size(), 2u);
  EXPECT_EQ(prefill.skipped.size(), 1u);
  EXPECT_EQ(prefill.not_matched, 8);
  const CaseSelection sampling = SelectCases(cases, "^(sampling|speculative_verify)\\.");
  EXPECT_EQ(sampling.run.size(), 3u);
  EXPECT_TRUE(sampling.skipped.empty());
}

// The model cases (docs/fixtures.md "tp_layer", "layer", "end_to_end", "kv_handoff"): Llama's tp_layer, the
// layer and end_to_end cases, and kv_handoff over every KV dtype the cache kernels take; Gemma 3's tp_layer
// and another KV dtype are skips. With a models directory, a case whose GGUF file is not in it is skipped,
// saying so; tp_layer carries its shards and needs none.
TEST(SelectCases, RunsTheModelCasesAndSkipsThoseWithoutTheirModelFile) {
  const std::vector<fixtures::Case> cases = {
      MakeCase("tp_layer.synthetic.tp2", "tp_layer", {{"tp", 2}}),
      MakeCase("tp_layer.gemma3.tp2", "tp_layer",
               {{"qk_norm", true}, {"sandwich_norm", true}, {"mlp_activation", "gelu_tanh"}}),
      MakeCase("layer.m", "layer", {{"model", "absent.gguf"}}),
      MakeCase("end_to_end.m", "end_to_end", {{"model", "absent.gguf"}}),
      MakeCase("kv_handoff.fp8_e4m3", "kv_handoff", {{"model", "absent.gguf"}, {"kv_dtype", "fp8_e4m3"}}),
      MakeCase("kv_handoff.int8", "kv_handoff", {{"model", "absent.gguf"}, {"kv_dtype", "int8"}}),
  };
  const CaseSelection all = SelectCases(cases, "");
  std::vector<std::string> run, skipped;
  for (const fixtures::Case* c : all.run) run.push_back(c->name);
  for (const auto& [c, reason] : all.skipped) skipped.push_back(c->name + ": " + reason);
  EXPECT_EQ(run, (std::vector<std::string>{"tp_layer.synthetic.tp2", "layer.m", "end_to_end.m",
                                           "kv_handoff.fp8_e4m3"}));
  EXPECT_EQ(skipped,
            (std::vector<std::string>{
                "tp_layer.gemma3.tp2: Gemma 3's layer (qk_norm, sandwich_norm, gelu_tanh) not implemented",
                "kv_handoff.int8: kv_dtype \"int8\" not implemented",
            }));
  const std::filesystem::path models = std::filesystem::path(PLUMB_SOURCE_DIR) / "fixtures" / "suite";
  const CaseSelection here = SelectCases(cases, "", models);  // a directory without absent.gguf
  ASSERT_EQ(here.run.size(), 1u);
  EXPECT_EQ(here.run[0]->name, "tp_layer.synthetic.tp2");
  ASSERT_EQ(here.skipped.size(), 5u);
  EXPECT_EQ(here.skipped[1].second, "model " + (models / "absent.gguf").string() +
                                        " not found (the suite manifest's model.fetch says how to get it, "
                                        "--models DIR where it is)");
}

// The committed suite (fixtures/suite): the harness implements every one of its cases. Without the suite's
// model in models/ (scripts/fetch-model smollm2) its model cases are the only skips, each naming the file.
TEST(SelectCases, SkipsNothingOfTheCommittedSuite) {
  const std::filesystem::path source = PLUMB_SOURCE_DIR;
  const fixtures::Suite suite = fixtures::Suite::Open(source / "fixtures" / "suite");
  EXPECT_TRUE(SelectCases(suite.cases(), "").skipped.empty());
  const CaseSelection all = SelectCases(suite.cases(), "", source / "models");
  EXPECT_EQ(all.run.size() + all.skipped.size(), suite.cases().size());
  for (const auto& [c, reason] : all.skipped) {
    EXPECT_TRUE(ReadsModelFile(*c)) << c->name << ": " << reason;
    EXPECT_NE(reason.find(" not found "), std::string::npos) << c->name << ": " << reason;
  }
  if (std::filesystem::exists(source / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf")) {
    EXPECT_TRUE(all.skipped.empty());
  }
}

fixtures::Tensor I32(std::vector<std::int32_t> values) {
  return fixtures::Tensor::From<std::int32_t>("I32", {static_cast<std::int64_t>(values.size())}, values);
}

// moe_align_block_size's sorted_token_ids is judged with each expert's segment sorted, the segments those of
// the case's own expert_ids (docs/fixtures.md "moe_align_block_size"), as verify judges it: an engine's order
// inside a segment passes, an index or a pad in another segment does not.
TEST(InJudgedForm, SortsEachExpertSegmentOfMoeAlignBlockSize) {
  const fixtures::Case c = MakeCase("moe_align_block_size.t", "moe_align_block_size", {{"block_size", 4}});
  // experts 0 (3 slots: one block), 2 (5 slots: two blocks); pad 12 (tokens·top_k).
  const fixtures::Tensor expert_ids = I32({0, 2, 2});
  const std::vector<std::int32_t> expected{1, 4, 9, 12, 0, 2, 3, 7, 11, 12, 12, 12};
  auto judged = [&](std::vector<std::int32_t> engine) {
    return InJudgedForm(c, "sorted_token_ids", expert_ids, I32(std::move(engine))).As<std::int32_t>();
  };
  EXPECT_EQ(judged({9, 12, 4, 1, 12, 11, 3, 12, 7, 0, 12, 2}), expected);  // atomics' order, pads anywhere
  EXPECT_NE(judged({1, 4, 0, 12, 9, 2, 3, 7, 11, 12, 12, 12}), expected);  // 0 and 9 swapped: other experts
  EXPECT_NE(judged({1, 4, 9, 12, 0, 2, 3, 7, 11, 12, 12, 0}), expected);   // a pad of another value
  // Another size (P wrong), another output or op: as it is.
  EXPECT_EQ(judged({3, 2, 1}), (std::vector<std::int32_t>{3, 2, 1}));
  const fixtures::Tensor unsorted = I32({3, 2, 1, 0});
  EXPECT_EQ(InJudgedForm(c, "expert_ids", I32({0}), unsorted).As<std::int32_t>(),
            unsorted.As<std::int32_t>());
  EXPECT_EQ(
      InJudgedForm(MakeCase("gemv.t", "gemv", {{"block_size", 4}}), "sorted_token_ids", I32({0}), unsorted)
          .As<std::int32_t>(),
      unsorted.As<std::int32_t>());
}

}  // namespace
}  // namespace plumb::cuda
