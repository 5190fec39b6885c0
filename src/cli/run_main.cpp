// Top-level command dispatch for build/plumb.
#include "plumb/cli/commands.h"
#include "plumb/core/error.h"

namespace plumb::cli {

namespace {
constexpr const char* kMainUsage =
    "usage: plumb COMMAND [flags]\n"
    "plumb: a plain C++ reference implementation of Llama-family transformers on the CPU.\n\n"
    "commands:\n"
    "  bench        prefill and decode tok/s, against the host's memory bandwidth (plumb bench --help)\n"
    "  chat         talk with a model, turn by turn (plumb chat --help)\n"
    "  fixtures     the golden fixture suite: generate, verify, run-reference (plumb fixtures --help)\n"
    "  generate     continue a prompt, streaming the text (plumb generate --help)\n"
    "  perplexity   score a text file as llama.cpp's llama-perplexity does (plumb perplexity --help)\n"
    "  pack         write a model as f16/bf16/fp8/int4 safetensors (plumb pack --help)\n\n"
    "  plumb --help | --version\n";
}  // namespace

int RunMain(std::span<const std::string> args, std::ostream& out, std::ostream& err, std::istream& in) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    (args.empty() ? err : out) << kMainUsage;
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version") {
    out << "plumb 0.1.0\n";
    return 0;
  }
  const std::span<const std::string> rest = args.subspan(1);
  if (args[0] == "generate") return RunGenerate(rest, out, err);
  if (args[0] == "chat") return RunChat(rest, in, out, err);
  if (args[0] == "perplexity") return RunPerplexity(rest, out, err);
  if (args[0] == "pack") return RunPack(rest, out, err);
  if (args[0] == "bench") return RunBench(rest, out, err);
  if (args[0] == "fixtures") return RunFixtures(rest, out, err);
  throw MakeError("unknown command '", args[0],
                  "' (commands: bench, chat, fixtures, generate, pack, perplexity; see plumb --help)");
}

}  // namespace plumb::cli
