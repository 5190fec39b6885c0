// The CLI, in process (RunMain) and as a real process (build/plumb): output, help, and one clear error
// line with a non-zero exit code for every kind of bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "plumb/cli/commands.h"
#include "plumb/cli/flags.h"
#include "plumb/core/error.h"
#include "support/golden.h"
#include "support/process.h"

namespace plumb {
namespace {

using testing::ProcessResult;
using testing::RunPlumb;

const std::string kModel = testing::FixtureDir("tiny-llama");

std::string Join(const std::vector<int>& ids, const char* separator) {
  std::string text;
  for (std::size_t i = 0; i < ids.size(); ++i) text += (i ? separator : "") + std::to_string(ids[i]);
  return text;
}

TEST(Cli, GeneratePrintsTheReferenceGreedyIdsAndTiming) {
  const testing::GoldenFixture golden(kModel);
  const std::vector<std::string> args = {
      "generate",     "--model", kModel,        "--prompt-ids", Join(golden.prompt_ids(), ","),
      "--max-tokens", "16",      "--ignore-eos"};
  std::ostringstream out, err;
  EXPECT_EQ(cli::RunMain(args, out, err), 0);
  EXPECT_EQ(out.str(), Join(golden.Ids("greedy.ids"), " ") + "\n");
  for (const char* field : {"prompt: 11 tokens", "time to first token", "prefill:", "decode:", "tok/s"}) {
    EXPECT_NE(err.str().find(field), std::string::npos) << field << " missing from: " << err.str();
  }
}

TEST(Cli, HelpListsEveryFlag) {
  std::ostringstream out, err;
  const std::vector<std::string> args = {"generate", "--help"};
  EXPECT_EQ(cli::RunMain(args, out, err), 0);
  for (const char* flag : {"--model", "--prompt-ids", "--max-tokens", "--temp", "--top-k", "--top-p",
                           "--min-p", "--seed", "--threads", "--ctx", "--ignore-eos"}) {
    EXPECT_NE(out.str().find(flag), std::string::npos) << flag;
  }
  const ProcessResult top = RunPlumb("--help");
  EXPECT_EQ(top.exit_code, 0);
  for (const char* command : {"chat", "generate", "perplexity"}) {
    EXPECT_NE(top.output.find(command), std::string::npos) << command;
  }
  for (const auto& [command, flags] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"chat",
            {"--model", "--system", "--chat-template", "--max-tokens", "--temp", "--ctx", "--threads"}},
           {"perplexity", {"--model", "--file", "--ctx", "--threads"}}}) {
    const ProcessResult help = RunPlumb(command + " --help");
    EXPECT_EQ(help.exit_code, 0) << command;
    for (const std::string& flag : flags)
      EXPECT_NE(help.output.find(flag), std::string::npos) << command << flag;
  }
}

TEST(Cli, EveryCommandTheTopLevelHelpListsDispatchesToItsOwnHelp) {
  std::ostringstream usage, unused;
  ASSERT_EQ(cli::RunMain(std::vector<std::string>{"--help"}, usage, unused), 0);
  std::istringstream lines(usage.str());
  std::vector<std::string> listed;
  for (std::string line; std::getline(lines, line);) {
    // "  NAME   summary (plumb NAME --help)"
    const std::size_t open = line.find("(plumb ");
    if (line.rfind("  ", 0) != 0 || open == std::string::npos) continue;
    std::istringstream words(line);
    std::string name;
    words >> name;
    EXPECT_NE(line.find("(plumb " + name + " --help)"), std::string::npos) << line;
    listed.push_back(name);
  }
  EXPECT_EQ(listed.size(), 11u) << usage.str();
  for (const std::string& name : listed) {
    std::ostringstream out, err;
    EXPECT_EQ(cli::RunMain(std::vector<std::string>{name, "--help"}, out, err), 0) << name;
    EXPECT_NE(out.str().find("plumb " + name), std::string::npos) << name << ": " << out.str();
  }
  // An unknown command is answered with the same list.
  std::ostringstream out, err;
  try {
    cli::RunMain(std::vector<std::string>{"frobnicate"}, out, err);
    ADD_FAILURE() << "no error for an unknown command";
  } catch (const Error& e) {
    for (const std::string& name : listed)
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << name;
  }
}

// Speculative decoding from the command line: greedy output is the target's alone (the tiny Llama's FP32
// checkpoint, drafted by its own Q4_1 file or by prompt lookup), and the summary says how it went.
TEST(Cli, GenerateWithADraftPrintsTheTargetsTokensAcceptanceAndSpeedup) {
  const testing::GoldenFixture golden(kModel);
  const std::string prompt = Join(golden.prompt_ids(), ",");
  const std::string expected = Join(golden.Ids("greedy.ids"), " ") + "\n";
  for (const std::string& draft : {kModel + "/model.q4_1.gguf", std::string("ngram")}) {
    const std::vector<std::string> args = {
        "generate", "--model",      kModel,    "--prompt-ids", prompt,           "--max-tokens",
        "16",       "--ignore-eos", "--draft", draft,          "--draft-tokens", "3"};
    std::ostringstream out, err;
    EXPECT_EQ(cli::RunMain(args, out, err), 0) << err.str();
    EXPECT_EQ(out.str(), expected) << draft;
    for (const char* field : {"speculative: ", "acceptance rate", "tokens per target step", "speedup",
                              "greedy: the speculative tokens equal the target's alone"}) {
      EXPECT_NE(err.str().find(field), std::string::npos) << field << " missing from: " << err.str();
    }
  }
}

TEST(Cli, EveryBadInputIsOneClearLineAndExitCodeOne) {
  const std::string ok = "generate --model " + kModel + " --prompt-ids 1,2,3";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"frobnicate", "unknown command 'frobnicate'"},
      {ok + " --bogus 1", "unknown flag --bogus"},
      {ok + " --max-tokens", "flag --max-tokens needs a value"},
      {ok + " --max-tokens 0", "--max-tokens: 0 must be at least 1"},
      {ok + " --max-tokens many", "--max-tokens: 'many' is not an integer"},
      {ok + " --temp -1", "--temp: -1 must be at least 0"},
      {ok + " --threads 5000", "--threads: 5000 is outside [0, 4096]"},
      {ok + " --top-p 1.5", "--top-p: 1.5 is outside [0, 1]"},
      {ok + " --threads x", "--threads: 'x' is not an integer"},
      {ok + " --seed -3", "--seed: '-3' is not a non-negative integer"},
      {ok + " --kernels turbo", "--kernels turbo: expected exact or fast"},
      {"generate --model /nonexistent/model --prompt-ids 1", "/nonexistent/model: model path does not exist"},
      {"generate --prompt-ids 1", "missing required flag --model"},
      {"generate --model " + kModel, "give exactly one of --prompt TEXT, --prompt-ids IDS"},
      {"generate --model " + kModel + " --prompt hi --prompt-ids 1", "give exactly one of --prompt"},
      {"generate --model " + kModel + " --prompt hi", "--prompt needs a tokenizer, and this model has none"},
      {"chat --model " + kModel + " </dev/null", "chat needs a tokenizer"},
      {"chat --model " + kModel + " --top-k -1", "--top-k: -1 must be at least 0"},
      {"perplexity --model " + kModel + " --file /nonexistent.txt",
       "/nonexistent.txt: cannot open text file"},
      {"perplexity --model " + kModel, "missing required flag --file"},
      {"perplexity --model " + kModel + " --file /etc/hostname --ctx 2", "--ctx: 2 is outside"},
      {"perplexity --model " + kModel + " --file /etc/hostname", "perplexity needs a tokenizer"},
      {"generate --model " + kModel + " --prompt-ids 1,320",
       "token id 320 at index 1 is outside the vocabulary"},
      {"generate --model " + kModel + " --prompt-ids 1,,2", "--prompt-ids item 1: '' is not an integer"},
      {"generate --model " + kModel + " --prompt-ids 1,2 --max-tokens 127", "exceeds the context of 128"},
      {"generate --model " + kModel + " --prompt-ids 1,2 --ctx 10 --max-tokens 9",
       "exceeds the context of 10"},
      {"generate --model " + kModel + " --prompt-ids 1 --ctx 129", "--ctx: 129 exceeds the model's"},
      // Too large for an int, or for any integer: said so with the range, never as a wrapped number.
      {ok + " --ctx 99999999999", "--ctx: 99999999999 is outside [0, 2147483647] (too large)"},
      {ok + " --ctx 999999999999999999999999",
       "--ctx: 999999999999999999999999 is outside [0, 2147483647] (too large)"},
      {ok + " --max-tokens -99999999999999999999999", "is outside [1, 2147483647] (too small)"},
      {ok + " --threads 99999999999", "--threads: 99999999999 is outside [0, 4096] (too large)"},
      {ok + " --draft ngram --draft-tokens 0", "--draft-tokens: 0 is outside [1, 64]"},
      {ok + " --draft " + kModel + "/model.q4_1.gguf --save-kv /tmp/x", "--draft speculates on one sequence"},
      {ok + " --draft " + testing::FixtureDir("tiny-qwen2"), "a draft must share the target's vocabulary"},
      {"generate --model /dev/zero --prompt-ids 1",
       "/dev/zero: not a GGUF or safetensors file (first bytes 00 00 00 00 00 00 00 00 00) and not a "
       "directory"},
  };
  for (const auto& [args, expected] : cases) {
    const ProcessResult result = RunPlumb(args);
    EXPECT_EQ(result.exit_code, 1) << args << "\n" << result.output;
    EXPECT_NE(result.output.find("plumb: error: "), std::string::npos) << args << "\n" << result.output;
    EXPECT_NE(result.output.find(expected), std::string::npos)
        << "wanted '" << expected << "' for: " << args << "\ngot: " << result.output;
    EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1)
        << "one line: " << result.output;
  }
}

TEST(Flags, ParsesValuesSwitchesAndDefaults) {
  cli::Flags flags;
  flags.AddValue("n", "N", "a number", "4");
  flags.AddValue("ids", "IDS", "ids");
  flags.AddValue("x", "X", "a float");
  flags.AddSwitch("fast", "go fast");
  const std::vector<std::string> args = {"--ids=5,6,7", "--fast", "--x", "0.25"};
  flags.Parse(args);
  EXPECT_EQ(flags.Int("n", 0, 10), 4);
  EXPECT_EQ(flags.IntList("ids"), (std::vector<int>{5, 6, 7}));
  EXPECT_FLOAT_EQ(flags.Float("x", 0, 1), 0.25f);
  EXPECT_TRUE(flags.Switch("fast"));
  EXPECT_TRUE(flags.IsSet("ids"));
  EXPECT_FALSE(flags.IsSet("n"));

  cli::Flags twice;
  twice.AddValue("n", "N", "n");
  const std::vector<std::string> repeated = {"--n", "1", "--n", "2"};
  EXPECT_THROW(twice.Parse(repeated), Error);
  cli::Flags positional;
  const std::vector<std::string> stray = {"model.bin"};
  EXPECT_THROW(positional.Parse(stray), Error);
  EXPECT_THROW(cli::ParseInteger("99999999999999999999", 0, 10, "n"), Error);
  EXPECT_THROW(cli::ParseInteger("12abc", 0, 100, "n"), Error);
}

TEST(Flags, ParseUnlessHelpPrintsTheUsageAndFlagsOnlyForHelp) {
  cli::Flags flags;
  flags.AddValue("n", "N", "a number", "4");
  std::ostringstream out;
  const std::vector<std::string> help = {"--n", "2", "--help"};
  EXPECT_FALSE(flags.ParseUnlessHelp(help, "usage: plumb thing [--n N]\nflags:\n", out));
  EXPECT_EQ(out.str().rfind("usage: plumb thing [--n N]\nflags:\n  --n N", 0), 0u) << out.str();
  EXPECT_NE(out.str().find("--help"), std::string::npos) << out.str();

  cli::Flags run;
  run.AddValue("n", "N", "a number", "4");
  std::ostringstream quiet;
  const std::vector<std::string> args = {"--n", "2"};
  EXPECT_TRUE(run.ParseUnlessHelp(args, "usage", quiet));
  EXPECT_EQ(quiet.str(), "");
  EXPECT_EQ(run.Int("n", 0, 10), 2);
  cli::Flags bad;
  const std::vector<std::string> unknown = {"--m", "1"};
  EXPECT_THROW((void)bad.ParseUnlessHelp(unknown, "usage", quiet), Error);
}

}  // namespace
}  // namespace plumb
