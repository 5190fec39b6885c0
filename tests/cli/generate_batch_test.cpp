// plumb generate --prompt-ids-file: many prompts through the scheduler print, in the file's order, what
// each prints alone; the KV accounting is reported; bad files and flags are one clear error line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "plumb/cli/commands.h"
#include "support/golden.h"
#include "support/process.h"

namespace plumb {
namespace {

const std::string kModel = testing::FixtureDir("tiny-llama");

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path) << text;
  return path;
}

std::string Alone(const std::string& ids, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"generate", "--model",      kModel, "--prompt-ids",
                                   ids,        "--max-tokens", "10",   "--ignore-eos"};
  args.insert(args.end(), extra.begin(), extra.end());
  std::ostringstream out, err;
  EXPECT_EQ(cli::RunMain(args, out, err), 0) << err.str();
  return out.str();
}

TEST(GenerateBatch, PrintsEachPromptsOwnResultInOrder) {
  const std::vector<std::string> prompts = {"1,5,9,13,17,21,25,29,33,37,41", "7", "1,5,9,13,17,21,25,29,33,2",
                                            "100,200"};
  const std::string file = WriteFile(
      "plumb_batch_prompts.txt", prompts[0] + "\n\n" + prompts[1] + "\r\n" + prompts[2] + "\n" + prompts[3]);
  for (const std::vector<std::string>& extra : std::vector<std::vector<std::string>>{
           {},
           {"--deterministic", "--block-size", "1"},
           {"--kv-budget-mib", "1", "--step-tokens", "3", "--block-size", "4"},
           {"--kv-policy", "refuse", "--max-batch", "2"}}) {
    std::vector<std::string> args = {"generate", "--model",      kModel, "--prompt-ids-file",
                                     file,       "--max-tokens", "10",   "--ignore-eos"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::ostringstream out, err;
    ASSERT_EQ(cli::RunMain(args, out, err), 0) << err.str();
    std::string expected;
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      const std::size_t n = std::count(prompts[i].begin(), prompts[i].end(), ',') + 1;
      expected += "### " + std::to_string(i + 1) + " (" + std::to_string(n) +
                  " prompt tokens, 10 generated, max tokens)\n" + Alone(prompts[i]);
    }
    EXPECT_EQ(out.str(), expected) << "flags: " << ::testing::PrintToString(extra);
    // f16: the KV cache of the fast kernel family, generate's default (the outputs above equal the prompts'
    // own runs, which use it too).
    for (const char* field : {"requests: 4", "kv cache: f16", "bytes/token", "peak used", "that fit"}) {
      EXPECT_NE(err.str().find(field), std::string::npos) << field << " missing from: " << err.str();
    }
  }
}

TEST(GenerateBatch, KvDtypeAppliesToOnePromptAndToMany) {
  const std::string file = WriteFile("plumb_batch_one.txt", "1,5,9,13\n");
  for (const char* dtype : {"f16", "bf16", "fp8-e4m3"}) {
    std::ostringstream out, err;
    const std::vector<std::string> args = {"generate",   "--model",      kModel, "--prompt-ids-file",
                                           file,         "--max-tokens", "10",   "--ignore-eos",
                                           "--kv-dtype", dtype};
    ASSERT_EQ(cli::RunMain(args, out, err), 0) << err.str();
    EXPECT_NE(err.str().find(std::string("kv cache: ") + dtype), std::string::npos) << err.str();
    const std::string alone = Alone("1,5,9,13", {"--kv-dtype", dtype});
    EXPECT_EQ(out.str(), "### 1 (4 prompt tokens, 10 generated, max tokens)\n" + alone) << dtype;
  }
}

TEST(GenerateBatch, BadFilesAndFlagsAreOneClearLine) {
  const std::string ok = "generate --model " + kModel + " --prompt-ids-file ";
  const std::string good = WriteFile("plumb_batch_good.txt", "1,2\n3\n");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {ok + "/nonexistent/prompts.txt", "/nonexistent/prompts.txt: cannot open the prompts file"},
      {ok + WriteFile("plumb_batch_empty.txt", "\n \n"), "no prompts (one per non-empty line)"},
      {ok + WriteFile("plumb_batch_bad.txt", "1,2\n3,x\n"), "line 2 token id: 'x' is not an integer"},
      {ok + WriteFile("plumb_batch_oov.txt", "1,2\n3,320\n"), "prompt 2: token id 320"},
      {ok + good + " --block-size 3", "--block-size: 3 is not a power of two"},
      {ok + good + " --block-size 512", "--block-size: 512 is outside"},
      {ok + good + " --kv-dtype fp4", "unknown KV cache dtype 'fp4'"},
      {ok + good + " --kv-policy lru", "unknown KV pool policy 'lru'"},
      {ok + good + " --kv-budget-mib 0", "--kv-budget-mib: 0 must be at least 1"},
      {ok + good + " --prompt-ids 1", "give exactly one of"},
  };
  for (const auto& [args, expected] : cases) {
    const testing::ProcessResult result = testing::RunPlumb(args);
    EXPECT_EQ(result.exit_code, 1) << args << "\n" << result.output;
    EXPECT_NE(result.output.find(expected), std::string::npos)
        << "wanted '" << expected << "' for: " << args << "\ngot: " << result.output;
    EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1) << result.output;
  }
}

}  // namespace
}  // namespace plumb
