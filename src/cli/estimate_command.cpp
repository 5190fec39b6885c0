// plumb estimate: the roofline of any model on any machine, from its shapes and the machine's datasheet
// figures alone (roofline/presets.h). The formulas and the JSON schema: docs/roofline.md.
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "plumb/cli/commands.h"
#include "plumb/core/error.h"
#include "plumb/formats/kv_dtype.h"
#include "plumb/roofline/json_writer.h"
#include "plumb/roofline/presets.h"
#include "roofline_common.h"
#include "speculative_estimate.h"

namespace plumb::cli {
namespace {

constexpr const char* kEstimateUsage =
    "usage: plumb estimate --model-card NAME|config.json[,..] --hardware NAME [--dtype D] [--kv-dtype K]\n"
    "                      [--batch 1,8,..] [--context 4096,..] [--tp N] [--json]\n"
    "                      [--acceptance A --draft-tokens K --draft-cost C|--draft-card NAME]\n"
    "Lower bounds from the roofline: weights and KV memory, KV bytes per token, the time of one decode step\n"
    "(bytes / bandwidth or FLOPs / peak, whichever is longer) and the tok/s it allows, the time of a "
    "prefill\n"
    "of `context` tokens, the batch at which decode turns compute-bound and how many sequences of a context\n"
    "fit in memory. --tp N splits weights, KV, FLOPs and bandwidth over N devices (communication ignored).\n"
    "Model cards: llama-3-8b, llama-3-70b, llama-3.1-8b, llama-3.2-1b, llama-3.2-3b, mistral-7b,\n"
    "qwen2.5-72b, smollm2-135m, gemma-3-270m,\n"
    "deepseek-v3, mixtral-8x7b, or a config.json path; several, comma-separated, are estimated one after\n"
    "the other on the same hardware, then side by side (deepseek-v3,llama-3-70b: a MoE beside a dense 70B).\n"
    "Hardware: h100-sxm, h200, b200, or host (measured now: streaming read and FP32 FMA probes).\n"
    "--acceptance adds speculative decoding's expected tokens per target step and speedup.\n\n"
    "flags:\n";

Flags EstimateFlags() {
  Flags f;
  f.AddValue("model-card", "NAME,..", "model presets or Hugging Face config.json files, comma-separated");
  f.AddValue("hardware", "NAME", "h100-sxm, h200, b200 or host");
  f.AddValue("dtype", "D", "weight dtype (f16, bf16, fp8, int8, int4, int4-sym-g128, q4_k, ...)", "f16");
  f.AddValue("kv-dtype", "K", "KV cache dtype: f32, f16, bf16, fp8-e4m3, fp8-e5m2", "f16");
  f.AddValue("batch", "B,..", "sequences per decode step, one row each", "1,8,32,128");
  f.AddValue("context", "T,..", "tokens each sequence holds (and the prompt length of the prefill)", "4096");
  f.AddValue("tp", "N", "tensor-parallel devices", "1");
  f.AddValue("memory-utilization", "F", "fraction of each device's memory for weights and KV (vLLM's)",
             "0.9");
  AddHardwareOverrideFlags(f);
  AddHostProbeFlags(f, "1024");
  AddSpeculativeFlags(f);
  f.AddSwitch("json", "print JSON (docs/roofline.md \"JSON\") instead of tables");
  return f;
}

// The --model-card list, split at commas.
std::vector<std::string> CardNames(const Flags& flags) {
  std::vector<std::string> names;
  const std::string list = flags.String("model-card");
  for (std::size_t begin = 0;;) {
    const std::size_t comma = list.find(',', begin);
    names.push_back(list.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin));
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  return names;
}

// Everything but the model card (ReadSettings' caller sets config).
roofline::EstimateSettings ReadSettings(const Flags& flags, std::ostream& err) {
  if (!flags.IsSet("model-card")) throw MakeError("--model-card is required (see plumb estimate --help)");
  if (!flags.IsSet("hardware")) throw MakeError("--hardware is required (see plumb estimate --help)");
  roofline::EstimateSettings s;
  s.dtype = roofline::ParseWeightDtype(flags.String("dtype"));
  s.kv_element_bytes = static_cast<double>(KvDtypeBytes(ParseKvDtype(flags.String("kv-dtype"))));
  s.tp = flags.Int("tp", 1, 4096);
  s.memory_utilization = ParsePositive(flags.String("memory-utilization"), "--memory-utilization");
  if (s.memory_utilization > 1) {
    throw MakeError("--memory-utilization: expected a fraction in (0, 1], got ", s.memory_utilization);
  }
  s.batches = flags.IntList("batch");
  s.contexts = flags.IntList("context");
  for (int b : s.batches) {
    if (b < 1 || b > 1 << 20) throw MakeError("--batch: every batch must be in [1, 1048576], got ", b);
  }
  for (int t : s.contexts) {
    if (t < 1 || t > 1 << 24) throw MakeError("--context: every context must be in [1, 16777216], got ", t);
  }
  if (flags.String("hardware") == "host") {
    const HostMeasurement host = MeasureHost(flags, err);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    s.hardware = {"host", host.peak_flops, host.roof().bandwidth, static_cast<double>(pages) * page,
                  "measured now: FP32 FMA (" + host.isa + ") and streaming read on " +
                      std::to_string(host.threads) + " threads, physical memory"};
    s.vector_bytes = 4;  // plumb's own norms and biases are FP32
  } else {
    s.hardware = roofline::HardwarePreset(flags.String("hardware"));
  }
  ApplyHardwareOverrides(flags, s.hardware);
  return s;
}

void PrintJson(std::ostream& out, const Flags& flags, const std::string& card,
               const roofline::EstimateSettings& s, const roofline::Estimate& e,
               const std::optional<SpeculativeEstimate>& speculative) {
  roofline::JsonWriter j;
  j.BeginObject();
  j.Key("schema").Value("plumb.estimate").Key("schema_version").Value(1);
  j.Key("model").BeginObject();
  j.Key("card").Value(card).Key("parameters").Value(e.parameters);
  j.Key("active_parameters").Value(e.active_parameters);
  j.Key("dtype").Value(s.dtype.name).Key("bytes_per_parameter").Value(e.bytes_per_parameter);
  j.Key("weight_bytes").Value(e.weight_bytes);
  j.Key("kv_dtype").Value(flags.String("kv-dtype")).Key("kv_bytes_per_token").Value(e.kv_bytes_per_token);
  j.Key("layers").Value(s.config.num_layers).Key("hidden_size").Value(s.config.hidden_size);
  j.Key("kv_heads").Value(s.config.num_kv_heads).Key("head_dim").Value(s.config.head_dim);
  j.EndObject();
  j.Key("hardware").BeginObject();
  j.Key("name").Value(s.hardware.name).Key("peak_flops").Value(s.hardware.peak_flops);
  j.Key("bandwidth").Value(s.hardware.bandwidth).Key("memory_bytes").Value(s.hardware.memory_bytes);
  j.Key("source").Value(s.hardware.source).Key("tp").Value(s.tp);
  j.Key("memory_utilization").Value(s.memory_utilization).Key("usable_memory_bytes").Value(e.memory_bytes);
  j.Key("ridge").Value(e.ridge).Key("batch1_intensity").Value(e.batch1_intensity);
  j.EndObject();
  j.Key("contexts").BeginArray();
  for (const roofline::ContextEstimate& c : e.contexts) {
    j.BeginObject().Key("context").Value(c.context);
    j.Key("kv_bytes_per_sequence").Value(c.kv_bytes_per_sequence);
    j.Key("prefill_flops").Value(c.prefill_flops).Key("prefill_seconds").Value(c.prefill_seconds);
    j.Key("compute_bound_batch").Value(c.compute_bound_batch).Key("max_sequences").Value(c.max_sequences);
    j.EndObject();
  }
  j.EndArray();
  j.Key("decode").BeginArray();
  for (const roofline::EstimateRow& r : e.rows) {
    j.BeginObject().Key("context").Value(r.context).Key("batch").Value(r.batch);
    j.Key("step_bytes").Value(r.step_bytes).Key("step_flops").Value(r.step_flops);
    j.Key("step_seconds").Value(r.step_seconds).Key("tokens_per_second").Value(r.tokens_per_second);
    j.Key("bound").Value(r.compute_bound ? "compute" : "bandwidth");
    j.Key("kv_bytes").Value(r.kv_bytes).Key("fits").Value(r.fits);
    j.EndObject();
  }
  j.EndArray();
  if (speculative) WriteSpeculativeJson(j, *speculative);
  j.EndObject();
  out << j.str();
}

// A MoE or MLA model's extra lines: what the cost model assumes about routing and which attention FLOPs it
// counts (docs/roofline.md "Mixture of experts and latent attention").
void PrintMoeAndMla(std::ostream& out, const roofline::EstimateSettings& s) {
  const ModelConfig& c = s.config;
  if (c.IsMoe()) {
    out << "experts:  " << c.MoeLayerCount() << " of " << c.num_layers << " layers MoE: " << c.num_experts
        << " routed experts of " << c.moe_intermediate_size << ", " << c.experts_per_token << " per token";
    if (c.num_shared_experts > 0) out << ", + " << c.num_shared_experts << " shared";
    out << " | assumed: rows route independently and uniformly, so a step of B rows reads E·(1 − (1 − "
           "k/E)^B) "
           "routed experts a layer (";
    for (int b : s.batches) {
      out << (b == s.batches.front() ? "" : ", ") << "B " << b << ": "
          << Fixed(roofline::ExpertsTouched(c.num_experts, c.experts_per_token, b), 1);
    }
    out << ")\n";
  }
  if (c.IsMla()) {
    out << "MLA:      KV = (kv_lora_rank " << c.kv_lora_rank << " + rope " << c.qk_rope_head_dim << ") × "
        << c.num_layers << " layers per token | attention FLOPs in the absorbed form: 2·(2·" << c.kv_lora_rank
        << " + " << c.qk_rope_head_dim << ") per head and key\n";
  }
}

void PrintTables(std::ostream& out, const Flags& flags, const std::string& card,
                 const roofline::EstimateSettings& s, const roofline::Estimate& e) {
  const roofline::Hardware& hw = s.hardware;
  const bool moe = s.config.IsMoe();
  out << "plumb estimate: " << card << " on " << hw.name << (s.tp > 1 ? " × " + std::to_string(s.tp) : "")
      << " | weights " << s.dtype.name << " | KV " << flags.String("kv-dtype") << "\n"
      << "model:    " << Count(e.parameters) << " parameters"
      << (moe ? ", " + Count(e.active_parameters) + " active per token" : "") << " | weights "
      << Bytes(e.weight_bytes) << " (" << Fixed(e.bytes_per_parameter, 4) << " B/parameter) | KV "
      << Fixed(e.kv_bytes_per_token, 0) << " B/token | " << RopeDescription(s.config) << "\n"
      << "hardware: " << Count(hw.peak_flops) << "FLOP/s, " << Bytes(hw.bandwidth) << "/s, "
      << Bytes(hw.memory_bytes) << " per device | " << hw.source << "\n"
      << "roofline: ridge " << Fixed(e.ridge, 1) << " FLOP/B | a batch-1 decode step does "
      << Fixed(e.batch1_intensity, 2) << " FLOP/B (2 / " << Fixed(e.bytes_per_parameter, 4)
      << " B per parameter): bandwidth-bound\n"
      << "memory:   " << Bytes(e.memory_bytes) << " usable (" << s.tp << " × " << Bytes(hw.memory_bytes)
      << " × " << Fixed(s.memory_utilization, 2) << "), weights " << Bytes(e.weight_bytes)
      << (e.weight_bytes > e.memory_bytes ? ": the weights do not fit" : "") << "\n";
  PrintMoeAndMla(out, s);
  out << "\n";
  out << "| context | KV per sequence | prefill FLOPs | prefill ≥ | compute-bound from batch | sequences "
         "that fit "
         "|\n|---|---|---|---|---|---|\n";
  for (const roofline::ContextEstimate& c : e.contexts) {
    out << "| " << c.context << " | " << Bytes(c.kv_bytes_per_sequence) << " | " << Count(c.prefill_flops)
        << " | " << Duration(c.prefill_seconds) << " | "
        << (c.compute_bound_batch < 0 ? std::string("never") : std::to_string(c.compute_bound_batch)) << " | "
        << c.max_sequences << " |\n";
  }
  out << "\n| context | batch | bytes/step | FLOPs/step | FLOP/B | step ≥ | tok/s ≤ (all sequences) | bound "
         "| "
         "fits |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const roofline::EstimateRow& r : e.rows) {
    out << "| " << r.context << " | " << r.batch << " | " << Bytes(r.step_bytes) << " | "
        << Count(r.step_flops) << " | " << Fixed(r.step_flops / r.step_bytes, 1) << " | "
        << Duration(r.step_seconds) << " | " << Fixed(r.tokens_per_second, 1) << " | "
        << (r.compute_bound ? "compute" : "bandwidth") << " | " << (r.fits ? "yes" : "no") << " |\n";
  }
}

// Several cards side by side: each one's decode rows at the first context.
void PrintComparison(std::ostream& out, const std::vector<std::string>& cards,
                     const std::vector<roofline::EstimateSettings>& settings,
                     const std::vector<roofline::Estimate>& estimates) {
  out << "\nside by side at context " << estimates.front().contexts.front().context << " on "
      << settings.front().hardware.name << ":\n\n"
      << "| model card | parameters | active | weights | KV/token | batch | step ≥ | tok/s ≤ | bound | fits "
         "|\n"
         "|---|---|---|---|---|---|---|---|---|---|\n";
  for (std::size_t i = 0; i < cards.size(); ++i) {
    const roofline::Estimate& e = estimates[i];
    for (const roofline::EstimateRow& r : e.rows) {
      if (r.context != e.contexts.front().context) continue;
      out << "| " << cards[i] << " | " << Count(e.parameters) << " | " << Count(e.active_parameters) << " | "
          << Bytes(e.weight_bytes) << " | " << Bytes(e.kv_bytes_per_token) << " | " << r.batch << " | "
          << Duration(r.step_seconds) << " | " << Fixed(r.tokens_per_second, 1) << " | "
          << (r.compute_bound ? "compute" : "bandwidth") << " | " << (r.fits ? "yes" : "no") << " |\n";
    }
  }
}

}  // namespace

int RunEstimate(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  Flags flags = EstimateFlags();
  if (!flags.ParseUnlessHelp(args, kEstimateUsage, out)) return 0;
  const roofline::EstimateSettings common = ReadSettings(flags, err);
  const std::optional<SpeculativeRequest> speculative_request = ReadSpeculativeFlags(flags);
  const std::vector<std::string> cards = CardNames(flags);
  if (cards.size() > 1 && flags.Switch("json")) {
    throw MakeError("--json: one model card at a time (got ", cards.size(), ": ", flags.String("model-card"),
                    ")");
  }
  std::vector<roofline::EstimateSettings> settings;
  std::vector<roofline::Estimate> estimates;
  std::vector<std::optional<SpeculativeEstimate>> speculative;
  for (const std::string& card : cards) {  // every card read before anything is printed
    settings.push_back(common);
    settings.back().config = roofline::ModelCard(card);
    estimates.push_back(roofline::MakeEstimate(settings.back()));
    speculative.push_back(speculative_request
                              ? std::optional(EstimateSpeculative(*speculative_request, settings.back()))
                              : std::nullopt);
  }
  for (std::size_t i = 0; i < cards.size(); ++i) {
    if (flags.Switch("json")) {
      PrintJson(out, flags, cards[i], settings[i], estimates[i], speculative[i]);
    } else {
      if (i > 0) out << "\n";
      PrintTables(out, flags, cards[i], settings[i], estimates[i]);
      if (speculative[i]) {
        out << "\n";
        PrintSpeculative(out, *speculative[i]);
      }
    }
  }
  if (cards.size() > 1) PrintComparison(out, cards, settings, estimates);
  return 0;
}

}  // namespace plumb::cli
