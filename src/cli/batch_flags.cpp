#include "plumb/cli/batch_flags.h"

#include <algorithm>
#include <limits>

#include "plumb/core/error.h"
#include "plumb/kernels/int8_activations.h"

namespace plumb::cli {

void AddKvDtypeFlag(Flags& flags) {
  flags.AddValue(
      "kv-dtype", "D",
      "KV cache element type: f32, f16, bf16, fp8-e4m3, fp8-e5m2 (default: f16 with --kernels fast, "
      "f32 with exact)");
}

KvDtype ReadKvDtypeFlag(const Flags& flags) {
  if (flags.IsSet("kv-dtype")) return ParseKvDtype(flags.String("kv-dtype"));
  return kernels::ActiveFamily() == kernels::KernelFamily::kFast ? KvDtype::kF16 : KvDtype::kF32;
}

void AddPagedKvFlags(Flags& flags) {
  AddKvDtypeFlag(flags);
  flags.AddValue("block-size", "N", "KV cache positions per block (a power of two, 1..256)", "16");
  flags.AddValue("kv-budget-mib", "MiB", "memory for the paged KV cache's block pool", "1024");
  flags.AddSwitch("no-prefix-cache", "do not share the KV blocks of prompts' common prefixes");
}

PagedKvConfig ReadPagedKvFlags(const Flags& flags, const ModelConfig& model, int ctx, int max_sequences) {
  PagedKvConfig c;
  c.n_layers = model.num_layers;
  c.n_kv_heads = model.num_kv_heads;
  c.head_dim = model.head_dim;
  c.dtype = ReadKvDtypeFlag(flags);
  c.block_size = flags.Int("block-size", 1, 256);
  if ((c.block_size & (c.block_size - 1)) != 0) {
    throw MakeError("--block-size: ", c.block_size, " is not a power of two (1, 2, 4, ..., 256)");
  }
  c.max_positions = ctx;
  c.prefix_caching = !flags.Switch("no-prefix-cache");
  const int mib = flags.Int("kv-budget-mib", 1, std::numeric_limits<int>::max());
  const long long blocks_per_sequence = (ctx + c.block_size - 1) / c.block_size;
  const long long useful = blocks_per_sequence * max_sequences;
  c.num_blocks =
      static_cast<int>(std::min<long long>(c.BlocksForBudget(static_cast<std::size_t>(mib) << 20),
                                           std::min<long long>(useful, std::numeric_limits<int>::max())));
  return c;
}

void AddSchedulerFlags(Flags& flags) {
  flags.AddValue("max-batch", "N", "requests running at once (decoding or computing their prompt)", "64");
  flags.AddValue("step-tokens", "N",
                 "tokens one step computes: a decode token per request, the rest prompt chunks", "512");
  flags.AddValue("kv-policy", "P",
                 "when the KV pool runs out: preempt (the newest request, recomputed later) or refuse (admit "
                 "only what fits)",
                 "preempt");
  flags.AddSwitch(
      "deterministic",
      "batch-invariant kernels: each request's logits are bitwise the same whatever the batch and "
      "thread count (slower prefill: no BLAS)");
}

SchedulerOptions ReadSchedulerFlags(const Flags& flags) {
  SchedulerOptions o;
  o.max_running = flags.Int("max-batch", 1, 1 << 20);
  o.max_step_tokens = flags.Int("step-tokens", 1, 1 << 20);
  o.policy = ParsePoolPolicy(flags.String("kv-policy"));
  o.batch_invariant = flags.Switch("deterministic");
  return o;
}

}  // namespace plumb::cli
