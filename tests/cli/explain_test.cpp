// plumb explain on the tiny fixture model (token ids in, tiny probes): the sections a learner reads, the
// shapes of prefill against decode, the KV accounting (hand-computed), every line within 100 columns, and
// one clear error line for each kind of bad input. Nothing asserts a time.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "plumb/kernels/blas_core.h"
#include "support/golden.h"
#include "support/process.h"

namespace plumb {
namespace {

using testing::ProcessResult;
using testing::RunPlumb;

const std::string kModel = testing::FixtureDir("tiny-llama");
const std::string kFast = " --probe-mib 4 --probe-repetitions 1 --repetitions 1 --threads 1";

std::size_t Columns(const std::string& line) {
  std::size_t n = 0;
  for (char c : line) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

TEST(ExplainCliTest, NarratesPrefillDecodeAndTheCache) {
  const ProcessResult r =
      RunPlumb("explain --model " + kModel + " --prompt-ids 5,6,7 --steps 2 --layer 1" + kFast);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string flat = r.output;  // paragraphs are wrapped: look for phrases across the line breaks
  std::replace(flat.begin(), flat.end(), '\n', ' ');
  for (const char* needle :
       {"== 1. Prefill: all 3 prompt tokens in one pass ==", "== 2. Decode: one token per pass ==",
        "== 3. The KV cache ==", "== 4. The prefill/decode split ==", "Layer 1, kernel by kernel",
        "q_proj         3×64 · 64×64",  // prefill: P rows
        "q_proj         1×64 · 64×64",  // decode: one row
        "gate_proj      1×64 · 64×160", "lm_head        1×64 · 64×320",
        // K and V × 2 layers × 2 KV heads × 16 × 4 B; 3 prompt positions + 2 steps.
        "= 512 B per token", "It now holds 5 (2.56 kB)", "step 2: in", "MBU", "MFU"}) {
    EXPECT_NE(flat.find(needle), std::string::npos) << needle << "\n" << r.output;
  }
  // The family that ran is named: fast by default, exact when asked.
  EXPECT_NE(flat.find("kernels: fast (int8 activations for GGUF Q4_0"), std::string::npos) << r.output;
  const ProcessResult exact =
      RunPlumb("explain --model " + kModel + " --prompt-ids 5,6 --steps 1 --kernels exact" + kFast);
  ASSERT_EQ(exact.exit_code, 0) << exact.output;
  EXPECT_NE(exact.output.find("kernels: exact, "), std::string::npos) << exact.output;
  // Which regime a kernel lands in depends on the host; that every kernel gets one is what is checked.
  EXPECT_NE(r.output.find("-bound"), std::string::npos);
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(Columns(line), 100u) << line;
}

// A mixture-of-experts model: its experts are named in the model line, and the expert projections report
// how many of the experts a pass reads (the router inside gate_proj, as the cost model counts it).
TEST(ExplainCliTest, NamesAMixtureOfExpertsAndTheExpertsAPassReads) {
  const ProcessResult r = RunPlumb("explain --model " + testing::FixtureDir("tiny-qwen3moe") +
                                   " --prompt-ids 5,6,7 --steps 1" + kFast);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string flat = r.output;
  std::replace(flat.begin(), flat.end(), '\n', ' ');
  for (const char* needle : {"model: qwen3_moe", "8 experts of MLP 32, 2 per token, in 2 of 2 layers",
                             "of 8 read + router", "qk_norm"}) {
    EXPECT_NE(flat.find(needle), std::string::npos) << needle << "\n" << r.output;
  }
}

// Which of OpenBLAS's kernels prefill ran on is named, and whether OPENBLAS_CORETYPE chose them: on a
// Zen 5 core the AVX2 ones run prefill at half the speed of the AVX-512 ones (kernels/blas_core.h).
TEST(ExplainCliTest, NamesTheBlasKernelsPrefillRunsOn) {
  const ProcessResult r = RunPlumb("explain --model " + kModel + " --prompt-ids 5,6 --steps 1" + kFast);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string flat = r.output;
  std::replace(flat.begin(), flat.end(), '\n', ' ');
  EXPECT_NE(flat.find("prefill GEMM: " + kernels::BlasDescription()), std::string::npos) << r.output;
  const bool set = std::getenv("OPENBLAS_CORETYPE") != nullptr && *std::getenv("OPENBLAS_CORETYPE") != '\0';
  EXPECT_EQ(flat.find("(set by OPENBLAS_CORETYPE)") != std::string::npos, set) << r.output;
}

TEST(ExplainCliTest, BadInputGivesOneClearLine) {
  const std::pair<std::string, const char*> cases[] = {
      {"--model " + kModel, "give exactly one of --prompt TEXT and --prompt-ids IDS"},
      {"--model " + kModel + " --prompt hi --prompt-ids 1", "give exactly one of"},
      {"--model " + kModel + " --prompt hi", "tokenizer"},
      {"--model " + kModel + " --prompt-ids 1,999", "999"},
      {"--model " + kModel + " --prompt-ids 1 --layer 2", "--layer"},
      {"--model " + kModel + " --prompt-ids 1 --steps 0", "--steps"},
      {"--model " + kModel + " --prompt-ids 1 --steps 200", "exceed the model's context of 128"},
      {"--prompt-ids 1", "--model"},
  };
  for (const auto& [args, needle] : cases) {
    const ProcessResult r = RunPlumb("explain " + args + kFast);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.output;
    EXPECT_EQ(r.output.rfind("plumb: error: ", 0), 0u) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace plumb
