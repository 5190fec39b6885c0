// plumb perplexity: how well the model predicts a text, computed as llama.cpp's llama-perplexity does
// (engine/perplexity.h), so the figures can be set side by side; with --kl-base, also the KL divergence of
// the model's next-token distributions from a base model's (llama-perplexity --kl-divergence).
#include <fstream>
#include <iomanip>
#include <limits>
#include <sstream>
#include <vector>

#include "plumb/cli/commands.h"
#include "plumb/cli/common_flags.h"
#include "plumb/cli/prompt_lines.h"
#include "plumb/core/error.h"
#include "plumb/engine/perplexity.h"

namespace plumb::cli {
namespace {

Flags PerplexityFlags() {
  Flags f;
  AddModelFlag(f);
  f.AddValue("file", "PATH", "the text to score");
  AddRuntimeFlags(f, "window length in tokens (llama.cpp's -c)", "512");
  f.AddValue("chunks", "N", "evaluate only the first N windows (llama.cpp's --chunks); 0 = all", "0");
  f.AddValue(
      "kl-base", "PATH",
      "a base model (e.g. FP32) of the same vocabulary: also report its PPL, the mean KL(base || model) "
      "of the next-token distributions and the top-1 agreement");
  f.AddValue("kl-base-kernels", "F",
             "the kernel family of the --kl-base run (exact or fast); unset: the model's. --kl-base "
             "<this model> --kl-base-kernels exact --kernels fast --decode measures the fast family");
  f.AddSwitch("decode",
              "compute each window's logits token by token through the decode path (as chat and generate "
              "run, and what --kernels fast changes) instead of one prefill");
  return f;
}

constexpr const char* kPerplexityUsage =
    "usage: plumb perplexity --model PATH --file TEXT [--ctx N] [--chunks N] [--kl-base PATH] [--threads N]\n"
    "                        [--kernels exact|fast] [--kl-base-kernels exact|fast] [--decode]\n"
    "Splits the text's tokens into windows of --ctx tokens, scores the second half of each window, and\n"
    "prints the perplexity with its standard error (llama.cpp's definition). With --kl-base, runs the base\n"
    "model over the same windows and prints its perplexity, the mean KL divergence (nats) of the model's\n"
    "next-token distribution from the base's, and how often both rank the same token first.\n\nflags:\n";

}  // namespace

void PrintPerplexity(std::ostream& out, const char* label, const PerplexityResult& result, int n_ctx) {
  out << std::fixed << std::setprecision(4) << label << " = " << result.perplexity << " +/- "
      << std::setprecision(5) << result.standard_error << " (" << result.scored_tokens << " scored tokens in "
      << result.windows << " windows of " << n_ctx << ")\n";
}

// The ids the model scores come from its own tokenizer; a base whose tokenizer reads the text differently
// is still comparable id by id, but the user should know.
void WarnIfTokenizationDiffers(const TextModel& base, const std::string& text, const std::vector<int>& tokens,
                               std::ostream& err) {
  if (!base.tokenizer) return;
  if (base.tokenizer->Encode(text, /*add_special=*/true, /*parse_special=*/false) != tokens) {
    err << "perplexity: warning: the base model's tokenizer splits the text differently; both are scored on "
           "the model's tokens\n";
  }
}

int RunKlDivergence(const std::string& base_path, TextModel& loaded, const std::string& text,
                    const std::vector<int>& tokens, int n_ctx, int bos, const PerplexityOptions& options,
                    std::ostream& out, std::ostream& err) {
  TextModel base = TextModel::Load(base_path);
  WarnIfTokenizationDiffers(base, text, tokens, err);
  const KlDivergenceResult r = KlDivergence(
      base.model, loaded.model, tokens, n_ctx, bos,
      [&](int done, int total, const KlDivergenceResult& running) {
        err << std::fixed << std::setprecision(4) << "\r[" << done << "/" << total
            << "] PPL so far: " << running.model.perplexity << ", mean KL so far: " << std::scientific
            << std::setprecision(4) << running.mean_kl << std::flush;
      },
      options);
  err << "\n";
  PrintPerplexity(out, "PPL", r.model, n_ctx);
  PrintPerplexity(out, "base PPL", r.base, n_ctx);
  // KL spans orders of magnitude across formats (FP16 ~1e-6, INT4 ~1e-1): scientific notation keeps digits.
  out << std::scientific << std::setprecision(4) << "mean KL(base || model) = " << r.mean_kl << " +/- "
      << r.kl_standard_error << " nats\n"
      << std::fixed << std::setprecision(3) << "top-1 agreement = " << 100 * r.top1_agreement << " +/- "
      << 100 * r.top1_standard_error << " %\n";
  return 0;
}

int RunPerplexity(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  Flags flags = PerplexityFlags();
  if (!flags.ParseUnlessHelp(args, kPerplexityUsage, out)) return 0;
  const std::string model_path = flags.String("model");
  const std::string text = ReadTextFile(flags.String("file"));
  const int n_ctx = flags.Int("ctx", 4, 1 << 30);
  const int chunks = flags.Int("chunks", 0, std::numeric_limits<int>::max());
  const std::string base_path = flags.IsSet("kl-base") ? flags.String("kl-base") : "";
  PerplexityOptions options;
  options.max_windows = chunks;
  options.path = flags.Switch("decode") ? LogitsPath::kDecode : LogitsPath::kPrefill;
  if (flags.IsSet("kl-base-kernels")) {
    if (base_path.empty()) throw MakeError("--kl-base-kernels needs --kl-base");
    options.base_kernels = ReadFamilyFlag(flags, "kl-base-kernels");
  }
  ApplyThreadsFlag(flags);

  TextModel loaded = TextModel::Load(model_path);
  const Tokenizer& tokenizer = loaded.RequireTokenizer("perplexity");
  const std::vector<int> tokens = tokenizer.Encode(text, /*add_special=*/true, /*parse_special=*/false);
  const int bos = tokenizer.add_bos() ? tokenizer.bos_id() : -1;
  const std::size_t windows = tokens.size() / static_cast<std::size_t>(n_ctx);
  err << "perplexity: " << tokens.size() << " tokens, " << windows << " windows of " << n_ctx << ", "
      << (options.path == LogitsPath::kDecode ? "decode" : "prefill") << " path, kernels "
      << kernels::FamilyName(kernels::ActiveFamily());
  if (options.base_kernels) err << " (base: " << kernels::FamilyName(*options.base_kernels) << ")";
  if (chunks > 0 && static_cast<std::size_t>(chunks) < windows)
    err << ", the first " << chunks << " evaluated";
  err << "\n";
  if (!base_path.empty())
    return RunKlDivergence(base_path, loaded, text, tokens, n_ctx, bos, options, out, err);
  const PerplexityResult result = Perplexity(
      loaded.model, tokens, n_ctx, bos,
      [&](int done, int total, const PerplexityResult& running) {
        err << std::fixed << std::setprecision(4) << "\r[" << done << "/" << total
            << "] PPL so far: " << running.perplexity << std::flush;
      },
      options);
  err << "\n";
  PrintPerplexity(out, "PPL", result, n_ctx);
  return 0;
}

}  // namespace plumb::cli
