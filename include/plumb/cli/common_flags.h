// Flags and output shared by the commands that run a model (generate, chat, perplexity).
#pragma once

#include <ostream>
#include <string>

#include "plumb/cli/flags.h"
#include "plumb/engine/generator.h"
#include "plumb/engine/text_model.h"
#include "plumb/kernels/int8_activations.h"
#include "plumb/sample/sampler.h"

namespace plumb::cli {

// --model PATH.
void AddModelFlag(Flags& flags);

// --temp --top-k --top-p --min-p --seed, with the given defaults (generate: greedy; chat: llama.cpp's).
void AddSamplingFlags(Flags& flags, const SamplingParams& defaults);
SamplingParams ReadSamplingFlags(const Flags& flags);  // validated

// --threads N, --ctx N and --kernels exact|fast (default fast: the commands that run a model for a user).
void AddRuntimeFlags(Flags& flags, const std::string& ctx_help, const std::string& ctx_default);
// --kernels exact|fast alone (commands with their own --threads). `fallback` is the command's family when
// neither the flag nor PLUMB_KERNELS chooses: fast where a user runs a model (chat, generate, bench,
// perplexity), exact where plumb is the oracle (fixtures run-reference).
void AddKernelsFlag(Flags& flags, kernels::KernelFamily fallback);
// Applies --kernels (kernels/int8_activations.h's family): the flag, else PLUMB_KERNELS, else the fallback.
void ApplyKernelsFlag(const Flags& flags);
// A kernel family flag's value (--kernels, --kl-base-kernels); throws plumb::Error naming the flag for
// anything but exact or fast.
kernels::KernelFamily ReadFamilyFlag(const Flags& flags, const std::string& name);
// "fast (int8 activations for GGUF Q4_0, ...; the exact kernels for other weights), avx512": which kernel
// family and ISA run now, for the commands that report it (bench, explain, roofline).
std::string KernelsDescription();
// Applies --threads and --kernels to the kernels; returns the thread count in use.
int ApplyThreadsFlag(const Flags& flags);
// --ctx resolved against the model: 0 means `fallback` (clamped to the model's context length); a value
// above the model's context length is an error.
int ReadContextFlag(const Flags& flags, const ModelConfig& config, int fallback);

// "time to first token: … | prefill: … tok/s | decode: … tok/s" and the line before it.
void PrintGenerationStats(std::ostream& err, const GenerationStats& stats);

}  // namespace plumb::cli
