// The CLI on the default model (SmolLM2-135M-Instruct, fetched by scripts/fetch-model): chat over several
// turns from stdin, and bad input on a real model. Labelled real-model (CMakeLists.txt).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "plumb/cli/commands.h"
#include "support/golden.h"
#include "support/process.h"

namespace plumb {
namespace {

using testing::ProcessResult;
using testing::RunPlumb;

const std::string kSmolLm2 = std::string(PLUMB_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

TEST(Cli, ChatAnswersEveryLineOfInputKeepingTheConversation) {
  // Three messages, a blank line (ignored) and /reset; every turn prints its reply line on stdout and one
  // timing line on stderr. The second turn prefills only its own message (the cache is kept).
  std::istringstream in("Hello!\n\nWhat is 2 plus 2?\n/reset\nHi again.\n");
  std::ostringstream out, err;
  const std::vector<std::string> args = {"chat",         "--model", kSmolLm2, "--temp", "0",
                                         "--max-tokens", "24",      "--ctx",  "512"};
  ASSERT_EQ(cli::RunMain(args, out, err, in), 0) << err.str();
  const std::string replies = out.str();
  EXPECT_EQ(std::count(replies.begin(), replies.end(), '\n'), 3) << replies;
  const std::string log = err.str();
  EXPECT_NE(log.find("template chatml | context 512 tokens"), std::string::npos) << log;
  EXPECT_NE(log.find("(a new conversation"), std::string::npos) << log;
  std::vector<int> new_prompt_tokens;
  for (std::size_t at = log.find('['); at != std::string::npos; at = log.find('[', at + 1)) {
    new_prompt_tokens.push_back(std::stoi(log.substr(at + 1)));
  }
  ASSERT_EQ(new_prompt_tokens.size(), 3u) << log;
  EXPECT_LT(new_prompt_tokens[1], new_prompt_tokens[0]) << "turn 2 re-prefilled the conversation: " << log;
  EXPECT_GT(new_prompt_tokens[2], new_prompt_tokens[1])
      << "after /reset the system prompt comes again: " << log;
}

TEST(Cli, ChatAndGenerateOnTheRealModelReportBadInputInOneLine) {
  const std::string m = "--model " + kSmolLm2;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"chat " + m + " --chat-template vicuna </dev/null", "vicuna"},
      {"chat " + m + " --ctx 9000 </dev/null", "--ctx: 9000 exceeds the model's context length of 8192"},
      {"generate " + m + " --prompt hi --ctx 3 --max-tokens 4", "exceeds the context of 3"},
      {"perplexity " + m + " --file /etc/hostname", "needs at least 1024"},
  };
  for (const auto& [args, expected] : cases) {
    const ProcessResult result = RunPlumb(args);
    EXPECT_EQ(result.exit_code, 1) << args << "\n" << result.output;
    EXPECT_NE(result.output.find("plumb: error: "), std::string::npos) << args << "\n" << result.output;
    EXPECT_NE(result.output.find(expected), std::string::npos) << args << "\n" << result.output;
  }
  // A message too long for the context is reported and the chat goes on to the next line.
  const std::string input = std::string(PLUMB_BINARY_DIR) + "/cli_test_chat_input.txt";
  std::ofstream(input) << std::string(300, 'x') << "\nHi\n";
  const ProcessResult chat = RunPlumb("chat " + m + " --ctx 64 --temp 0 --max-tokens 4 <" + input);
  EXPECT_EQ(chat.exit_code, 0) << chat.output;
  EXPECT_NE(chat.output.find("leaves no room for a reply in the context of 64"), std::string::npos)
      << chat.output;
  EXPECT_NE(chat.output.find("generated"), std::string::npos) << chat.output;
}

// A KV hand-off on the real model, as text (docs/kv-cache.md, "KV hand-off format"): 5 tokens, saved, then 7
// more loaded from the file print what 12 tokens in one run print.
TEST(Cli, GenerateSavedAndLoadedKvContinuesTheTextOfOneRun) {
  const std::string common = "generate --model " + kSmolLm2 + " --ctx 64 --ignore-eos";
  const std::string prompt = " --prompt 'The capital of France is'";
  const std::string file = std::string(PLUMB_BINARY_DIR) + "/cli_smollm2_handoff.safetensors";
  const ProcessResult whole = RunPlumb(common + prompt + " --max-tokens 12");
  const ProcessResult first = RunPlumb(common + prompt + " --max-tokens 5 --save-kv " + file);
  const ProcessResult rest = RunPlumb(common + " --max-tokens 7 --load-kv " + file);
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  ASSERT_EQ(first.exit_code, 0) << first.output;
  ASSERT_EQ(rest.exit_code, 0) << rest.output;
  // The text is what comes before the timing lines (stderr, merged by RunPlumb).
  const auto text = [](const std::string& output) { return output.substr(0, output.find("\nprompt: ")); };
  EXPECT_EQ(text(first.output) + text(rest.output), text(whole.output)) << whole.output;
  EXPECT_NE(text(whole.output).find("Paris"), std::string::npos) << whole.output;
}

TEST(Cli, PerplexityAgainstItselfAsKlBaseGivesZeroDivergence) {
  // The same model as base and as model: the same windows give the same logits, so KL is exactly 0, the
  // top-1 agreement 100% and both perplexities equal the plain perplexity's.
  const std::string text = std::string(PLUMB_SOURCE_DIR) + "/fixtures/tokenizer/gpl-3.txt";
  const std::string no_chunks = "perplexity --model " + kSmolLm2 + " --file " + text + " --ctx 64";
  const std::string common = no_chunks + " --chunks 2";
  const ProcessResult plain = RunPlumb(common + " 2>/dev/null");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const std::size_t ppl = plain.output.find("PPL = ");
  ASSERT_NE(ppl, std::string::npos) << plain.output;
  const std::string ppl_line = plain.output.substr(ppl + 3, plain.output.find('\n', ppl) - ppl - 3);
  EXPECT_NE(ppl_line.find("(62 scored tokens in 2 windows of 64)"), std::string::npos) << ppl_line;

  const ProcessResult kl = RunPlumb(common + " --kl-base " + kSmolLm2);
  ASSERT_EQ(kl.exit_code, 0) << kl.output;
  const auto count = [&](const std::string& what) {
    std::size_t n = 0;
    for (std::size_t at = kl.output.find(what); at != std::string::npos; at = kl.output.find(what, at + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(count("PPL" + ppl_line), 2u) << ppl_line << "\n" << kl.output;  // the model's and the base's
  EXPECT_EQ(count("base PPL" + ppl_line), 1u) << kl.output;
  EXPECT_EQ(count("mean KL(base || model) = 0.0000e+00 +/- 0.0000e+00 nats\n"), 1u) << kl.output;
  EXPECT_EQ(count("top-1 agreement = 100.000 +/- 0.000 %\n"), 1u) << kl.output;
  const std::vector<std::pair<std::string, std::string>> bad = {
      {" --kl-base " + testing::FixtureDir("tiny-llama"),
       "KL divergence needs one vocabulary: the base model has 320 tokens, the model 49152"},
      {" --kl-base /nonexistent/model", "/nonexistent/model: model path does not exist"},
      {" --chunks -1", "--chunks: -1"},
      {" --kl-base-kernels exact", "--kl-base-kernels needs --kl-base"},
      {" --kl-base " + kSmolLm2 + " --kl-base-kernels quick",
       "--kl-base-kernels quick: expected exact or fast"},
  };
  for (const auto& [args, expected] : bad) {
    const ProcessResult result = RunPlumb(no_chunks + args);
    EXPECT_EQ(result.exit_code, 1) << args << "\n" << result.output;
    EXPECT_NE(result.output.find("plumb: error: " + expected), std::string::npos) << args << "\n"
                                                                                  << result.output;
  }
}

TEST(Cli, PerplexityMeasuresTheFastFamilyAgainstTheExactOne) {
  // One model file, exact kernels as the base, fast ones as the model, through the decode path: the run
  // says what it compares, and the fast family's divergence is above 0 (it ran) and small.
  const std::string text = std::string(PLUMB_SOURCE_DIR) + "/fixtures/tokenizer/gpl-3.txt";
  const ProcessResult r = RunPlumb("perplexity --model " + kSmolLm2 + " --file " + text +
                                   " --ctx 64 --chunks 1 --decode --kernels fast --kl-base " + kSmolLm2 +
                                   " --kl-base-kernels exact");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("decode path, kernels fast (base: exact)"), std::string::npos) << r.output;
  const std::size_t at = r.output.find("mean KL(base || model) = ");
  ASSERT_NE(at, std::string::npos) << r.output;
  const double kl = std::stod(r.output.substr(at + 25));
  EXPECT_GT(kl, 0.0) << r.output;
  // Small: over the whole file the fast family's KL is 3-5e-3 nats (docs/quantization.md), and this one
  // 31-token window reads 0.0098-0.0107 with an error bar of ±0.0027 depending on the summation order of
  // the int8 kernels' definition; a wrong kernel is far above 0.02.
  EXPECT_LT(kl, 0.02) << r.output;
}

}  // namespace
}  // namespace plumb
