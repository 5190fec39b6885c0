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
    "  estimate     roofline lower bounds for any model on any machine (plumb estimate --help)\n"
    "  explain      one prefill and a few decode steps, kernel by kernel (plumb explain --help)\n"
    "  fixtures     the golden fixture suite: generate, verify, run-reference (plumb fixtures --help)\n"
    "  generate     continue a prompt, streaming the text (plumb generate --help)\n"
    "  perplexity   score a text file as llama.cpp's llama-perplexity does (plumb perplexity --help)\n"
    "  pack         write a model as f16/bf16/fp8/int4 safetensors (plumb pack --help)\n"
    "  roofline     the host's ceilings against the model's measured decode and prefill (plumb roofline "
    "--help)\n\n"
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
  if (args[0] == "estimate") return RunEstimate(rest, out, err);
  if (args[0] == "roofline") return RunRoofline(rest, out, err);
  if (args[0] == "explain") return RunExplain(rest, out, err);
  if (args[0] == "fixtures") return RunFixtures(rest, out, err);
  throw MakeError(
      "unknown command '", args[0],
      "' (commands: bench, chat, estimate, explain, fixtures, generate, pack, perplexity, roofline; "
      "see plumb --help)");
}

}  // namespace plumb::cli
