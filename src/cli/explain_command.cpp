// plumb explain: one prefill and a few decode steps of a real model, narrated for a learner: for every
// kernel of one layer and for the whole model, its shapes, FLOPs, bytes, arithmetic intensity, measured
// time, achieved GB/s and GFLOP/s and its regime with the reason; then how the KV cache grew and what the
// next step will read. Plain text for a 100-column terminal. docs/walkthrough.md is one run, explained.
#include <algorithm>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "plumb/cli/commands.h"
#include "plumb/cli/common_flags.h"
#include "plumb/core/error.h"
#include "plumb/engine/text_model.h"
#include "plumb/kernels/kernels.h"
#include "plumb/roofline/kernel_timer.h"
#include "roofline_common.h"

namespace plumb::cli {
namespace {

using roofline::KernelCost;
using roofline::PassCost;

constexpr std::size_t kWidth = 100;  // the terminal the text is laid out for

constexpr const char* kExplainUsage =
    "usage: plumb explain --model PATH (--prompt TEXT | --prompt-ids 1,2,3) [--steps N] [--layer L]\n"
    "Runs one prefill of the prompt and N greedy decode steps, timing every kernel, and explains them: per\n"
    "kernel of one layer and of the whole model, the shapes, FLOPs, bytes moved, FLOP per byte, measured\n"
    "time, achieved GB/s and GFLOP/s, and whether it is compute-, bandwidth- or overhead-bound and why "
    "(held\n"
    "against the host's bandwidth and FP32 peak, measured first). Then how the KV cache grew and what the\n"
    "next decode step will read. docs/roofline.md gives the formulas.\n\n"
    "flags:\n";

Flags ExplainFlags() {
  Flags f;
  AddModelFlag(f);
  f.AddValue("prompt", "TEXT", "the prompt, tokenized with the model's tokenizer");
  f.AddValue("prompt-ids", "IDS", "the prompt as comma-separated token ids (models without a tokenizer)");
  f.AddValue("steps", "N", "greedy decode steps after the prefill", "3");
  f.AddValue("layer", "L", "the layer whose kernels are shown one by one", "0");
  f.AddValue("repetitions", "R",
             "run the prefill and the steps R times (fresh cache each); each kernel's fastest time counts",
             "3");
  AddHostProbeFlags(f, "256");
  AddKernelsFlag(f, kernels::KernelFamily::kFast);
  return f;
}

// Columns of the kernel tables: 11 + 20 + 8 + 10 + 8 + 10 + 7 + 8 + 2 + 15 = 99.
std::string Row(const std::string& kernel, const std::string& shape, const std::string& flops,
                const std::string& bytes, const std::string& intensity, const std::string& time,
                const std::string& gbs, const std::string& gflops, const std::string& regime) {
  std::string row = PadRight(kernel, 15) + PadRight(shape, 17) + PadLeft(flops, 8) + PadLeft(bytes, 10) +
                    PadLeft(intensity, 8) + PadLeft(time, 10) + PadLeft(gbs, 7) + PadLeft(gflops, 8);
  return regime.empty() ? row : row + "  " + regime;
}

std::string Header() {
  return Row("kernel", "shape", "FLOPs", "bytes", "FLOP/B", "time", "GB/s", "GFLOP/s", "regime");
}

// One kernel: `flops` and `bytes` of what ran in `seconds` (one layer's instance, or all instances).
std::string KernelLine(const KernelCost& k, double flops, double bytes, double seconds,
                       const roofline::Roof& roof) {
  return Row(std::string(ForwardKernelName(k.kernel)), k.shape, Count(flops), Bytes(bytes),
             Fixed(bytes > 0 ? flops / bytes : 0, 2), Duration(seconds), Fixed(bytes / seconds / 1e9, 2),
             Fixed(flops / seconds / 1e9, 2),
             roofline::RegimeName(roofline::Classify(roof, flops, bytes, seconds)));
}

bool PerLayer(const KernelCost& k) {
  return k.instances > 1 || (k.kernel != ForwardKernel::kEmbedding && k.kernel != ForwardKernel::kFinalNorm &&
                             k.kernel != ForwardKernel::kLmHead);
}

// `local`: the shown layer attends within a sliding window (Gemma 3): its attention is window_attention.
void ExplainPass(std::ostream& out, const PassCost& pass, const roofline::KernelTimer& timer, int layer,
                 bool local, const roofline::Roof& roof) {
  out << "Layer " << layer << ", kernel by kernel (the other layers are the same shapes"
      << (local ? "; the global layers see the whole cache" : "") << "):\n\n"
      << Header() << "\n";
  for (const KernelCost& k : pass.kernels) {
    if (!PerLayer(k)) continue;
    if (k.kernel == (local ? ForwardKernel::kAttention : ForwardKernel::kWindowAttention)) continue;
    const double seconds = timer.LayerSeconds(k.kernel);
    const roofline::Regime regime = roofline::Classify(roof, k.flops, k.Bytes(), seconds);
    out << KernelLine(k, k.flops, k.Bytes(), seconds, roof) << "\n"
        << Wrap(RegimeReason(regime, roof, k.flops, k.Bytes(), seconds), kWidth, 15, true);
  }
  out << "\nWhole model (per-layer kernels summed over all "
      << pass.Kernel(ForwardKernel::kAttnNorm).instances << " layers):\n\n"
      << Header() << "\n";
  double bound = 0;
  for (const KernelCost& k : pass.kernels) {
    const double flops = k.instances * k.flops, bytes = k.instances * k.Bytes();
    bound += roof.Seconds(flops, bytes);
    out << KernelLine(k, flops, bytes, timer.Seconds(k.kernel), roof) << "\n";
  }
  const double seconds = timer.PassSeconds();
  out << Row("total", "", Count(pass.Flops()), Bytes(pass.Bytes()), Fixed(pass.Intensity(), 2),
             Duration(seconds), Fixed(pass.Bytes() / seconds / 1e9, 2),
             Fixed(pass.Flops() / seconds / 1e9, 2), "")
      << "\n"
      << Wrap("The roofline allows this pass " + Duration(bound) +
                  " (each kernel at its own ceiling); it took " + Duration(seconds) + ", " +
                  Fixed(seconds / bound, 1) + "× that.",
              kWidth);
}

// "MLP 1536", or a mixture of experts' "8 experts of MLP 32, 2 per token, in 2 of 2 layers".
std::string MlpDescription(const ModelConfig& c) {
  if (!c.IsMoe()) return "MLP " + std::to_string(c.intermediate_size);
  const int moe_layers = c.MoeLayerCount();
  std::string text = std::to_string(c.num_experts) + " experts of MLP " +
                     std::to_string(c.moe_intermediate_size) + ", " + std::to_string(c.experts_per_token) +
                     " per token, in " + std::to_string(moe_layers) + " of " + std::to_string(c.num_layers) +
                     " layers";
  if (moe_layers < c.num_layers) text += " (the others MLP " + std::to_string(c.intermediate_size) + ")";
  return text;
}

int Argmax(std::span<const float> logits) {
  return static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

std::string Piece(const TextModel& tm, int id) {
  if (!tm.tokenizer) return std::to_string(id);
  std::string text = tm.tokenizer->TokenToPiece(id), shown;
  if (text.empty()) return std::to_string(id) + " (a control token)";
  for (char c : text) shown += c == '\n' ? std::string("\\n") : std::string(1, c);
  return std::to_string(id) + " \"" + shown + "\"";
}

}  // namespace

int RunExplain(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  Flags flags = ExplainFlags();
  if (!flags.ParseUnlessHelp(args, kExplainUsage, out)) return 0;
  if (flags.IsSet("prompt") == flags.IsSet("prompt-ids")) {
    throw MakeError("give exactly one of --prompt TEXT and --prompt-ids IDS");
  }
  const int steps = flags.Int("steps", 1, 1000);
  const int repetitions = flags.Int("repetitions", 1, 100);
  const int threads = flags.Int("threads", 1, 4096);
  const std::string path = flags.String("model");
  TextModel tm = TextModel::Load(path);
  Model& model = tm.model;
  const ModelConfig& c = model.config();
  const int layer = flags.Int("layer", 0, c.num_layers - 1);
  std::vector<int> prompt;
  if (flags.IsSet("prompt")) {
    const std::vector<std::int32_t> ids =
        tm.RequireTokenizer("--prompt")
            .Encode(flags.String("prompt"), /*add_special=*/true, /*parse_special=*/false);
    prompt.assign(ids.begin(), ids.end());
  } else {
    prompt = flags.IntList("prompt-ids");
  }
  if (prompt.empty()) throw MakeError("--prompt: the prompt has no tokens");
  CheckTokenIds(prompt, c.vocab_size);
  const int P = static_cast<int>(prompt.size());
  if (P + steps > c.max_position_embeddings) {
    throw MakeError("the prompt's ", P, " tokens + ", steps, " steps exceed the model's context of ",
                    c.max_position_embeddings);
  }

  const HostMeasurement host = MeasureHost(flags, err);
  const roofline::Roof roof = host.roof();
  kernels::SetNumThreads(threads);
  ApplyKernelsFlag(flags);
  const roofline::WeightBytes weights = roofline::WeightBytesOf(model.weights());
  const roofline::CostOptions options = RunCostOptions(model, KvDtype::kF32);  // explain's cache is FP32
  const double kv_per_token = 2.0 * c.num_layers * c.KvDim() * 4;

  // Warm-up on a throwaway cache: page faults on the mapped weights and thread start-up belong to no kernel.
  {
    ContiguousKvCache warm = model.NewKvCache(P + 1);
    model.Prefill(prompt, warm);
    model.Decode(prompt[0], warm);
  }
  // The same greedy run `repetitions` times: the tokens are the same every time, and each kernel keeps its
  // fastest time, so a run preempted by another process does not distort the story.
  roofline::KernelTimer prefill_timer(layer);
  std::vector<roofline::KernelTimer> step_timers(static_cast<std::size_t>(steps),
                                                 roofline::KernelTimer(layer));
  std::vector<int> generated;  // the token each step feeds
  int token = 0;               // what the last step produced
  ContiguousKvCache cache = model.NewKvCache(P + steps);
  for (int rep = 0; rep < repetitions; ++rep) {
    cache.Clear();
    generated.clear();
    roofline::KernelTimer timer(layer);
    model.set_observer(&timer);
    token = Argmax(model.Prefill(prompt, cache));
    prefill_timer.KeepFastest(timer);
    for (int s = 0; s < steps; ++s) {
      generated.push_back(token);
      roofline::KernelTimer step_timer(layer);
      model.set_observer(&step_timer);
      token = Argmax(model.Decode(token, cache));
      step_timers[s].KeepFastest(step_timer);
    }
    model.set_observer(nullptr);
  }
  const PassCost prefill = roofline::PrefillCost(c, weights, options, P);
  const PassCost first_step = roofline::DecodeStepCost(c, weights, options, 1, P);

  // A paragraph: its pieces joined, wrapped at kWidth columns.
  auto para = [&out](const std::string& text) { out << Wrap(text, kWidth); };
  const double params = roofline::ParameterCount(c);
  out << "plumb explain: " << path << "\n";
  para("model: " + c.model_type + ", " + std::to_string(c.num_layers) +
       " layers, d = " + std::to_string(c.hidden_size) + ", " + std::to_string(c.num_heads) +
       " query heads and " + std::to_string(c.num_kv_heads) + " KV heads of " + std::to_string(c.head_dim) +
       ", " + MlpDescription(c) + ", vocabulary " + std::to_string(c.vocab_size) + ", " + RopeDescription(c) +
       (c.sliding_window > 0 ? ", sliding window " + std::to_string(c.sliding_window) : ""));
  para("weights: " + StoredDtypeName(model) + ", " + Bytes(weights.Stored()) + " for " + Count(params) +
       " parameters (" + Fixed(weights.Stored() / params, 2) +
       " B each on average); activations and KV cache FP32");
  para("kernels: " + KernelsDescription());
  out << DescribeHost(host);
  para("A kernel needs at least bytes / " + Bytes(roof.bandwidth) + "/s and at least FLOPs / " +
       Count(roof.peak_flops) + "FLOP/s. Their ratio, the ridge, is " + Fixed(roof.Ridge(), 1) +
       " FLOP/B: below it a kernel waits on memory, above it on arithmetic. Times are each kernel's fastest "
       "of " +
       std::to_string(repetitions) + " runs.");
  std::string ids;
  for (int id : prompt) {
    ids += ' ';
    ids += std::to_string(id);
  }
  out << "\n";
  para("prompt: " + std::to_string(P) + " tokens:" + ids);
  out << "\n== 1. Prefill: all " << P << " prompt tokens in one pass ==\n\n";
  para("Every projection multiplies the " + std::to_string(P) + " token rows by a weight matrix (" +
       prefill.Kernel(ForwardKernel::kQProj).shape + "), so each weight byte read from memory serves " +
       std::to_string(P) + " tokens: the pass does " + Fixed(prefill.Intensity(), 1) +
       " FLOP per byte moved.");
  out << "\n";
  ExplainPass(out, prefill, prefill_timer, layer, c.IsLocalLayer(layer), roof);
  const double prefill_seconds = prefill_timer.PassSeconds();
  para("Prefill: " + std::to_string(P) + " tokens in " + Duration(prefill_seconds) + " = " +
       Fixed(P / prefill_seconds, 1) + " tok/s, " + Fixed(prefill.Flops() / prefill_seconds / 1e9, 2) +
       " GFLOP/s = MFU " + Fixed(100 * prefill.Flops() / prefill_seconds / roof.peak_flops, 1) +
       " % of the FP32 peak. Its first generated token: " + Piece(tm, generated[0]) + ".");

  out << "\n== 2. Decode: one token per pass ==\n\n";
  para("Step 1 feeds token " + Piece(tm, generated[0]) + " at position " + std::to_string(P) +
       ". Every projection is now one row times a weight matrix (" +
       first_step.Kernel(ForwardKernel::kQProj).shape + "): each weight byte read serves one token, " +
       Fixed(first_step.Intensity(), 2) + " FLOP per byte moved.");
  out << "\n";
  ExplainPass(out, first_step, step_timers[0], layer, c.IsLocalLayer(layer), roof);
  out << "\nEvery step, at its context:\n\n";
  double decode_seconds = 0, decode_bytes = 0;
  for (int s = 0; s < steps; ++s) {
    const PassCost cost = roofline::DecodeStepCost(c, weights, options, 1, P + s);
    const double seconds = step_timers[s].PassSeconds();
    decode_seconds += seconds;
    decode_bytes += cost.Bytes();
    out << Wrap("step " + std::to_string(s + 1) + ": in " + Piece(tm, generated[s]) + " at position " +
                    std::to_string(P + s) + ", out " + Piece(tm, s + 1 < steps ? generated[s + 1] : token) +
                    "; " + Bytes(cost.Bytes()) + " in " + Duration(seconds) + " = " +
                    Fixed(cost.Bytes() / seconds / 1e9, 2) + " GB/s, " + Fixed(1 / seconds, 1) + " tok/s",
                kWidth, 4, true);
  }
  para("Decode: " + Fixed(steps / decode_seconds, 1) + " tok/s, " +
       Fixed(decode_bytes / decode_seconds / 1e9, 2) + " GB/s = MBU " +
       Fixed(100 * decode_bytes / decode_seconds / roof.bandwidth, 1) + " % of the host's read bandwidth.");

  const int length = cache.length();
  const PassCost next = roofline::DecodeStepCost(c, weights, options, 1, length);
  out << "\n== 3. The KV cache ==\n\n";
  para("Each token leaves its key and value in every layer: 2 × " + std::to_string(c.num_layers) +
       " layers × " + std::to_string(c.num_kv_heads) + " KV heads × " + std::to_string(c.head_dim) +
       " × 4 B = " + Fixed(kv_per_token, 0) + " B per token. After the prefill the cache held " +
       std::to_string(P) + " positions (" + Bytes(P * kv_per_token) +
       "); each decode step added one. It now holds " + std::to_string(length) + " (" +
       Bytes(length * kv_per_token) + ").");
  out << "\n";
  para("The next step (position " + std::to_string(length) + ") will read " + Bytes(next.WeightBytes()) +
       " of weights (every matrix once, one embedding row) and " + Bytes(next.KvBytes()) +
       " of KV cache (all " + std::to_string(length + 1) +
       " positions, the new one included, and its write): " + Bytes(next.Bytes()) +
       " in all with the activations. At " + Bytes(roof.bandwidth) + "/s that takes at least " +
       Duration(next.Bytes() / roof.bandwidth) + " (" + Fixed(roof.bandwidth / next.Bytes(), 1) +
       " tok/s at most); its " + Count(next.Flops()) + "FLOP need only " +
       Duration(next.Flops() / roof.peak_flops) + " at peak. Each further token adds " + Bytes(kv_per_token) +
       " to every later step's reads: the KV cache outweighs the weights from " +
       std::to_string(static_cast<long long>(next.WeightBytes() / kv_per_token)) + " tokens on.");

  out << "\n== 4. The prefill/decode split ==\n\n";
  para("Prefill moved " + Bytes(prefill.Bytes()) + " for " + Count(prefill.Flops()) + "FLOP (" +
       Fixed(prefill.Intensity(), 1) + " FLOP/B, " +
       (roof.ComputeBound(prefill.Flops(), prefill.Bytes()) ? "above" : "below") + " the ridge of " +
       Fixed(roof.Ridge(), 1) + "); a decode step moves " + Bytes(first_step.Bytes()) + " for " +
       Count(first_step.Flops()) + "FLOP (" + Fixed(first_step.Intensity(), 2) +
       " FLOP/B). The weights are the same bytes in both; prefill spreads them over " + std::to_string(P) +
       " tokens, decode over one. So a long prefill is held by arithmetic (MFU is its figure of merit) and "
       "decode "
       "by memory bandwidth (MBU is). Here prefill cost " +
       Duration(prefill_seconds / P) + " a token, decode " + Duration(decode_seconds / steps) + " a token.");
  return 0;
}

}  // namespace plumb::cli
