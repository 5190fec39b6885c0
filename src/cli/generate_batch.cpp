#include "generate_batch.h"

#include <chrono>
#include <fstream>
#include <iomanip>

#include "plumb/cli/batch_flags.h"
#include "plumb/cli/prompt_lines.h"
#include "plumb/core/error.h"
#include "plumb/engine/scheduler.h"
#include "plumb/kernels/kernels.h"

namespace plumb::cli {
namespace {

// The prompts file's non-empty lines (plumb/cli/prompt_lines.h).
std::vector<std::pair<int, std::string>> ReadPromptsFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw MakeError(path, ": cannot open the prompts file");
  return ReadPromptLines(in, path);
}

double MiB(std::size_t bytes) {
  return static_cast<double>(bytes) / (1 << 20);
}

}  // namespace

int RunGenerateBatch(const Flags& flags, TextModel& loaded, const GenerationOptions& options, int ctx,
                     std::ostream& out, std::ostream& err) {
  const bool text_mode = flags.IsSet("prompts-file");
  const std::string path = flags.String(text_mode ? "prompts-file" : "prompt-ids-file");
  const SchedulerOptions so = ReadSchedulerFlags(flags);
  const Tokenizer* tokenizer = text_mode ? &loaded.RequireTokenizer("--prompts-file") : nullptr;

  std::vector<std::vector<int>> prompts;
  for (const auto& [number, line] : ReadPromptsFile(path)) {
    prompts.push_back(text_mode
                          ? tokenizer->Encode(line, /*add_special=*/true, !flags.Switch("no-parse-special"))
                          : ParseIdLine(path, number, line));
  }
  const PagedKvConfig kv = ReadPagedKvFlags(flags, loaded.model.config(), ctx, so.max_running);
  PagedKvCache cache(kv);
  Scheduler scheduler(loaded.model, cache, so);
  std::vector<RequestId> ids;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    try {
      ids.push_back(scheduler.Add(prompts[i], options));
    } catch (const Error& e) {
      throw MakeError(path, " prompt ", i + 1, ": ", e.what());
    }
  }

  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  int steps = 0, peak_running = 0, peak_used = 0, preemptions = 0;
  long long decode_tokens = 0, prefill_tokens = 0, generated = 0;
  std::int64_t peak_fragmented = 0;
  while (!scheduler.Idle()) {
    const StepReport r = scheduler.Step();
    ++steps;
    decode_tokens += r.decode_tokens;
    prefill_tokens += r.prefill_tokens;
    generated += static_cast<long long>(r.new_tokens.size());
    preemptions += static_cast<int>(r.preempted.size());
    peak_running = std::max(peak_running, scheduler.running() + static_cast<int>(r.finished.size()));
    const PagedKvUsage u = cache.Usage();
    peak_used = std::max(peak_used, u.used_blocks);
    peak_fragmented = std::max(peak_fragmented, u.fragmented_positions);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();

  for (std::size_t i = 0; i < ids.size(); ++i) {
    const RequestStatus& s = scheduler.Status(ids[i]);
    out << "### " << i + 1 << " (" << s.prompt.size() << " prompt tokens, " << s.generated.size()
        << " generated, " << StopReasonName(s.finish_reason) << ")\n";
    if (text_mode) {
      out << tokenizer->Decode(s.generated) << "\n";
    } else {
      for (std::size_t t = 0; t < s.generated.size(); ++t) out << (t ? " " : "") << s.generated[t];
      out << "\n";
    }
  }

  const std::ios::fmtflags saved = err.flags();
  const int blocks_per_ctx = (ctx + kv.block_size - 1) / kv.block_size;
  err << std::fixed << std::setprecision(2) << "requests: " << ids.size() << " | steps: " << steps
      << " | peak batch: " << peak_running << " | preemptions: " << preemptions
      << " | threads: " << kernels::NumThreads() << (so.batch_invariant ? " | deterministic" : "") << "\n"
      << "prefill: " << prefill_tokens << " tokens | decode: " << decode_tokens
      << " tokens | generated: " << generated << " tokens in " << seconds
      << " s = " << (seconds > 0 ? generated / seconds : 0) << " tok/s over all requests\n"
      << "kv cache: " << KvDtypeName(kv.dtype) << ", " << kv.num_blocks << " blocks x " << kv.block_size
      << " positions = " << MiB(kv.BytesPerBlock() * kv.num_blocks) << " MiB, " << kv.BytesPerToken()
      << " bytes/token | peak used: " << peak_used << " blocks (" << MiB(kv.BytesPerBlock() * peak_used)
      << " MiB), peak unused tail slots: " << peak_fragmented << " | sequences of " << ctx
      << " positions that fit: " << kv.num_blocks / blocks_per_ctx << "\n";
  err.flags(saved);
  return 0;
}

}  // namespace plumb::cli
