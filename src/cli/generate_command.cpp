// plumb generate: a prompt in (text, or token ids), its continuation streamed out, with the prefill/decode
// timing a learner wants to see.
#include <limits>

#include "generate_batch.h"
#include "plumb/cli/batch_flags.h"
#include "plumb/cli/commands.h"
#include "plumb/cli/common_flags.h"
#include "plumb/core/error.h"
#include "plumb/engine/generator.h"
#include "plumb/tokenizer/tokenizer.h"

namespace plumb::cli {
namespace {

Flags GenerateFlags() {
  Flags f;
  AddModelFlag(f);
  f.AddValue(
      "prompt", "TEXT",
      "the prompt as text (special tokens such as <|im_start|> are read as such, unless --no-parse-special)");
  f.AddValue("prompt-ids", "IDS", "the prompt as comma-separated token ids, e.g. 1,2,3 (prints ids)");
  f.AddValue("prompts-file", "F", "many prompts, one per line, generated together (continuous batching)");
  f.AddValue("prompt-ids-file", "F", "many prompts as comma-separated token ids, one per line (prints ids)");
  f.AddValue("max-tokens", "N", "maximum number of tokens to generate (per prompt)", "16");
  AddSamplingFlags(f, SamplingParams{});
  AddRuntimeFlags(f, "context length (KV cache positions); 0 = the model's context length", "0");
  f.AddSwitch("ignore-eos", "do not stop at the model's end-of-generation tokens");
  f.AddSwitch("no-parse-special",
              "read special-token texts such as <|im_start|> in --prompt / --prompts-file as plain text");
  AddPagedKvFlags(f);
  AddSchedulerFlags(f);
  return f;
}

constexpr const char* kGenerateUsage =
    "usage: plumb generate --model PATH (--prompt TEXT | --prompt-ids 1,2,3 | --prompts-file F |\n"
    "                      --prompt-ids-file F) [flags]\n"
    "Runs the prompt through the model (prefill), then generates one token at a time (decode), streaming\n"
    "the continuation to stdout (text for --prompt, ids for --prompt-ids) and the timing to stderr.\n"
    "With a prompts file, every prompt is generated at once by continuous batching over a paged KV cache\n"
    "(--kv-dtype, --block-size, --kv-budget-mib, --max-batch, --step-tokens, --kv-policy, --deterministic),\n"
    "and the results are printed in the file's order once all have finished.\n\n"
    "flags:\n";

}  // namespace

int RunGenerate(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  Flags flags = GenerateFlags();
  if (!flags.ParseUnlessHelp(args, kGenerateUsage, out)) return 0;
  // Read and check every flag before the (slow) model load, so a typo fails at once.
  const std::string model_path = flags.String("model");
  const int prompt_sources = flags.IsSet("prompt") + flags.IsSet("prompt-ids") + flags.IsSet("prompts-file") +
                             flags.IsSet("prompt-ids-file");
  if (prompt_sources != 1) {
    throw MakeError(
        "give exactly one of --prompt TEXT, --prompt-ids IDS, --prompts-file F and --prompt-ids-file F");
  }
  const bool batch = flags.IsSet("prompts-file") || flags.IsSet("prompt-ids-file");
  const bool text_mode = flags.IsSet("prompt");
  const std::string prompt_text = text_mode ? flags.String("prompt") : "";
  std::vector<int> prompt = flags.IsSet("prompt-ids") ? flags.IntList("prompt-ids") : std::vector<int>{};
  GenerationOptions options;
  options.max_new_tokens = flags.Int("max-tokens", 1, std::numeric_limits<int>::max());
  options.sampling = ReadSamplingFlags(flags);
  ApplyThreadsFlag(flags);

  TextModel loaded = TextModel::Load(model_path);
  const int ctx = ReadContextFlag(flags, loaded.model.config(), 0);
  if (!flags.Switch("ignore-eos")) options.stop_ids = loaded.StopIds();
  if (batch) return RunGenerateBatch(flags, loaded, options, ctx, out, err);
  if (text_mode) {
    const Tokenizer& tokenizer = loaded.RequireTokenizer("--prompt");
    prompt = tokenizer.Encode(prompt_text, /*add_special=*/true, !flags.Switch("no-parse-special"));
  }
  ContiguousKvCache cache = loaded.model.NewKvCache(ctx, ReadKvDtypeFlag(flags));

  GenerationStats stats;
  if (text_mode) {
    StreamingDecoder decoder(*loaded.tokenizer);
    stats = Generate(loaded.model, cache, prompt, options,
                     [&](int token) { out << decoder.Push(token) << std::flush; });
    out << decoder.Flush() << "\n";
  } else {
    bool first = true;
    stats = Generate(loaded.model, cache, prompt, options, [&](int token) {
      out << (first ? "" : " ") << token << std::flush;
      first = false;
    });
    out << "\n";
  }
  PrintGenerationStats(err, stats);
  return 0;
}

}  // namespace plumb::cli
