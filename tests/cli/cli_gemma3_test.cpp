// The CLI on Gemma 3 270M (scripts/fetch-model gemma3): three prompts through the scheduler at once give
// each prompt's own greedy tokens, one of them over 512 tokens long so that the sliding-window layers slide
// over the paged cache in batched steps; and chat works on a file with no chat template (the gemma3 style is
// the default for its vocabulary). Labelled real-model (CMakeLists.txt).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "plumb/cli/commands.h"
#include "plumb/cli/prompt_lines.h"

namespace plumb {
namespace {

const std::string kGemma3 = std::string(PLUMB_SOURCE_DIR) + "/models/gemma-3-270m-q4_k_m.gguf";

class CliGemma3 : public ::testing::Test {
 protected:
  void SetUp() override {
    // A failure, not a skip: the test command fetches the model before running the tests.
    ASSERT_TRUE(std::filesystem::exists(kGemma3)) << kGemma3 << " is missing: run scripts/fetch-model gemma3";
  }
};

// The first `chars` characters of the GPL-3 text on one line (a prompts file holds one prompt per line).
std::string LicenceOnOneLine(std::size_t chars) {
  std::string text = cli::ReadTextFile("/usr/share/common-licenses/GPL-3");  // Debian's base-files
  text = text.substr(0, chars);
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

std::string Generate(std::vector<std::string> args) {
  args.insert(args.begin(), {"generate", "--model", kGemma3, "--max-tokens", "12", "--ignore-eos"});
  std::ostringstream out, err;
  EXPECT_EQ(cli::RunMain(args, out, err), 0) << err.str();
  return out.str();
}

std::string WritePrompts(const std::string& name, const std::vector<std::string>& prompts) {
  const std::string file = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream out(file);
  for (const std::string& p : prompts) out << p << "\n";
  return file;
}

// The output after the header "### i (" of a batched run's i-th prompt, up to the next header or the end.
std::string Section(const std::string& batched, int i) {
  const std::size_t header = batched.find("### " + std::to_string(i) + " (");
  if (header == std::string::npos) return "(no section " + std::to_string(i) + ")";
  const std::size_t body = batched.find('\n', header) + 1;
  const std::size_t next = batched.find("### ", body);
  return batched.substr(body, next == std::string::npos ? std::string::npos : next - body);
}

TEST_F(CliGemma3, ThreePromptsBatchedGiveEachPromptsOwnTokens) {
  const std::vector<std::string> prompts = {"The capital of France is",
                                            "def fibonacci(n):", LicenceOnOneLine(2600)};
  // --deterministic: every row's logits bitwise what that prompt gets alone, whatever else is in the step,
  // so the tokens are equal by construction of the kernels, not by luck at near-ties. (Alone here is the
  // same scheduler with one prompt; `generate --prompt` prefills with a GEMM, whose sums round otherwise.)
  const std::vector<std::string> flags = {"--deterministic", "--block-size", "16"};
  std::vector<std::string> args = {"--prompts-file", WritePrompts("plumb_gemma3_prompts.txt", prompts)};
  args.insert(args.end(), flags.begin(), flags.end());
  const std::string batched = Generate(args);
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    args = {"--prompts-file", WritePrompts("plumb_gemma3_prompt.txt", {prompts[i]})};
    args.insert(args.end(), flags.begin(), flags.end());
    EXPECT_EQ(Section(batched, static_cast<int>(i) + 1), Section(Generate(args), 1)) << "prompt " << i + 1;
  }
  const std::size_t third = batched.find("### 3 (");
  ASSERT_NE(third, std::string::npos) << batched;
  EXPECT_GT(std::stoi(batched.substr(third + 7)), 512) << "the long prompt should pass the 512-token window";
}

TEST_F(CliGemma3, ChatUsesTheGemma3StyleWithoutATemplateInTheFile) {
  std::istringstream in("Name a colour.\n");
  std::ostringstream out, err;
  const std::vector<std::string> args = {"chat", "--model", kGemma3, "--temp", "0", "--max-tokens", "16"};
  ASSERT_EQ(cli::RunMain(args, out, err, in), 0) << err.str();
  EXPECT_NE(err.str().find("template gemma3"), std::string::npos) << err.str();
  EXPECT_GT(out.str().size(), 1u) << "no reply: " << err.str();
}

}  // namespace
}  // namespace plumb
