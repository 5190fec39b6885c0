// Top-level command dispatch for build/plumb: one table gives the usage text, the dispatch and the list of
// commands an unknown one is answered with.
#include <array>
#include <string_view>

#include "plumb/cli/commands.h"
#include "plumb/core/error.h"

namespace plumb::cli {

namespace {

struct Command {
  std::string_view name;
  std::string_view summary;  // one line of `plumb --help`
  int (*run)(std::span<const std::string> args, std::istream& in, std::ostream& out, std::ostream& err);
};

// Alphabetical, as `plumb --help` lists them. Only chat reads standard input.
constexpr std::array kCommands = {
    Command{"bench", "prefill and decode tok/s, against the host's memory bandwidth",
            [](auto args, auto&, auto& out, auto& err) { return RunBench(args, out, err); }},
    Command{"chat", "talk with a model, turn by turn",
            [](auto args, auto& in, auto& out, auto& err) { return RunChat(args, in, out, err); }},
    Command{"estimate", "roofline lower bounds for any model on any machine",
            [](auto args, auto&, auto& out, auto& err) { return RunEstimate(args, out, err); }},
    Command{"explain", "one prefill and a few decode steps, kernel by kernel",
            [](auto args, auto&, auto& out, auto& err) { return RunExplain(args, out, err); }},
    Command{"fixtures", "the golden fixture suite: generate, verify, run-reference",
            [](auto args, auto&, auto& out, auto& err) { return RunFixtures(args, out, err); }},
    Command{"generate", "continue a prompt, streaming the text",
            [](auto args, auto&, auto& out, auto& err) { return RunGenerate(args, out, err); }},
    Command{"pack", "write a model as f16/bf16/fp8/int4 safetensors",
            [](auto args, auto&, auto& out, auto& err) { return RunPack(args, out, err); }},
    Command{"perplexity", "score a text file as llama.cpp's llama-perplexity does",
            [](auto args, auto&, auto& out, auto& err) { return RunPerplexity(args, out, err); }},
    Command{"roofline", "the host's ceilings against the model's measured decode and prefill",
            [](auto args, auto&, auto& out, auto& err) { return RunRoofline(args, out, err); }},
    Command{"serve", "an OpenAI-compatible HTTP server: chat and completions, batched",
            [](auto args, auto&, auto& out, auto& err) { return RunServe(args, out, err); }},
    Command{"tokenize", "text to token ids and back, with the chat template if asked",
            [](auto args, auto&, auto& out, auto& err) { return RunTokenize(args, out, err); }},
};

void PrintUsage(std::ostream& out) {
  out << "usage: plumb COMMAND [flags]\n"
         "plumb: a plain C++ reference implementation of Llama-family transformers on the CPU.\n\n"
         "commands:\n";
  for (const Command& c : kCommands) {
    out << "  " << c.name << std::string(13 - c.name.size(), ' ') << c.summary << " (plumb " << c.name
        << " --help)\n";
  }
  out << "\n  plumb --help | --version\n";
}

}  // namespace

int RunMain(std::span<const std::string> args, std::ostream& out, std::ostream& err, std::istream& in) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    PrintUsage(args.empty() ? err : out);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version") {
    out << "plumb " << PLUMB_VERSION << "\n";
    return 0;
  }
  for (const Command& c : kCommands) {
    if (args[0] == c.name) return c.run(args.subspan(1), in, out, err);
  }
  std::string names;
  for (const Command& c : kCommands) names += (names.empty() ? "" : ", ") + std::string(c.name);
  throw MakeError("unknown command '", args[0], "' (commands: ", names, "; see plumb --help)");
}

}  // namespace plumb::cli
