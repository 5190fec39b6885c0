// plumb generate: prompt ids in, generated ids out, with the prefill/decode timing a learner wants to see.
#include <iomanip>
#include <limits>

#include "plumb/cli/commands.h"
#include "plumb/cli/flags.h"
#include "plumb/core/error.h"
#include "plumb/engine/generator.h"
#include "plumb/kernels/kernels.h"

namespace plumb::cli {
namespace {

Flags GenerateFlags() {
  Flags f;
  f.AddValue("model", "PATH", "model directory (config.json + *.safetensors) or .safetensors file");
  f.AddValue("prompt-ids", "IDS", "prompt as comma-separated token ids, e.g. 1,2,3");
  f.AddValue("max-tokens", "N", "maximum number of tokens to generate", "16");
  f.AddValue("temp", "T", "sampling temperature; 0 = greedy", "0");
  f.AddValue("top-k", "K", "keep the K most probable tokens; 0 = off", "0");
  f.AddValue("top-p", "P", "nucleus sampling: keep the smallest set with mass >= P; 1 = off", "1");
  f.AddValue("min-p", "M", "keep tokens with p >= M * p_max; 0 = off", "0");
  f.AddValue("seed", "S", "random seed for sampling", "0");
  f.AddValue("threads", "N", "threads for every kernel; 0 = all cores", "0");
  f.AddValue("ctx", "N", "context length (KV cache positions); 0 = the model's max_position_embeddings", "0");
  f.AddSwitch("ignore-eos", "do not stop at the model's EOS ids");
  f.AddSwitch("help", "show this help");
  return f;
}

constexpr const char* kGenerateUsage =
    "usage: plumb generate --model PATH --prompt-ids 1,2,3 [flags]\n"
    "Runs the prompt through the model (prefill), then generates token ids one at a time (decode).\n"
    "Prints the generated ids on stdout and the timing on stderr.\n\nflags:\n";

}  // namespace

int RunGenerate(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  Flags flags = GenerateFlags();
  flags.Parse(args);
  if (flags.Switch("help")) {
    out << kGenerateUsage << flags.Help();
    return 0;
  }
  // Read and check every flag before the (slow) model load, so a typo fails at once.
  const std::string model_path = flags.String("model");
  const std::vector<int> prompt = flags.IntList("prompt-ids");
  GenerationOptions options;
  options.max_new_tokens = flags.Int("max-tokens", 1, std::numeric_limits<int>::max());
  options.sampling.temperature = flags.Float("temp", 0.0f, std::numeric_limits<float>::max());
  options.sampling.top_k = flags.Int("top-k", 0, std::numeric_limits<int>::max());
  options.sampling.top_p = flags.Float("top-p", 0.0f, 1.0f);
  options.sampling.min_p = flags.Float("min-p", 0.0f, 1.0f);
  options.sampling.seed = flags.UInt64("seed");
  ValidateSamplingParams(options.sampling);
  const int threads = flags.Int("threads", 0, 4096);
  const int ctx = flags.Int("ctx", 0, std::numeric_limits<int>::max());

  kernels::SetNumThreads(threads);
  Model model = Model::Load(model_path);
  const ModelConfig& config = model.config();
  if (ctx > config.max_position_embeddings) {
    throw MakeError("--ctx: ", ctx,
                    " exceeds the model's max_position_embeddings = ", config.max_position_embeddings);
  }
  if (!flags.Switch("ignore-eos")) options.stop_ids = config.eos_token_ids;
  ContiguousKvCache cache = model.NewKvCache(ctx);

  bool first = true;
  const GenerationStats stats = Generate(model, cache, prompt, options, [&](int token) {
    out << (first ? "" : " ") << token << std::flush;
    first = false;
  });
  out << "\n";

  err << std::fixed << std::setprecision(2) << "prompt: " << stats.prompt_tokens << " tokens"
      << " | generated: " << stats.generated_tokens << " tokens (" << stats.stop_reason << ")"
      << " | threads: " << kernels::NumThreads() << "\n"
      << "time to first token: " << stats.time_to_first_token * 1e3 << " ms"
      << " | prefill: " << stats.PrefillTokensPerSecond() << " tok/s"
      << " | decode: " << stats.DecodeTokensPerSecond() << " tok/s (" << stats.decode_steps << " steps)\n";
  return 0;
}

}  // namespace plumb::cli
