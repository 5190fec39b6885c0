#include "plumb/cli/common_flags.h"

#include <iomanip>
#include <limits>
#include <optional>
#include <string>

#include "plumb/core/error.h"
#include "plumb/kernels/blas_core.h"
#include "plumb/kernels/int8_activations.h"
#include "plumb/kernels/isa.h"
#include "plumb/kernels/kernels.h"
#include "plumb/kernels/weight_format.h"

namespace plumb::cli {
namespace {

std::string Format(float value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

}  // namespace

void AddModelFlag(Flags& flags) {
  flags.AddValue("model", "PATH",
                 "a .gguf file, or a Hugging Face checkpoint (directory with config.json + *.safetensors)");
}

void AddSamplingFlags(Flags& flags, const SamplingParams& defaults) {
  flags.AddValue("temp", "T", "sampling temperature; 0 = greedy", Format(defaults.temperature));
  flags.AddValue("top-k", "K", "keep the K most probable tokens; 0 = off", std::to_string(defaults.top_k));
  flags.AddValue("top-p", "P", "nucleus sampling: keep the smallest set with mass >= P; 1 = off",
                 Format(defaults.top_p));
  flags.AddValue("min-p", "M", "keep tokens with p >= M * p_max; 0 = off", Format(defaults.min_p));
  flags.AddValue("seed", "S", "random seed for sampling", std::to_string(defaults.seed));
}

SamplingParams ReadSamplingFlags(const Flags& flags) {
  SamplingParams p;
  p.temperature = flags.Float("temp", 0.0f, std::numeric_limits<float>::max());
  p.top_k = flags.Int("top-k", 0, std::numeric_limits<int>::max());
  p.top_p = flags.Float("top-p", 0.0f, 1.0f);
  p.min_p = flags.Float("min-p", 0.0f, 1.0f);
  p.seed = flags.UInt64("seed");
  ValidateSamplingParams(p);
  return p;
}

void AddRuntimeFlags(Flags& flags, const std::string& ctx_help, const std::string& ctx_default) {
  flags.AddValue("threads", "N", "threads for every kernel; 0 = all cores", "0");
  flags.AddValue("ctx", "N", ctx_help, ctx_default);
  AddKernelsFlag(flags, kernels::KernelFamily::kFast);
}

void AddKernelsFlag(Flags& flags, kernels::KernelFamily fallback) {
  flags.AddValue(
      "kernels", "F",
      std::string("exact (the definitions, bit for bit) or fast (int8 activations where the weight "
                  "type has them: ") +
          kernels::Int8Coverage() + "; FMA for " + kernels::FmaCoverage() +
          ", and BF16 dot products for their prefill where the CPU has AVX512-BF16); "
          "PLUMB_KERNELS, when set, replaces the default",
      kernels::FamilyName(fallback));
}

void ApplyKernelsFlag(const Flags& flags) {
  if (!flags.IsSet("kernels") && kernels::FamilyFromEnvironment()) return;
  kernels::SetFamily(ReadFamilyFlag(flags, "kernels"));
}

kernels::KernelFamily ReadFamilyFlag(const Flags& flags, const std::string& name) {
  const std::string value = flags.String(name);
  const std::optional<kernels::KernelFamily> family = kernels::ParseFamily(value);
  if (!family) throw MakeError("--", name, " ", value, ": expected exact or fast");
  return *family;
}

std::string KernelsDescription() {
  const kernels::KernelFamily family = kernels::ActiveFamily();
  std::string text = kernels::FamilyName(family);
  if (family == kernels::KernelFamily::kFast) {
    text += " (int8 activations for " + kernels::Int8Coverage() + "; FMA for " + kernels::FmaCoverage() +
            (kernels::Bf16PanelsAvailable()
                 ? std::string(", their prefill on BF16 panels (") + kernels::Bf16PanelsKind() + ")"
                 : std::string()) +
            ")";
  }
  return text + ", " + kernels::IsaName(kernels::ActiveIsa()) +
         "; prefill GEMM: " + kernels::BlasDescription();
}

int ApplyThreadsFlag(const Flags& flags) {
  kernels::SetNumThreads(flags.Int("threads", 0, 4096));
  ApplyKernelsFlag(flags);
  return kernels::NumThreads();
}

int ReadContextFlag(const Flags& flags, const ModelConfig& config, int fallback) {
  const int ctx = flags.Int("ctx", 0, std::numeric_limits<int>::max());
  if (ctx > config.max_position_embeddings) {
    throw MakeError("--ctx: ", ctx, " exceeds the model's context length of ", config.max_position_embeddings,
                    " tokens");
  }
  if (ctx > 0) return ctx;
  return fallback > 0 ? std::min(fallback, config.max_position_embeddings) : config.max_position_embeddings;
}

void PrintGenerationStats(std::ostream& err, const GenerationStats& stats) {
  const std::ios::fmtflags saved = err.flags();
  err << std::fixed << std::setprecision(2) << "prompt: " << stats.prompt_tokens << " tokens"
      << " | generated: " << stats.generated_tokens << " tokens (" << StopReasonName(stats.stop_reason) << ")"
      << " | threads: " << kernels::NumThreads() << "\n"
      << "time to first token: " << stats.time_to_first_token * 1e3 << " ms"
      << " | prefill: " << stats.PrefillTokensPerSecond() << " tok/s"
      << " | decode: " << stats.DecodeTokensPerSecond() << " tok/s (" << stats.decode_steps << " steps)\n";
  err.flags(saved);
}

}  // namespace plumb::cli
