#include "bench_batch.h"

#include <algorithm>
#include <chrono>

#include "plumb/cli/batch_flags.h"
#include "plumb/core/error.h"
#include "plumb/kernels/kernels.h"
#include "plumb/kv/contiguous_kv_cache.h"
#include "plumb/kv/paged_kv_cache.h"
#include "plumb/roofline/measure.h"
#include "roofline_common.h"

namespace plumb::cli {
namespace {

using Clock = std::chrono::steady_clock;
using roofline::FillSynthetic;
using roofline::Median;
using roofline::ShuffleFreeBlocks;

// Rounds of the paged-against-contiguous comparison (each: decode-steps steps of each layout).
constexpr int kLayoutRounds = 5;
// Untimed steps before each row's timed ones: the first step after the (single-threaded) cache fill took
// twice a settled step and the next few 5-10% more, which 8 timed steps averaged into a batch-1 figure 1.5x
// too slow (docs/performance.md, "Batch 16 against batch 1").
constexpr int kWarmupSteps = 4;

}  // namespace

void AddBatchBenchFlags(Flags& flags) {
  flags.AddValue("batch", "B,..",
                 "batched decode: sequences per step, one table row each (e.g. 1,2,4,...,64)");
  flags.AddValue("context", "T,..", "batched decode: positions each sequence holds before the timed steps",
                 "512");
  flags.AddValue("decode-steps", "N", "batched decode: timed steps per row (after 4 warm-up steps)", "16");
  flags.AddSwitch("deterministic", "batched decode with batch-invariant kernels");
  AddPagedKvFlags(flags);
}

int RunBatchBench(const Flags& flags, Model& model, std::ostream& out, std::ostream& err) {
  const std::vector<int> batches = flags.IntList("batch");
  const std::vector<int> contexts = flags.IntList("context");
  const int steps = flags.Int("decode-steps", 1, 1 << 20);
  const StepOptions step_options{flags.Switch("deterministic")};
  const ModelConfig& mc = model.config();
  for (int b : batches) {
    if (b < 1 || b > 4096) throw MakeError("--batch: every batch size must be in [1, 4096], got ", b);
  }
  for (int t : contexts) {
    if (t < 1 || t + kLayoutRounds * steps + kWarmupSteps > mc.max_position_embeddings) {
      throw MakeError("--context: ", t, " + ", kLayoutRounds * steps + kWarmupSteps,
                      " decode steps must fit the model's context of ", mc.max_position_embeddings);
    }
  }
  const int threads = kernels::NumThreads();
  const std::size_t weight_bytes = model.weights().BytesReadPerDecodeStep(model.config().experts_per_token);
  out << "weights read per step: " << weight_bytes << " B | threads: " << threads
      << (step_options.batch_invariant ? " | deterministic" : "") << " | " << steps
      << " timed steps per row after " << kWarmupSteps
      << " warm-up; KV filled with random values (decode's cost does not depend "
         "on them)\n\n"
      << "| context | batch | kv dtype | step ms | tok/s (all sequences) | × batch 1 | KV B/step | (weights "
         "+ KV) "
         "GB/s |\n|---|---|---|---|---|---|---|---|\n";
  for (int ctx : contexts) {
    double batch1 = 0;
    for (int batch : batches) {
      const int positions = ctx + steps + kWarmupSteps;
      PagedKvConfig kv = ReadPagedKvFlags(flags, mc, positions, batch);
      kv.prefix_caching = false;
      const int needed = batch * ((positions + kv.block_size - 1) / kv.block_size);
      if (needed > kv.num_blocks) {
        out << "| " << ctx << " | " << batch << " | " << KvDtypeName(kv.dtype) << " | needs "
            << Fixed(static_cast<double>(needed) * kv.BytesPerBlock() / (1 << 20), 0)
            << " MiB of KV: beyond --kv-budget-mib | | | | |\n";
        continue;
      }
      err << "\rbench: context " << ctx << ", batch " << batch << ": filling the cache   " << std::flush;
      PagedKvCache cache(kv);
      std::vector<SeqId> seqs;
      std::vector<SequenceChunk> chunks;
      std::vector<int> tokens(static_cast<std::size_t>(batch));
      for (int s = 0; s < batch; ++s) {
        seqs.push_back(cache.Add());
        FillSynthetic(cache.Sequence(seqs.back()), ctx, s + 1);
        tokens[s] = (s * 2654435761u) % static_cast<unsigned>(mc.vocab_size);
      }
      for (int s = 0; s < batch; ++s) {
        chunks.push_back({&cache.Sequence(seqs[s]), std::span<const int>(&tokens[s], 1)});
      }
      err << "\rbench: context " << ctx << ", batch " << batch << ": decoding          " << std::flush;
      for (int i = 0; i < kWarmupSteps; ++i) model.Step(chunks, step_options);
      const Clock::time_point start = Clock::now();
      for (int i = 0; i < steps; ++i) model.Step(chunks, step_options);
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count() / steps;
      const double tok_s = batch / seconds;
      if (batch == 1) batch1 = tok_s;
      const double kv_bytes =
          static_cast<double>(kv.BytesPerToken()) * batch * (ctx + kWarmupSteps + steps / 2.0);
      out << "| " << ctx << " | " << batch << " | " << KvDtypeName(kv.dtype) << " | "
          << Fixed(seconds * 1e3, 2) << " | " << Fixed(tok_s, 1) << " | "
          << (batch1 > 0 ? Fixed(tok_s / batch1, 2) : "") << " | " << Fixed(kv_bytes, 0) << " | "
          << Fixed((weight_bytes + kv_bytes) / seconds / 1e9, 2) << " |\n";
    }
  }

  // Paged against contiguous at batch 1: the same Decode, the same values, two layouts, the paged one twice:
  // alone in a fresh pool (its blocks in address order) and in a pool whose free list was shuffled first
  // (blocks scattered, as after a server's sequences have come and gone). The three are timed in alternating
  // rounds and the medians reported, so that a change in the host's load during the run moves all of them
  // rather than the ratios: on a shared 2-core host one-shot figures taken one after the other differed by
  // up to 10% between two runs of the same command.
  out << "\n| context | contiguous decode tok/s | paged, blocks in order | paged, blocks shuffled | paged / "
         "contiguous, in order | shuffled |\n"
      << "|---|---|---|---|---|---|\n";
  for (int ctx : contexts) {
    const int positions = ctx + kLayoutRounds * steps + 1;
    ContiguousKvCache contiguous = model.NewKvCache(positions);
    PagedKvConfig kv = ReadPagedKvFlags(flags, mc, positions, 1);
    kv.dtype = KvDtype::kF32;  // the contiguous cache is FP32
    PagedKvCache ordered_pool(kv);
    KvSequence& ordered = ordered_pool.Sequence(ordered_pool.Add());
    PagedKvCache shuffled_pool(kv);
    KvSequence& shuffled = shuffled_pool.Sequence(ShuffleFreeBlocks(shuffled_pool, positions, kv.block_size));
    FillSynthetic(contiguous, ctx, 1);
    FillSynthetic(ordered, ctx, 1);
    FillSynthetic(shuffled, ctx, 1);
    KvSequence* caches[3] = {&contiguous, &ordered, &shuffled};
    for (KvSequence* cache : caches) model.Decode(1, *cache);  // warm-up
    std::vector<double> rates[3], ratios[2];
    for (int round = 0; round < kLayoutRounds; ++round) {
      double rate[3];
      for (int c = 0; c < 3; ++c) {
        const Clock::time_point start = Clock::now();
        for (int i = 0; i < steps; ++i) model.Decode(1 + i, *caches[c]);
        rate[c] = steps / std::chrono::duration<double>(Clock::now() - start).count();
        rates[c].push_back(rate[c]);
      }
      for (int p = 0; p < 2; ++p) ratios[p].push_back(rate[1 + p] / rate[0]);
    }
    out << "| " << ctx << " | " << Fixed(Median(rates[0]), 1) << " | " << Fixed(Median(rates[1]), 1) << " | "
        << Fixed(Median(rates[2]), 1);
    for (const std::vector<double>& r : ratios) {
      const auto [low, high] = std::minmax_element(r.begin(), r.end());
      out << " | " << Fixed(Median(r), 3) << " (" << Fixed(*low, 3) << " – " << Fixed(*high, 3) << ")";
    }
    out << " |\n";
  }
  out << "\n(paged / contiguous: median of " << kLayoutRounds << " alternating rounds, min – max)\n";
  err << "\r" << std::string(60, ' ') << "\r" << std::flush;
  return 0;
}

}  // namespace plumb::cli
