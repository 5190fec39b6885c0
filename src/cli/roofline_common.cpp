// Shared by plumb roofline, estimate and explain (roofline_common.h).
#include "roofline_common.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <ostream>
#include <sstream>
#include <thread>

#include "plumb/core/error.h"
#include "plumb/kernels/weight_format.h"
#include "plumb/model/model.h"
#include "plumb/model/pack.h"
#include "plumb/roofline/host_probe.h"

namespace plumb::cli {
namespace {

std::string Scaled(double value, const char* const* units, int count, const char* suffix) {
  int i = 0;
  while (i + 1 < count && std::fabs(value) >= 1000) {
    value /= 1000;
    ++i;
  }
  return Fixed(value, value < 10 ? 2 : value < 100 ? 1 : 0) + " " + units[i] + suffix;
}

}  // namespace

std::string Fixed(double value, int precision) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(precision) << value;
  return text.str();
}

std::string Bytes(double bytes) {
  static const char* const kUnits[] = {"", "k", "M", "G", "T"};
  return Scaled(bytes, kUnits, 5, "B");
}

std::string Count(double count) {
  static const char* const kUnits[] = {"", "k", "M", "G", "T", "P"};
  return Scaled(count, kUnits, 6, "");
}

std::string Duration(double seconds) {
  if (seconds < 1e-6) return Fixed(seconds * 1e9, 0) + " ns";
  if (seconds < 1e-3) return Fixed(seconds * 1e6, seconds < 1e-5 ? 2 : 1) + " µs";
  if (seconds < 1) return Fixed(seconds * 1e3, 2) + " ms";
  return Fixed(seconds, 2) + " s";
}

std::size_t Columns(const std::string& text) {
  std::size_t n = 0;
  for (char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;  // not a continuation byte
  return n;
}

std::string PadRight(const std::string& text, std::size_t width) {
  const std::size_t n = Columns(text);
  return n >= width ? text : text + std::string(width - n, ' ');
}

std::string PadLeft(const std::string& text, std::size_t width) {
  const std::size_t n = Columns(text);
  return n >= width ? text : std::string(width - n, ' ') + text;
}

std::string Wrap(const std::string& text, std::size_t width, std::size_t indent, bool indent_first) {
  std::string out, line = indent_first ? std::string(indent, ' ') : "";
  std::size_t start = 0;
  bool line_has_word = false;
  while (start < text.size()) {
    std::size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (line_has_word && Columns(line) + 1 + Columns(word) > width) {
      out += line + "\n";
      line = std::string(indent, ' ');
      line_has_word = false;
    }
    if (line_has_word) line += ' ';
    line += word;
    line_has_word = true;
    start = end + 1;
  }
  return out + line + "\n";
}

double ParsePositive(const std::string& text, const std::string& what) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno != 0 || !std::isfinite(value) ||
      value <= 0) {
    throw MakeError(what, ": expected a positive number, got '", text, "'");
  }
  return value;
}

Progress::Progress(std::ostream& err) : err_(err), shown_(&err == &std::cerr && isatty(STDERR_FILENO) == 1) {}

void Progress::Say(const std::string& text) {
  if (!shown_) return;
  err_ << "\r" << text << std::string(text.size() < width_ ? width_ - text.size() : 0, ' ') << std::flush;
  width_ = std::max(width_, text.size());
}

void Progress::Done() {
  if (!shown_ || width_ == 0) return;
  err_ << "\r" << std::string(width_, ' ') << "\r" << std::flush;
  width_ = 0;
}

void AddHostProbeFlags(Flags& flags, const std::string& probe_mib_default) {
  flags.AddValue("threads", "N", "threads for the model and the all-core probes (default: every core)",
                 std::to_string(std::max(1u, std::thread::hardware_concurrency())));
  flags.AddValue("probe-mib", "MiB",
                 "buffer the bandwidth probe streams; keep it far beyond the last-level cache",
                 probe_mib_default);
  // Many short runs: on a shared machine the best of them is likelier to have found the memory quiet.
  flags.AddValue("probe-repetitions", "R", "runs of each probe; the best counts", "10");
}

HostMeasurement MeasureHost(const Flags& flags, std::ostream& err) {
  HostMeasurement host;
  host.threads = flags.Int("threads", 1, 4096);
  host.probe_bytes = static_cast<std::size_t>(flags.Int("probe-mib", 1, 1 << 16)) << 20;
  const int repetitions = flags.Int("probe-repetitions", 1, 1000);
  Progress progress(err);
  for (int t = 1; t <= host.threads; ++t) {
    progress.Say("probing the host: read bandwidth, " + std::to_string(t) + " thread(s)");
    host.bandwidth.push_back(roofline::MeasureReadBandwidth(t, host.probe_bytes, repetitions));
  }
  progress.Say("probing the host: FP32 FMA peak");
  // Many short runs (a few ms each): the best of them is the ceiling, and on a shared machine a short run
  // has a better chance of finding every core free. Shorter still when the probe buffer is small (tests).
  const long long iterations = host.probe_bytes < (std::size_t{64} << 20) ? 1 << 14 : 1 << 19;
  const roofline::PeakFlops one = roofline::MeasurePeakFlops(1, iterations, 4 * repetitions);
  const roofline::PeakFlops all = roofline::MeasurePeakFlops(host.threads, iterations, 4 * repetitions);
  host.peak_flops_per_core = one.flops_per_second;
  host.peak_flops = all.flops_per_second;
  host.isa = all.isa;
  return host;
}

std::string DescribeHost(const HostMeasurement& host) {
  std::ostringstream s;
  s << "host: read bandwidth";
  for (std::size_t t = 0; t < host.bandwidth.size(); ++t) {
    s << (t ? ", " : " ") << Fixed(host.bandwidth[t] / 1e9, 1) << " GB/s (" << t + 1 << " thread"
      << (t ? "s" : "") << ")";
  }
  s << "\n      FP32 FMA peak (" << host.isa << "): " << Fixed(host.peak_flops_per_core / 1e9, 1)
    << " GFLOP/s per core, " << Fixed(host.peak_flops / 1e9, 1) << " GFLOP/s on " << host.threads << " thread"
    << (host.threads > 1 ? "s" : "") << " | ridge " << Fixed(host.roof().Ridge(), 1) << " FLOP/B\n";
  return s.str();
}

void AddHardwareOverrideFlags(Flags& flags) {
  flags.AddValue("peak-tflops", "T", "replace the hardware's peak arithmetic rate (TFLOP/s)");
  flags.AddValue("bandwidth-gbs", "G", "replace the hardware's memory bandwidth (GB/s)");
  flags.AddValue("memory-gb", "G", "replace the memory of one device (GB)");
}

void ApplyHardwareOverrides(const Flags& flags, roofline::Hardware& hw) {
  if (flags.IsSet("peak-tflops")) {
    hw.peak_flops = ParsePositive(flags.String("peak-tflops"), "--peak-tflops") * 1e12;
    hw.source += " (peak overridden by --peak-tflops)";
  }
  if (flags.IsSet("bandwidth-gbs")) {
    hw.bandwidth = ParsePositive(flags.String("bandwidth-gbs"), "--bandwidth-gbs") * 1e9;
    hw.source += " (bandwidth overridden by --bandwidth-gbs)";
  }
  if (flags.IsSet("memory-gb")) {
    hw.memory_bytes = ParsePositive(flags.String("memory-gb"), "--memory-gb") * 1e9;
    hw.source += " (memory overridden by --memory-gb)";
  }
}

Model LoadModelAs(const std::string& path, const std::string& dtype, int threads, std::ostream& err) {
  if (dtype.empty()) return Model::Load(path);
  const std::optional<PackFormat> format = ParsePackFormat(dtype);
  if (!format) {
    std::string choices;
    for (const std::string& n : PackFormatNames()) choices += (choices.empty() ? "" : ", ") + n;
    throw MakeError("--dtype: plumb repacks a model only to ", choices, "; got '", dtype,
                    "' (plumb estimate models any dtype)");
  }
  const Model source = Model::Load(path);
  Progress progress(err);
  progress.Say("repacking the weights as " + dtype + " ...");
  PackOptions options;
  options.format = *format;
  options.threads = threads;
  return RepackModel(source, options);
}

roofline::CostOptions RunCostOptions(const Model& model, KvDtype kv) {
  roofline::CostOptions options{static_cast<double>(KvDtypeBytes(kv)), 4};
  const std::vector<LayerWeights>& layers = model.weights().layers;
  options.int8_activations = !layers.empty() && kernels::UsesInt8RowDots(layers.front().wq);
  return options;
}

std::string StoredDtypeName(const Model& model) {
  const WeightMatrix& w = model.weights().layers.at(0).wq;
  return w.format->describe(w);
}

std::string RegimeReason(roofline::Regime regime, const roofline::Roof& roof, double flops, double bytes,
                         double measured_seconds) {
  const double intensity = bytes > 0 ? flops / bytes : 0;
  const double memory = bytes / roof.bandwidth, compute = flops / roof.peak_flops;
  std::ostringstream s;
  switch (regime) {
    case roofline::Regime::kOverhead:
      s << "took " << Duration(measured_seconds) << ", "
        << Fixed(measured_seconds / std::max(memory, compute), 0) << "× its roofline bound of "
        << Duration(std::max(memory, compute))
        << ": too little work to hide thread start-up and loop overhead.";
      break;
    case roofline::Regime::kCompute:
      s << Fixed(intensity, 1) << " FLOP/B is above the ridge of " << Fixed(roof.Ridge(), 1)
        << ": its arithmetic (" << Duration(compute) << " at peak) outlasts its memory traffic ("
        << Duration(memory) << " at full bandwidth).";
      break;
    case roofline::Regime::kBandwidth:
      s << Fixed(intensity, 2) << " FLOP/B is below the ridge of " << Fixed(roof.Ridge(), 1)
        << ": moving its " << Bytes(bytes) << " (" << Duration(memory)
        << " at full bandwidth) outlasts its FLOPs (" << Duration(compute) << " at peak).";
      break;
  }
  return s.str();
}

}  // namespace plumb::cli
