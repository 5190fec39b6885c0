// plumb bench: end-to-end prefill and decode speed in the spirit of llama-bench, with decode set against the
// roofline: the bytes one decode step reads, and the host's streaming-read bandwidth measured in the same run
// at the same thread count (roofline/host_probe.h), so a figure survives a noisy or different machine.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_batch.h"
#include "plumb/cli/batch_flags.h"
#include "plumb/cli/commands.h"
#include "plumb/cli/common_flags.h"
#include "plumb/core/error.h"
#include "plumb/engine/generator.h"
#include "plumb/kernels/int8_activations.h"
#include "plumb/kernels/isa.h"
#include "plumb/kernels/kernels.h"
#include "plumb/roofline/host_probe.h"
#include "plumb/roofline/measure.h"

namespace plumb::cli {
namespace {

Flags BenchFlags() {
  Flags f;
  AddModelFlag(f);
  f.AddValue("threads", "N,..",
             "comma-separated thread counts, one table row each; the default is every core",
             std::to_string(std::max(1u, std::thread::hardware_concurrency())));
  f.AddValue("prompt-tokens", "P", "prompt length: prefill of P tokens from an empty cache", "512");
  f.AddValue("gen-tokens", "G", "decode steps after the prompt", "128");
  f.AddValue("repetitions", "R", "timed runs per thread count (after one warm-up run)", "3");
  f.AddValue("probe-mib", "MiB",
             "buffer the bandwidth probe streams; keep it far beyond the last-level cache", "1024");
  AddKernelsFlag(f, kernels::KernelFamily::kFast);
  AddBatchBenchFlags(f);
  return f;
}

constexpr const char* kBenchUsage =
    "usage: plumb bench --model PATH [--threads N,..] [--prompt-tokens P] [--gen-tokens G] [--repetitions "
    "R]\n"
    "For each thread count: one warm-up run, then R runs of a P-token prefill from an empty cache followed "
    "by\n"
    "G decode steps (greedy, sampling included), on fixed token ids (no tokenizer needed). Prints a "
    "markdown\n"
    "table: prefill and decode tok/s (mean ± sample standard deviation over the R runs), the bytes one "
    "decode\n"
    "step reads, the bandwidth that makes, the host's streaming-read bandwidth measured in the same run at "
    "the\n"
    "same thread count, the memory-bandwidth utilisation (MBU) and the decode rate that bandwidth allows,\n"
    "the time to first token (TTFT) and the process's peak resident memory.\n\n"
    "With --batch B,.. it instead times decode steps of B sequences at once (Model::Step over a paged KV\n"
    "cache filled to each --context with random keys and values), and paged against contiguous attention.\n\n"
    "flags:\n";

struct Settings {
  std::string model_path;
  std::vector<int> threads;
  int prompt_tokens = 0;
  int gen_tokens = 0;
  int repetitions = 0;
  std::size_t probe_bytes = 0;
  KvDtype kv_dtype = KvDtype::kF32;
};

Settings ReadSettings(const Flags& flags) {
  Settings s;
  s.model_path = flags.String("model");
  s.threads = flags.IntList("threads");
  for (int t : s.threads) {
    if (t < 1 || t > 4096) throw MakeError("--threads: every thread count must be in [1, 4096], got ", t);
  }
  s.prompt_tokens = flags.Int("prompt-tokens", 1, std::numeric_limits<int>::max() / 2);
  s.gen_tokens = flags.Int("gen-tokens", 1, std::numeric_limits<int>::max() / 2);
  s.repetitions = flags.Int("repetitions", 1, 1000);
  s.probe_bytes = static_cast<std::size_t>(flags.Int("probe-mib", 1, 1 << 16)) << 20;
  s.kv_dtype = ReadKvDtypeFlag(flags);  // after ApplyKernelsFlag: its default follows the family
  return s;
}

struct MeanStd {
  double mean = 0;
  double stddev = 0;  // sample standard deviation (÷ (n − 1)), as llama-bench reports; 0 for one run
};

MeanStd Summarize(const std::vector<double>& values) {
  MeanStd s;
  for (double v : values) s.mean += v;
  s.mean /= static_cast<double>(values.size());
  if (values.size() > 1) {
    double squares = 0;
    for (double v : values) squares += (v - s.mean) * (v - s.mean);
    s.stddev = std::sqrt(squares / static_cast<double>(values.size() - 1));
  }
  return s;
}

std::string Format(const MeanStd& s) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(2) << s.mean << " ± " << s.stddev;
  return text.str();
}

std::string Format(double value, int precision) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(precision) << value;
  return text.str();
}

// What attention reads per decode step: the key and value of every cached position, the new one included,
// in every layer and KV head (FP32). Step s (0-based) runs at cache length P + s, so it reads P + s + 1
// positions; the mean over the G steps is P + (G + 1) / 2.
double MeanKvBytesPerDecodeStep(const ModelConfig& c, KvDtype dtype, int prompt_tokens, int gen_tokens) {
  const double bytes_per_position =
      2.0 * c.num_layers * c.num_kv_heads * c.head_dim * static_cast<double>(KvDtypeBytes(dtype));
  return bytes_per_position * (prompt_tokens + (gen_tokens + 1) / 2.0);
}

struct Row {
  int threads = 0;
  MeanStd prefill;
  MeanStd decode;
  MeanStd first_token_ms;     // time to first token: the prompt's prefill and sampling its first token
  double peak_rss_bytes = 0;  // the process's peak resident set when the row's runs ended (PeakRssBytes)
  double read_bandwidth = 0;  // bytes/s
};

// The process's peak resident set (VmHWM in /proc/self/status) in bytes; 0 where it cannot be read. Taken
// before each row's bandwidth probe, whose buffer would otherwise count; the first row's is the model's
// own (mapped weights, KV cache, activations), later rows' also hold the earlier probes' peaks.
double PeakRssBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return 1024.0 * std::strtod(line.c_str() + 6, nullptr);  // "… kB"
  }
  return 0;
}

Row RunOneThreadCount(Model& model, const Settings& s, int threads, std::ostream& err) {
  kernels::SetNumThreads(threads);
  const std::vector<int> prompt = roofline::SpreadTokens(s.prompt_tokens, model.config().vocab_size, 0);
  GenerationOptions options;
  options.max_new_tokens = s.gen_tokens + 1;  // the first token comes from the prefill, the others each from
                                              // one decode step
  ContiguousKvCache cache = model.NewKvCache(s.prompt_tokens + s.gen_tokens + 1, s.kv_dtype);
  std::vector<double> prefill, decode, first_token_ms;
  for (int run = 0; run <= s.repetitions; ++run) {
    err << "\rbench: " << threads << " thread(s), " << (run == 0 ? "warm-up" : "run " + std::to_string(run))
        << "   " << std::flush;
    cache.Clear();
    const GenerationStats stats = Generate(model, cache, prompt, options, [](int) {});
    if (stats.decode_steps != s.gen_tokens) {
      throw MakeError("bench: expected ", s.gen_tokens, " decode steps, ran ", stats.decode_steps);
    }
    if (run == 0) continue;  // the warm-up: page faults on the weights, thread start, caches
    prefill.push_back(stats.PrefillTokensPerSecond());
    decode.push_back(stats.DecodeTokensPerSecond());
    first_token_ms.push_back(1e3 * stats.time_to_first_token);
  }
  err << "\rbench: " << threads << " thread(s), measuring the host's read bandwidth" << std::flush;
  Row row;
  row.threads = threads;
  row.prefill = Summarize(prefill);
  row.decode = Summarize(decode);
  row.first_token_ms = Summarize(first_token_ms);
  row.peak_rss_bytes = PeakRssBytes();
  row.read_bandwidth = roofline::MeasureReadBandwidth(threads, s.probe_bytes);
  err << "\r" << std::string(60, ' ') << "\r" << std::flush;
  return row;
}

void PrintTable(std::ostream& out, const Model& model, const Settings& s, const std::vector<Row>& rows) {
  const std::size_t weight_bytes = model.weights().BytesReadPerDecodeStep(model.config().experts_per_token);
  const double kv_bytes = MeanKvBytesPerDecodeStep(model.config(), s.kv_dtype, s.prompt_tokens, s.gen_tokens);
  const double bytes_per_token = static_cast<double>(weight_bytes) + kv_bytes;
  const std::string pp = "pp" + std::to_string(s.prompt_tokens);
  const std::string tg = "tg" + std::to_string(s.gen_tokens);
  out << "model: " << s.model_path << " | weights " << Format(model.weights().Bytes() / 1e6, 1) << " MB"
      << " | kernels: " << KernelsDescription() << " | KV " << KvDtypeName(s.kv_dtype) << " | "
      << s.repetitions << " runs per row after 1 warm-up\n"
      << "weight B/token: ModelWeights::BytesReadPerDecodeStep. KV B/token: keys and values attention reads "
         "per decode step, mean over the "
      << s.gen_tokens << " steps (context " << s.prompt_tokens + 1 << ".." << s.prompt_tokens + s.gen_tokens
      << "). decode GB/s = (weight + KV) bytes × decode tok/s. host read: the best of 5 streaming reads of "
      << (s.probe_bytes >> 20)
      << " MiB at the row's thread count, measured after its runs. MBU = decode GB/s / "
      << "host read. ceiling = host read / (weight + KV) bytes. TTFT: the " << pp
      << " prefill and sampling the first token. peak RSS: the process's VmHWM when the row's runs ended, "
         "before its bandwidth probe (the first row's is the model's own).\n\n";
  out << "| threads | prefill " << pp << " tok/s | decode " << tg
      << " tok/s | weight B/token | KV B/token | decode GB/s | host read GB/s | MBU % | ceiling tok/s "
         "| TTFT ms | peak RSS MB |\n"
      << "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const Row& r : rows) {
    const double decode_bandwidth = bytes_per_token * r.decode.mean;
    out << "| " << r.threads << " | " << Format(r.prefill) << " | " << Format(r.decode) << " | "
        << weight_bytes << " | " << Format(kv_bytes, 0) << " | " << Format(decode_bandwidth / 1e9, 3) << " | "
        << Format(r.read_bandwidth / 1e9, 2) << " | " << Format(100 * decode_bandwidth / r.read_bandwidth, 1)
        << " | " << Format(r.read_bandwidth / bytes_per_token, 1) << " | " << Format(r.first_token_ms)
        << " | " << Format(r.peak_rss_bytes / 1e6, 1) << " |\n";
  }
}

}  // namespace

int RunBench(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  Flags flags = BenchFlags();
  if (!flags.ParseUnlessHelp(args, kBenchUsage, out)) return 0;
  ApplyKernelsFlag(flags);
  const Settings settings = ReadSettings(flags);
  Model model = Model::Load(settings.model_path);
  if (flags.IsSet("batch")) {
    kernels::SetNumThreads(settings.threads.back());
    return RunBatchBench(flags, model, out, err);
  }
  const int context = model.config().max_position_embeddings;
  if (static_cast<long long>(settings.prompt_tokens) + settings.gen_tokens > context) {
    throw MakeError("--prompt-tokens ", settings.prompt_tokens, " + --gen-tokens ", settings.gen_tokens,
                    " = ", settings.prompt_tokens + settings.gen_tokens,
                    " exceeds the model's context length of ", context, " tokens");
  }
  std::vector<Row> rows;
  for (int threads : settings.threads) rows.push_back(RunOneThreadCount(model, settings, threads, err));
  PrintTable(out, model, settings, rows);
  return 0;
}

}  // namespace plumb::cli
