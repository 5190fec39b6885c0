// plumb roofline: the host's two ceilings measured (streaming read bandwidth, FP32 FMA peak), the model's
// bytes and FLOPs computed kernel by kernel (roofline/cost_model.h), and the real decode and prefill run
// with the same settings and held against them: MBU for decode, MFU for prefill. Tables, JSON, SVG.
// The model, the JSON schema and how to read the chart: docs/roofline.md.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <ostream>

#include "plumb/cli/commands.h"
#include "plumb/cli/common_flags.h"
#include "plumb/core/error.h"
#include "plumb/formats/kv_dtype.h"
#include "plumb/kernels/kernels.h"
#include "plumb/model/model.h"
#include "plumb/roofline/json_writer.h"
#include "plumb/roofline/kernel_timer.h"
#include "plumb/roofline/measure.h"
#include "plumb/roofline/regime.h"
#include "plumb/roofline/svg_chart.h"
#include "roofline_common.h"

namespace plumb::cli {
namespace {

using roofline::KernelCost;
using roofline::PassCost;

constexpr const char* kRooflineUsage =
    "usage: plumb roofline --model PATH [--dtype D] [--kv-dtype K] [--batch 1,4,16] [--context "
    "128,1024,4096]\n"
    "                      [--prompt-tokens P] [--steps N] [--json] [--svg FILE]\n"
    "Measures the host (streaming read bandwidth at 1..N threads, FP32 FMA peak per core and on N threads),\n"
    "computes every kernel's bytes and FLOPs for a decode step and a prefill from the model's shapes and "
    "its\n"
    "weight and KV dtypes, then runs the real decode (each batch at each context, KV filled with zeros: the\n"
    "cost does not depend on the values) and a P-token prefill, and prints measured against the roofline:\n"
    "MBU (bytes moved per second / bandwidth) for decode, MFU (FLOPs per second / peak) for prefill.\n"
    "--dtype repacks the weights first (f16, bf16, fp8-e4m3, int4-sym-g32, ...). Rows whose KV would exceed\n"
    "--kv-budget-mib are skipped and say so.\n\n"
    "flags:\n";

Flags RooflineFlags() {
  Flags f;
  AddModelFlag(f);
  f.AddValue("dtype", "D", "repack the weights to D before measuring (default: as stored)");
  f.AddValue("kv-dtype", "K", "KV cache dtype: f32, f16, bf16, fp8-e4m3, fp8-e5m2", "f32");
  f.AddValue("batch", "B,..", "sequences per decode step", "1,4,16");
  f.AddValue("context", "T,..", "positions each sequence holds before the timed steps", "128,1024,4096");
  f.AddValue("prompt-tokens", "P", "prefill length", "128");
  f.AddValue("steps", "N", "timed decode steps per (batch, context) after three warm-up steps", "3");
  f.AddValue("prefill-runs", "R", "timed prefills after one warm-up", "2");
  f.AddValue("kv-budget-mib", "MiB", "skip (batch, context) rows whose KV cache needs more", "4096");
  AddHostProbeFlags(f, "256");
  AddKernelsFlag(f, kernels::KernelFamily::kFast);
  f.AddSwitch("json", "print JSON (docs/roofline.md \"JSON\") instead of tables");
  f.AddValue("svg", "FILE", "also write the roofline chart (decode tok/s against batch and context)");
  return f;
}

struct Settings {
  std::string model_path;
  KvDtype kv = KvDtype::kF32;
  std::vector<int> batches, contexts;
  int prompt = 0, steps = 0, prefill_runs = 0;
  double kv_budget = 0;
};

struct DecodeRow {
  int batch = 0, context = 0;
  PassCost cost;
  bool skipped = false;
  double kv_needed = 0;  // bytes of KV the row's caches hold
  double seconds = 0;    // measured, per step
};

struct Report {
  std::string model_path, dtype, kv_dtype;
  std::string kernels;  // KernelsDescription(): the family and ISA that ran
  ModelConfig config;
  roofline::WeightBytes weights;
  roofline::CostOptions options;  // RunCostOptions: the KV dtype, and whether int8 kernels ran
  double kv_bytes_per_token = 0;
  HostMeasurement host;
  PassCost decode_kernels;  // the first --batch at the first --context (the first decode row measured)
  roofline::KernelTimer decode_timer;
  PassCost prefill;
  roofline::KernelTimer prefill_timer;
  double prefill_seconds = 0;
  std::vector<DecodeRow> decode;
};

Settings ReadSettings(const Flags& flags, const ModelConfig& c) {
  Settings s;
  s.model_path = flags.String("model");
  s.kv = ParseKvDtype(flags.String("kv-dtype"));
  s.batches = flags.IntList("batch");
  s.contexts = flags.IntList("context");
  s.prompt = flags.Int("prompt-tokens", 1, c.max_position_embeddings);
  s.steps = flags.Int("steps", 1, 1 << 20);
  s.prefill_runs = flags.Int("prefill-runs", 1, 1000);
  s.kv_budget = static_cast<double>(flags.Int("kv-budget-mib", 1, 1 << 24)) * (1 << 20);
  for (int b : s.batches) {
    if (b < 1 || b > 4096) throw MakeError("--batch: every batch must be in [1, 4096], got ", b);
  }
  for (int t : s.contexts) {
    if (t < 0 || t + 1 > c.max_position_embeddings) {
      throw MakeError("--context: ", t, " + 1 decode position must fit the model's context of ",
                      c.max_position_embeddings);
    }
  }
  return s;
}

void Measure(Model& model, const Settings& s, Report& r, std::ostream& err) {
  r.options = RunCostOptions(model, s.kv);
  const roofline::CostOptions& options = r.options;
  r.decode_kernels =
      roofline::DecodeStepCost(r.config, r.weights, options, s.batches.front(), s.contexts.front());
  r.prefill = roofline::PrefillCost(r.config, r.weights, options, s.prompt);
  Progress progress(err);
  progress.Say("roofline: prefill of " + std::to_string(s.prompt) + " tokens");
  r.prefill_seconds = roofline::TimePrefill(model, s.kv, s.prompt, s.prefill_runs, &r.prefill_timer);
  for (int context : s.contexts) {
    for (int batch : s.batches) {
      DecodeRow row;
      row.batch = batch;
      row.context = context;
      row.cost = roofline::DecodeStepCost(r.config, r.weights, options, batch, context);
      row.kv_needed = r.kv_bytes_per_token * batch * (context + 1.0);
      row.skipped = row.kv_needed > s.kv_budget;
      if (!row.skipped) {
        progress.Say("roofline: decode, context " + std::to_string(context) + ", batch " +
                     std::to_string(batch));
        const bool time_kernels = batch == s.batches.front() && context == s.contexts.front();
        row.seconds = roofline::TimeDecodeStep(model, s.kv, batch, context, s.steps,
                                               time_kernels ? &r.decode_timer : nullptr);
      }
      r.decode.push_back(row);
    }
  }
}

// The ceilings of a decode step: tok/s (all sequences) if it moved its bytes at full bandwidth, and if it
// did its FLOPs at peak.
double BandwidthCeiling(const PassCost& p, const roofline::Roof& roof) {
  return p.batch / (p.Bytes() / roof.bandwidth);
}
double ComputeCeiling(const PassCost& p, const roofline::Roof& roof) {
  return p.batch / (p.Flops() / roof.peak_flops);
}

void PrintKernelTable(std::ostream& out, const PassCost& pass, const roofline::KernelTimer& timer,
                      const roofline::Roof& roof) {
  out << "| kernel | × | shape (one) | FLOPs | bytes | FLOP/B | roofline | measured | measured / roofline | "
         "regime |\n|---|---|---|---|---|---|---|---|---|---|\n";
  double bound_total = 0;
  for (const KernelCost& k : pass.kernels) {
    const double flops = k.instances * k.flops, bytes = k.instances * k.Bytes();
    const double bound = roof.Seconds(flops, bytes), measured = timer.Seconds(k.kernel);
    bound_total += bound;
    out << "| " << ForwardKernelName(k.kernel) << " | " << k.instances << " | " << k.shape << " | "
        << Count(flops) << " | " << Bytes(bytes) << " | " << Fixed(k.Intensity(), 2) << " | "
        << Duration(bound) << " | " << Duration(measured) << " | " << Fixed(measured / bound, 1) << " | "
        << roofline::RegimeName(roofline::Classify(roof, flops, bytes, measured)) << " |\n";
  }
  out << "| **pass** | | | " << Count(pass.Flops()) << " | " << Bytes(pass.Bytes()) << " | "
      << Fixed(pass.Intensity(), 2) << " | " << Duration(bound_total) << " | "
      << Duration(timer.PassSeconds()) << " | " << Fixed(timer.PassSeconds() / bound_total, 1) << " | |\n";
}

void PrintTables(std::ostream& out, const Report& r) {
  const roofline::Roof roof = r.host.roof();
  out << "plumb roofline: " << r.model_path << " | weights " << r.dtype << ", " << Bytes(r.weights.Stored())
      << " | KV " << r.kv_dtype << ", " << Fixed(r.kv_bytes_per_token, 0) << " B/token | " << r.host.threads
      << " threads\n"
      << "kernels: " << r.kernels << "\n"
      << DescribeHost(r.host) << "roofline: a kernel takes at least max(bytes / " << Bytes(roof.bandwidth)
      << "/s, FLOPs / " << Count(roof.peak_flops) << "FLOP/s); bound = the larger\n\n";
  out << "decode step, batch " << r.decode_kernels.batch << ", context " << r.decode_kernels.context
      << ", kernel by kernel (per-layer kernels: all " << r.config.num_layers << " layers; measured: mean of "
      << r.decode_timer.passes() << " steps)\n\n";
  PrintKernelTable(out, r.decode_kernels, r.decode_timer, roof);
  out << "\nprefill of " << r.prefill.rows << " tokens, kernel by kernel (measured: mean of "
      << r.prefill_timer.passes() << " runs)\n\n";
  PrintKernelTable(out, r.prefill, r.prefill_timer, roof);
  out << "\ndecode against the roofline (MBU = bytes per step × steps/s ÷ bandwidth; ceiling = min of the "
         "two)\n\n"
      << "| context | batch | bytes/step | FLOPs/step | FLOP/B | ceiling: bandwidth tok/s | ceiling: compute "
         "tok/s "
         "| measured tok/s | MBU % | of ceiling % |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (const DecodeRow& d : r.decode) {
    const double bw = BandwidthCeiling(d.cost, roof), fl = ComputeCeiling(d.cost, roof);
    out << "| " << d.context << " | " << d.batch << " | " << Bytes(d.cost.Bytes()) << " | "
        << Count(d.cost.Flops()) << " | " << Fixed(d.cost.Intensity(), 2) << " | " << Fixed(bw, 1) << " | "
        << Fixed(fl, 1) << " | ";
    if (d.skipped) {
      out << "skipped: KV needs " << Bytes(d.kv_needed) << " (--kv-budget-mib) | | |\n";
      continue;
    }
    const double measured = d.batch / d.seconds;
    out << Fixed(measured, 1) << " | " << Fixed(100 * d.cost.Bytes() / d.seconds / roof.bandwidth, 1) << " | "
        << Fixed(100 * measured / std::min(bw, fl), 1) << " |\n";
  }
  const double prefill_rate = r.prefill.rows / r.prefill_seconds;
  out << "\nprefill against the roofline (MFU = FLOPs × runs/s ÷ peak)\n\n"
      << "| prompt | FLOPs | bytes | FLOP/B | ceiling: compute tok/s | ceiling: bandwidth tok/s | measured "
         "tok/s | "
         "MFU % |\n|---|---|---|---|---|---|---|---|\n"
      << "| " << r.prefill.rows << " | " << Count(r.prefill.Flops()) << " | " << Bytes(r.prefill.Bytes())
      << " | " << Fixed(r.prefill.Intensity(), 1) << " | "
      << Fixed(r.prefill.rows / (r.prefill.Flops() / roof.peak_flops), 1) << " | "
      << Fixed(r.prefill.rows / (r.prefill.Bytes() / roof.bandwidth), 1) << " | " << Fixed(prefill_rate, 1)
      << " | " << Fixed(100 * r.prefill.Flops() / r.prefill_seconds / roof.peak_flops, 1) << " |\n";
}

void KernelsJson(roofline::JsonWriter& j, const PassCost& pass, const roofline::KernelTimer& timer,
                 const roofline::Roof& roof) {
  j.BeginArray();
  for (const KernelCost& k : pass.kernels) {
    const double flops = k.instances * k.flops, bytes = k.instances * k.Bytes();
    const double measured = timer.Seconds(k.kernel);
    j.BeginObject().Key("name").Value(ForwardKernelName(k.kernel)).Key("instances").Value(k.instances);
    j.Key("shape").Value(k.shape).Key("flops").Value(flops).Key("bytes").Value(bytes);
    j.Key("weight_bytes").Value(k.instances * k.weight_bytes);
    j.Key("activation_bytes").Value(k.instances * k.activation_bytes);
    j.Key("kv_bytes").Value(k.instances * k.kv_bytes).Key("intensity").Value(k.Intensity());
    j.Key("roofline_seconds").Value(roof.Seconds(flops, bytes)).Key("measured_seconds").Value(measured);
    j.Key("regime").Value(roofline::RegimeName(roofline::Classify(roof, flops, bytes, measured)));
    j.EndObject();
  }
  j.EndArray();
}

std::string Json(const Report& r) {
  const roofline::Roof roof = r.host.roof();
  roofline::JsonWriter j;
  j.BeginObject().Key("schema").Value("plumb.roofline").Key("schema_version").Value(1);
  j.Key("model").BeginObject().Key("path").Value(r.model_path).Key("dtype").Value(r.dtype);
  j.Key("parameters").Value(roofline::ParameterCount(r.config)).Key("weight_bytes").Value(r.weights.Stored());
  j.Key("kv_dtype").Value(r.kv_dtype).Key("kv_bytes_per_token").Value(r.kv_bytes_per_token);
  j.Key("layers").Value(r.config.num_layers).Key("hidden_size").Value(r.config.hidden_size).EndObject();
  j.Key("kernels").Value(r.kernels);
  j.Key("host").BeginObject().Key("threads").Value(r.host.threads).Key("isa").Value(r.host.isa);
  j.Key("probe_bytes").Value(static_cast<long long>(r.host.probe_bytes)).Key("bandwidth").BeginArray();
  for (std::size_t t = 0; t < r.host.bandwidth.size(); ++t) {
    j.BeginObject()
        .Key("threads")
        .Value(static_cast<int>(t + 1))
        .Key("bytes_per_second")
        .Value(r.host.bandwidth[t]);
    j.EndObject();
  }
  j.EndArray().Key("peak_flops_per_core").Value(r.host.peak_flops_per_core);
  j.Key("peak_flops").Value(r.host.peak_flops).Key("ridge").Value(roof.Ridge()).EndObject();
  j.Key("decode_kernels")
      .BeginObject()
      .Key("batch")
      .Value(r.decode_kernels.batch)
      .Key("context")
      .Value(r.decode_kernels.context);
  j.Key("kernels");
  KernelsJson(j, r.decode_kernels, r.decode_timer, roof);
  j.EndObject();
  j.Key("prefill_kernels").BeginObject().Key("prompt").Value(r.prefill.rows).Key("kernels");
  KernelsJson(j, r.prefill, r.prefill_timer, roof);
  j.EndObject();
  j.Key("decode").BeginArray();
  for (const DecodeRow& d : r.decode) {
    j.BeginObject().Key("context").Value(d.context).Key("batch").Value(d.batch);
    j.Key("step_bytes").Value(d.cost.Bytes()).Key("step_flops").Value(d.cost.Flops());
    j.Key("intensity").Value(d.cost.Intensity());
    j.Key("bandwidth_ceiling_tokens_per_second").Value(BandwidthCeiling(d.cost, roof));
    j.Key("compute_ceiling_tokens_per_second").Value(ComputeCeiling(d.cost, roof));
    j.Key("skipped").Value(d.skipped).Key("kv_bytes").Value(d.kv_needed);
    if (d.skipped) {
      j.Key("measured_tokens_per_second").Null().Key("mbu").Null();
    } else {
      j.Key("measured_tokens_per_second").Value(d.batch / d.seconds);
      j.Key("mbu").Value(d.cost.Bytes() / d.seconds / roof.bandwidth);
    }
    j.EndObject();
  }
  j.EndArray();
  j.Key("prefill").BeginObject().Key("prompt").Value(r.prefill.rows).Key("flops").Value(r.prefill.Flops());
  j.Key("bytes").Value(r.prefill.Bytes()).Key("intensity").Value(r.prefill.Intensity());
  j.Key("compute_ceiling_tokens_per_second").Value(r.prefill.rows / (r.prefill.Flops() / roof.peak_flops));
  j.Key("measured_tokens_per_second").Value(r.prefill.rows / r.prefill_seconds);
  j.Key("mfu").Value(r.prefill.Flops() / r.prefill_seconds / roof.peak_flops).EndObject();
  j.EndObject();
  return j.str();
}

const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};

std::string Svg(const Report& r, const Settings& s) {
  const roofline::Roof roof = r.host.roof();
  const roofline::CostOptions& options = r.options;
  auto step = [&](int batch, int context) {
    return roofline::DecodeStepCost(r.config, r.weights, options, batch, context);
  };
  // Ceilings drawn at every power of two between the extremes too, so the curves are smooth.
  auto grid = [](const std::vector<int>& values) {
    std::vector<int> g(values);
    const int lo = *std::min_element(values.begin(), values.end()),
              hi = *std::max_element(values.begin(), values.end());
    for (long long v = 1; v <= hi; v *= 2) {
      if (v >= lo) g.push_back(static_cast<int>(v));
    }
    std::sort(g.begin(), g.end());
    g.erase(std::unique(g.begin(), g.end()), g.end());
    return g;
  };
  roofline::ChartPanel by_batch, by_context;
  by_batch.title = "decode tok/s against batch";
  by_batch.x_label = "batch (sequences per step)";
  by_context.title = "decode tok/s against context";
  by_context.x_label = "context (cached positions)";
  by_batch.y_label = by_context.y_label = "tok/s (all sequences)";
  by_batch.x_powers_of_two = true;
  by_context.x_powers_of_two = true;
  const std::vector<int> batches = grid(s.batches);
  roofline::ChartSeries compute{
      "compute ceiling (" + Count(roof.peak_flops) + "FLOP/s)", "#555", true, false, {}};
  for (int b : batches) compute.points.emplace_back(b, ComputeCeiling(step(b, s.contexts.front()), roof));
  by_batch.series.push_back(compute);
  for (std::size_t i = 0; i < s.contexts.size(); ++i) {
    const int t = s.contexts[i];
    const std::string color = kColors[i % 6];
    roofline::ChartSeries ceiling{"bandwidth ceiling, context " + std::to_string(t), color, true, false, {}};
    for (int b : batches) ceiling.points.emplace_back(b, BandwidthCeiling(step(b, t), roof));
    roofline::ChartSeries measured{"measured, context " + std::to_string(t), color, false, true, {}};
    for (const DecodeRow& d : r.decode) {
      if (d.context == t && !d.skipped) measured.points.emplace_back(d.batch, d.batch / d.seconds);
    }
    by_batch.series.push_back(ceiling);
    if (!measured.points.empty()) by_batch.series.push_back(measured);
  }
  const std::vector<int> contexts = grid(s.contexts);
  for (std::size_t i = 0; i < s.batches.size(); ++i) {
    const int b = s.batches[i];
    const std::string color = kColors[i % 6];
    roofline::ChartSeries ceiling{"bandwidth ceiling, batch " + std::to_string(b), color, true, false, {}};
    for (int t : contexts) {
      if (t > 0) ceiling.points.emplace_back(t, BandwidthCeiling(step(b, t), roof));
    }
    roofline::ChartSeries measured{"measured, batch " + std::to_string(b), color, false, true, {}};
    for (const DecodeRow& d : r.decode) {
      if (d.batch == b && !d.skipped) measured.points.emplace_back(d.context, d.batch / d.seconds);
    }
    by_context.series.push_back(ceiling);
    if (!measured.points.empty()) by_context.series.push_back(measured);
  }
  const std::string title = "plumb roofline: " + std::filesystem::path(r.model_path).filename().string() +
                            " (" + r.dtype + ", KV " + r.kv_dtype + ") on " + std::to_string(r.host.threads) +
                            " threads, " + Bytes(roof.bandwidth) + "/s";
  return roofline::RenderSvg(title, {by_batch, by_context});
}

}  // namespace

int RunRoofline(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  Flags flags = RooflineFlags();
  if (!flags.ParseUnlessHelp(args, kRooflineUsage, out)) return 0;
  const int threads = flags.Int("threads", 1, 4096);
  kernels::SetNumThreads(threads);
  ApplyKernelsFlag(flags);
  Model model =
      LoadModelAs(flags.String("model"), flags.IsSet("dtype") ? flags.String("dtype") : "", threads, err);
  const Settings settings = ReadSettings(flags, model.config());
  Report report;
  report.model_path = settings.model_path;
  report.kernels = KernelsDescription();
  report.config = model.config();
  report.weights = roofline::WeightBytesOf(model.weights());
  report.dtype = StoredDtypeName(model);
  report.kv_dtype = std::string(KvDtypeName(settings.kv));
  report.kv_bytes_per_token =
      2.0 * report.config.num_layers * report.config.KvDim() * static_cast<double>(KvDtypeBytes(settings.kv));
  report.host = MeasureHost(flags, err);
  kernels::SetNumThreads(threads);
  Measure(model, settings, report, err);
  if (flags.IsSet("svg")) {
    const std::string path = flags.String("svg");
    std::ofstream file(path, std::ios::binary);
    if (!file) throw MakeError("--svg: cannot write '", path, "'");
    file << Svg(report, settings);
    if (!file) throw MakeError("--svg: cannot write '", path, "'");
  }
  if (flags.Switch("json")) {
    out << Json(report);
  } else {
    PrintTables(out, report);
  }
  return 0;
}

}  // namespace plumb::cli
