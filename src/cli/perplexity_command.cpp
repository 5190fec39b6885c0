// plumb perplexity: how well the model predicts a text, computed as llama.cpp's llama-perplexity does
// (engine/perplexity.h), so the figures can be set side by side.
#include <fstream>
#include <iomanip>
#include <sstream>

#include "plumb/cli/commands.h"
#include "plumb/cli/common_flags.h"
#include "plumb/core/error.h"
#include "plumb/engine/perplexity.h"

namespace plumb::cli {
namespace {

Flags PerplexityFlags() {
  Flags f;
  AddModelFlag(f);
  f.AddValue("file", "PATH", "the text to score");
  AddRuntimeFlags(f, "window length in tokens (llama.cpp's -c)", "512");
  f.AddSwitch("help", "show this help");
  return f;
}

constexpr const char* kPerplexityUsage =
    "usage: plumb perplexity --model PATH --file TEXT [--ctx N] [--threads N]\n"
    "Splits the text's tokens into windows of --ctx tokens, scores the second half of each window, and\n"
    "prints the perplexity with its standard error (llama.cpp's definition).\n\nflags:\n";

std::string ReadTextFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw MakeError(path, ": cannot open text file");
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

}  // namespace

int RunPerplexity(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  Flags flags = PerplexityFlags();
  flags.Parse(args);
  if (flags.Switch("help")) {
    out << kPerplexityUsage << flags.Help();
    return 0;
  }
  const std::string model_path = flags.String("model");
  const std::string text = ReadTextFile(flags.String("file"));
  const int n_ctx = flags.Int("ctx", 4, 1 << 30);
  ApplyThreadsFlag(flags);

  TextModel loaded = TextModel::Load(model_path);
  const Tokenizer& tokenizer = loaded.RequireTokenizer("perplexity");
  const std::vector<int> tokens = tokenizer.Encode(text, /*add_special=*/true, /*parse_special=*/false);
  const int bos = tokenizer.add_bos() ? tokenizer.bos_id() : -1;
  err << "perplexity: " << tokens.size() << " tokens, " << tokens.size() / static_cast<std::size_t>(n_ctx)
      << " windows of " << n_ctx << "\n";
  const PerplexityResult result =
      Perplexity(loaded.model, tokens, n_ctx, bos, [&](int done, int total, const PerplexityResult& running) {
        err << std::fixed << std::setprecision(4) << "\r[" << done << "/" << total
            << "] PPL so far: " << running.perplexity << std::flush;
      });
  err << "\n";
  out << std::fixed << std::setprecision(4) << "PPL = " << result.perplexity << " +/- "
      << std::setprecision(5) << result.standard_error << " (" << result.scored_tokens << " scored tokens in "
      << result.windows << " windows of " << n_ctx << ")\n";
  return 0;
}

}  // namespace plumb::cli
