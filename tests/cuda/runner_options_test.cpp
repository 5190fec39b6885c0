// plumb_cuda_runner's plain C++ parts (cuda/runner/options.h): the command line and which cases it runs or
// skips. Built everywhere, nvcc or not: the kernels themselves are checked only by running the runner on a
// GPU (docs/fixtures.md, "CUDA harness").
#include <gtest/gtest.h>

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
  };
  const CaseSelection all = SelectCases(cases, "");
  std::vector<std::string> run;
  for (const fixtures::Case* c : all.run) run.push_back(c->name);
  EXPECT_EQ(run, (std::vector<std::string>{"gemv.q4_0.n37_k320", "gemm.awq.m3", "rmsnorm.r3",
                                           "rope.interleaved", "attention_decode.vllm.fp8", "softmax.r4"}));
  std::vector<std::string> skipped;
  for (const auto& [c, reason] : all.skipped) skipped.push_back(c->name + ": " + reason);
  EXPECT_EQ(skipped, (std::vector<std::string>{
                         "gemv.q4_k.n8_k256: weight_dtype \"q4_k\" not implemented",
                         "rope.yarn: pairing \"yarn\" not implemented",
                         "attention_decode.hnd.f16: layout \"hnd\" not implemented",
                         "reshape_and_cache.nhd.i8: kv_dtype \"int8\" not implemented",
                         "kv_quant.int8: format \"int8\" not implemented",
                         "layer.smollm2.0: op layer not implemented",
                     }));
  EXPECT_EQ(all.not_matched, 0);

  // --cases searches anywhere in the name; what it leaves out is neither run nor skipped, only counted.
  const CaseSelection some = SelectCases(cases, "^(gemv|layer)\\.");
  ASSERT_EQ(some.run.size(), 1u);
  EXPECT_EQ(some.run[0]->name, "gemv.q4_0.n37_k320");
  ASSERT_EQ(some.skipped.size(), 2u);
  EXPECT_EQ(some.not_matched, 9);
  EXPECT_EQ(SelectCases(cases, "fp8").run.size(), 1u);
}

}  // namespace
}  // namespace plumb::cuda
