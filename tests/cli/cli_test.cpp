// The CLI, in process (RunMain) and as a real process (build/plumb): output, help, and one clear error
// line with a non-zero exit code for every kind of bad input.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "plumb/cli/commands.h"
#include "plumb/cli/flags.h"
#include "plumb/core/error.h"
#include "support/golden.h"

namespace plumb {
namespace {

const std::string kModel = testing::FixtureDir("tiny-llama");

std::string Join(const std::vector<int>& ids, const char* separator) {
  std::string text;
  for (std::size_t i = 0; i < ids.size(); ++i) text += (i ? separator : "") + std::to_string(ids[i]);
  return text;
}

struct ProcessResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};

ProcessResult RunPlumb(const std::string& args) {
  const std::string command = std::string(PLUMB_BINARY_DIR) + "/plumb " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string output;
  std::array<char, 4096> buffer;
  while (std::size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe)) output.append(buffer.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
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
      {"generate --model /nonexistent/model --prompt-ids 1", "/nonexistent/model: model path does not exist"},
      {"generate --prompt-ids 1", "missing required flag --model"},
      {"generate --model " + kModel, "give exactly one of --prompt TEXT and --prompt-ids IDS"},
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
  EXPECT_NE(log.find("(conversation reset)"), std::string::npos) << log;
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

}  // namespace
}  // namespace plumb
