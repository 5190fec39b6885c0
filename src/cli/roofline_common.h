// What plumb roofline, estimate and explain share: number formatting, the measured host as a roofline
// (roofline/host_probe.h), and the flags that override a machine's figures.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "plumb/cli/flags.h"
#include "plumb/formats/kv_dtype.h"
#include "plumb/roofline/cost_model.h"
#include "plumb/roofline/presets.h"
#include "plumb/roofline/regime.h"

namespace plumb::cli {

std::string Fixed(double value, int precision);
// 1234567 -> "1.23 MB" (powers of 1000: bandwidths and the textbook figures are decimal).
std::string Bytes(double bytes);
// 1.5e9 -> "1.50 G" (a count: FLOPs, parameters).
std::string Count(double count);
// Seconds in the unit that suits: "812 ns", "41.5 µs", "41.79 ms", "1.20 s".
std::string Duration(double seconds);

// Display width of UTF-8 text (code points: every character plumb prints is one column wide).
std::size_t Columns(const std::string& text);
// `text` padded with spaces to `width` columns, on the right (PadRight) or the left (PadLeft).
std::string PadRight(const std::string& text, std::size_t width);
std::string PadLeft(const std::string& text, std::size_t width);
// `text` broken at spaces into lines of at most `width` columns, every line after the first (or, with
// indent_first, every line) indented by `indent` spaces; ends in a newline.
std::string Wrap(const std::string& text, std::size_t width, std::size_t indent = 0,
                 bool indent_first = false);

// A strictly positive decimal number (e.g. "3.35", "989e12"); `what` names it in the error.
double ParsePositive(const std::string& text, const std::string& what);

// One self-overwriting progress line on `err`, shown only when it is the terminal's stderr (so that logs and
// --json output captured with 2>&1 stay clean).
class Progress {
 public:
  explicit Progress(std::ostream& err);
  ~Progress() { Done(); }
  void Say(const std::string& text);
  void Done();  // clears the line

 private:
  std::ostream& err_;
  bool shown_;
  std::size_t width_ = 0;
};

// The host measured: streaming-read bandwidth and FP32 FMA peak.
struct HostMeasurement {
  int threads = 1;                 // the all-core figures use this many threads
  std::vector<double> bandwidth;   // bytes/s at 1..threads threads
  double peak_flops_per_core = 0;  // one thread
  double peak_flops = 0;           // `threads` threads
  std::string isa;
  std::size_t probe_bytes = 0;
  // The ceilings: the peak on every thread, and the best bandwidth at any thread count (more threads cannot
  // lower what the memory delivers; a lower all-thread figure means another process took a share).
  roofline::Roof roof() const { return {peak_flops, *std::max_element(bandwidth.begin(), bandwidth.end())}; }
};

// --threads, --probe-mib, --probe-repetitions (what the host probes measure with).
void AddHostProbeFlags(Flags& flags, const std::string& probe_mib_default);
// Runs the probes (progress on `err`); `threads` from --threads (all cores by default).
HostMeasurement MeasureHost(const Flags& flags, std::ostream& err);
// "read bandwidth 9.8 GB/s (1 thread), 14.0 GB/s (2 threads) ... | FP32 FMA peak (avx512) ..." lines.
std::string DescribeHost(const HostMeasurement& host);

// --peak-tflops, --bandwidth-gbs, --memory-gb: each replaces the preset's (or the host's) figure.
void AddHardwareOverrideFlags(Flags& flags);
void ApplyHardwareOverrides(const Flags& flags, roofline::Hardware& hardware);

}  // namespace plumb::cli

namespace plumb {
class Model;
}

namespace plumb::cli {

// Loads `path`; with a `dtype` other than "" repacks its weights first (model/pack.h: f32, f16, bf16,
// fp8-*, int4-*) in memory (model/pack.h, RepackModel).
Model LoadModelAs(const std::string& path, const std::string& dtype, int threads, std::ostream& err);

// A short name of how a loaded model stores its layer matrices: "Q4_1", "F32", "fp8-e4m3", "int4-sym-g32".
std::string StoredDtypeName(const Model& model);
// The cost model's options for a run of `model` with a `kv` cache: FP32 activations, and the `quantize`
// kernel where the active family runs int8 kernels on the model's projections (kernels/int8_activations.h).
roofline::CostOptions RunCostOptions(const Model& model, KvDtype kv);

// One sentence: why a kernel is in its regime (roofline/regime.h), with the numbers.
std::string RegimeReason(roofline::Regime regime, const roofline::Roof& roof, double flops, double bytes,
                         double measured_seconds);

}  // namespace plumb::cli
