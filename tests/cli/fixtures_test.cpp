// plumb fixtures generate / run-reference / verify as a user runs them (build/plumb, a real process): the op
// suite without a model, plumb's own results PASS with exit 0, a wrong or missing result FAILs with exit 1,
// and bad input is one clear error line (verify: exit 2, so a script tells a broken invocation from a failing
// engine).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "plumb/kernels/int8_activations.h"
#include "support/process.h"

namespace plumb {
namespace {

namespace fs = std::filesystem;
using testing::RunPlumb;

class FixturesCli : public ::testing::Test {
 protected:
  FixturesCli() : dir_(fs::temp_directory_path() / ("plumb_fixtures_cli_" + std::to_string(::getpid()))) {}
  ~FixturesCli() override { fs::remove_all(dir_); }
  std::string Path(const std::string& sub) const { return (dir_ / sub).string(); }
  fs::path dir_;
};

TEST_F(FixturesCli, GenerateRunReferenceVerify) {
  const auto gen = RunPlumb("fixtures generate --model none --out " + Path("suite"));
  ASSERT_EQ(gen.exit_code, 0) << gen.output;
  const auto ref =
      RunPlumb("fixtures run-reference --model none --suite " + Path("suite") + " --out " + Path("res"));
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  const auto ok = RunPlumb("fixtures verify --suite " + Path("suite") + " --results " + Path("res"));
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("case"), std::string::npos);
  EXPECT_NE(ok.output.find("threshold"), std::string::npos);
  EXPECT_NE(ok.output.find("margin"), std::string::npos);
  EXPECT_NE(ok.output.find("; the closest PASS used "), std::string::npos) << ok.output;
  EXPECT_EQ(ok.output.find("FAIL"), std::string::npos) << ok.output;

  // The fast family's op results, judged with the allowances it declares on this host (int8_activations,
  // and bf16_activations where its float prefill runs the BF16 panels), which run-reference names; an
  // unknown allowance is an error.
  const auto fast = RunPlumb("fixtures run-reference --kernels fast --model none --suite " + Path("suite") +
                             " --out " + Path("fast"));
  ASSERT_EQ(fast.exit_code, 0) << fast.output;
  std::string declared;
  for (const std::string& a : kernels::DeclaredAllowances(kernels::KernelFamily::kFast))
    declared += (declared.empty() ? "" : ",") + a;
  EXPECT_NE(fast.output.find("run-reference: kernels fast on this host: verify --allow " + declared + "\n"),
            std::string::npos)
      << fast.output;
  const auto allowed = RunPlumb("fixtures verify --allow " + declared + " --suite " + Path("suite") +
                                " --results " + Path("fast"));
  EXPECT_EQ(allowed.exit_code, 0) << allowed.output;
  EXPECT_NE(allowed.output.find("[int8_activations"), std::string::npos) << allowed.output;
  const auto bogus =
      RunPlumb("fixtures verify --allow fp4 --suite " + Path("suite") + " --results " + Path("fast"));
  EXPECT_EQ(bogus.exit_code, 2) << bogus.output;
  EXPECT_NE(
      bogus.output.find(
          "--allow fp4: unknown allowance (known: int8_activations, fp16_accumulation, bf16_activations"),
      std::string::npos)
      << bogus.output;

  // --cases selects: only the rope cases' rows.
  const auto rope =
      RunPlumb("fixtures verify --cases '^rope' --suite " + Path("suite") + " --results " + Path("res"));
  EXPECT_EQ(rope.exit_code, 0) << rope.output;
  EXPECT_NE(rope.output.find("8 of 8 checks PASS"), std::string::npos) << rope.output;

  // A wrong result (another case's output under this name) and a missing one both FAIL, exit 1.
  fs::copy_file(Path("res/gemv.f16.n37_k333.safetensors"), Path("res/gemv.f32.n37_k333.safetensors"),
                fs::copy_options::overwrite_existing);
  fs::remove(Path("res/rmsnorm.rows2_n77.safetensors"));
  const auto bad = RunPlumb("fixtures verify --suite " + Path("suite") + " --results " + Path("res"));
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("gemv.f32.n37_k333"), std::string::npos);
  EXPECT_NE(bad.output.find("missing results file"), std::string::npos) << bad.output;
  // Each FAILs its metric and its per-element bound.
  EXPECT_NE(bad.output.find("4 FAIL"), std::string::npos) << bad.output;

  const auto none =
      RunPlumb("fixtures verify --cases '^nothing' --suite " + Path("suite") + " --results " + Path("res"));
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.output.find("matches no case"), std::string::npos) << none.output;
  const auto nowhere = RunPlumb("fixtures verify --suite " + Path("suite") + " --results " + Path("nowhere"));
  EXPECT_EQ(nowhere.exit_code, 2);
  EXPECT_NE(nowhere.output.find("nowhere: not a directory"), std::string::npos) << nowhere.output;
}

TEST_F(FixturesCli, BadInputIsOneClearError) {
  const auto missing = RunPlumb("fixtures generate --model /nonexistent.gguf --out " + Path("s"));
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("--model none"), std::string::npos) << missing.output;
  const auto size = RunPlumb("fixtures generate --model none --size huge --out " + Path("s"));
  EXPECT_NE(size.exit_code, 0);
  EXPECT_NE(size.output.find("huge"), std::string::npos) << size.output;
  const auto sub = RunPlumb("fixtures frobnicate");
  EXPECT_NE(sub.exit_code, 0);
  EXPECT_NE(sub.output.find("generate, verify, run-reference"), std::string::npos) << sub.output;
  const auto nosuite = RunPlumb("fixtures verify --suite " + Path("nowhere") + " --results " + Path("r"));
  EXPECT_EQ(nosuite.exit_code, 2);
  EXPECT_NE(nosuite.output.find("manifest.json"), std::string::npos) << nosuite.output;
  const auto regex =
      RunPlumb("fixtures verify --cases '(' --suite " + Path("nowhere") + " --results " + Path("r"));
  EXPECT_EQ(regex.exit_code, 2);
  const auto flag = RunPlumb("fixtures verify --suite " + Path("nowhere") + " --frobnicate");
  EXPECT_EQ(flag.exit_code, 2) << flag.output;
  const auto help = RunPlumb("fixtures --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("run-reference"), std::string::npos);
}

}  // namespace
}  // namespace plumb
