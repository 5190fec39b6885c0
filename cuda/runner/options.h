// plumb_cuda_runner's plain C++ parts, header-only so that tests/cuda/ can check them on a machine without
// CUDA: the command line, which of a suite's cases the harness runs (and why it skips the others), and the
// form in which it judges an output.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/fixtures/case_pattern.h"
#include "plumb/fixtures/suite_reader.h"

namespace plumb::cuda {

using fixtures::CasePattern;

inline constexpr const char* kRunnerUsage =
    "usage: plumb_cuda_runner --suite DIR --results DIR [--cases REGEX] [--precision fp32|bf16] [--models "
    "DIR]\n"
    "       plumb_cuda_runner --suite DIR --check-only [--cases REGEX] [--precision fp32|bf16] [--models "
    "DIR]\n"
    "  runs every case of the fixture suite whose op the CUDA harness implements (and whose name the POSIX\n"
    "  extended regular expression REGEX matches, anywhere in it), writes DIR/<case>.safetensors, then\n"
    "  checks them against the suite.\n"
    "  --check-only: no GPU needed; reads every selected case as the runner would (each tensor's dtype and\n"
    "  shape against its params, every index), checks the outputs it would write against the suite's, and\n"
    "  runs no kernel: the harness's reading of docs/fixtures.md held against the suite itself.\n"
    "  --precision bf16: the kernels round what a BF16 engine rounds (every matmul's, attention's, "
    "RMSNorm's\n"
    "  and RoPE's inputs and outputs; FP32 sums) and are judged with the allowances bf16_activations and\n"
    "  bf16_outputs (docs/fixtures.md \"Allowances\"); fp32 (the default) declares nothing.\n"
    "  --models DIR: where the model cases (layer, end_to_end, kv_handoff) find the GGUF file their params\n"
    "  name (default: models); a case whose file is not there is skipped, saying so.\n"
    "  exit status: 0 every check passed; 1 a check failed or a case could not run; 2 no CUDA GPU;\n"
    "  3 bad arguments or an unreadable suite.";

struct RunnerOptions {
  std::string suite;
  std::string results;
  std::string cases;        // a POSIX extended regex searched in each case name; empty selects every case
  bool check_only = false;  // read and check the cases, run nothing (no GPU needed)
  std::string precision = "fp32";  // "fp32" or "bf16" (kernels.h Precision)
  std::string models = "models";   // the directory of the model cases' GGUF files

  // The allowances the runner declares when it judges: what --precision rounds.
  std::vector<std::string> Allowances() const {
    if (precision == "bf16") return {"bf16_activations", "bf16_outputs"};
    return {};
  }
};

// Parses argv[1..argc). Throws plumb::Error naming the offending argument.
inline RunnerOptions ParseRunnerOptions(int argc, const char* const* argv) {
  RunnerOptions options;
  std::set<std::string> seen;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--check-only") {
      if (!seen.insert(arg).second) throw MakeError(arg, " given twice");
      options.check_only = true;
      continue;
    }
    std::string* target = arg == "--suite"       ? &options.suite
                          : arg == "--results"   ? &options.results
                          : arg == "--cases"     ? &options.cases
                          : arg == "--precision" ? &options.precision
                          : arg == "--models"    ? &options.models
                                                 : nullptr;
    if (target == nullptr) throw MakeError("unknown argument \"", arg, "\"");
    if (i + 1 >= argc) throw MakeError(arg, " needs a value");
    if (!seen.insert(arg).second) throw MakeError(arg, " given twice");
    *target = argv[++i];
  }
  if (options.suite.empty()) throw MakeError("--suite DIR is required (and must not be empty)");
  if (options.results.empty() && !options.check_only)
    throw MakeError("--results DIR is required (and must not be empty)");
  if (options.models.empty()) throw MakeError("--models DIR must not be empty");
  if (options.precision != "fp32" && options.precision != "bf16")
    throw MakeError("--precision must be fp32 or bf16, not \"", options.precision, "\"");
  (void)CasePattern(options.cases);  // a bad pattern is an argument error, before anything runs
  return options;
}

// Why the harness does not run case c ("" if it does): an op it does not implement, or a parameter value
// (weight dtype, KV dtype, layout, pairing) its kernels do not cover.
inline std::string UnsupportedReason(const fixtures::Case& c) {
  auto param = [&](const char* key) {
    return c.params.contains(key) && c.params[key].is_string() ? c.params[key].get<std::string>() : "";
  };
  auto one_of = [](const std::string& value, const std::set<std::string>& allowed) {
    return allowed.count(value) != 0;
  };
  if (c.op == "gemv" || c.op == "gemm") {
    const std::string dtype = param("weight_dtype");
    if (!one_of(dtype,
                {"f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2", "int4_sym", "int4_asym", "gptq", "awq", "q4_0",
                 "q4_1", "q8_0", "mxfp4", "nvfp4", "mxfp8_e4m3", "mxfp8_e5m2", "fp8_block128"}))
      return "weight_dtype \"" + dtype + "\" not implemented";
    return "";
  }
  if (c.op == "rmsnorm" || c.op == "softmax" || c.op == "swiglu") return "";
  if (c.op == "kv_quant") {
    const std::string format = param("format");
    if (!one_of(format, {"fp8_e4m3", "fp8_e5m2"})) return "format \"" + format + "\" not implemented";
    return "";
  }
  if (c.op == "rope") {
    const std::string pairing = param("pairing");
    if (!one_of(pairing, {"rotate_half", "interleaved"}))
      return "pairing \"" + pairing + "\" not implemented";
    return "";
  }
  if (c.op == "attention_decode" || c.op == "reshape_and_cache") {
    const std::string layout = param("layout"), kv_dtype = param("kv_dtype");
    if (!one_of(layout, {"nhd", "vllm"})) return "layout \"" + layout + "\" not implemented";
    if (!one_of(kv_dtype, {"f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2"}))
      return "kv_dtype \"" + kv_dtype + "\" not implemented";
    return "";
  }
  if (c.op == "attention_prefill") {
    const std::string layout = param("layout"), kv_dtype = param("kv_dtype");
    if (!one_of(layout, {"nhd", "contiguous"})) return "layout \"" + layout + "\" not implemented";
    if (!one_of(kv_dtype, {"f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2"}))
      return "kv_dtype \"" + kv_dtype + "\" not implemented";
    return "";
  }
  if (c.op == "sampling" || c.op == "speculative_verify") return "";
  if (c.op == "moe_route") {
    const std::string routing = param("routing");
    if (!one_of(routing, {"softmax_topk", "topk_softmax", "sigmoid_group_topk"}))
      return "routing \"" + routing + "\" not implemented";
    return "";
  }
  if (c.op == "moe_experts") {
    const std::string dtype = param("weight_dtype");
    if (!one_of(dtype, {"f32", "bf16", "mxfp4"})) return "weight_dtype \"" + dtype + "\" not implemented";
    return "";
  }
  if (c.op == "moe_align_block_size") return "";
  if (c.op == "mla_decode" || c.op == "mla_prefill") return "";
  // The model cases (model.cpp): a Llama forward pass over the case's GGUF file (its tensor types are
  // checked when it is read: a type the kernels do not decode is an error, not a skip) or tp_layer's shards.
  if (c.op == "layer" || c.op == "end_to_end") return "";
  if (c.op == "kv_handoff") {
    const std::string kv_dtype = param("kv_dtype");
    if (!one_of(kv_dtype, {"f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2"}))
      return "kv_dtype \"" + kv_dtype + "\" not implemented";
    return "";
  }
  if (c.op == "tp_layer") {
    auto on = [&](const char* key) { return c.params.contains(key) && c.params[key] == true; };
    if (on("qk_norm") || on("sandwich_norm") ||
        (!param("mlp_activation").empty() && param("mlp_activation") != "silu"))
      return "Gemma 3's layer (qk_norm, sandwich_norm, gelu_tanh) not implemented";
    return "";
  }
  return "op " + c.op + " not implemented";
}

// The ops whose cases read a model file (docs/fixtures.md "layer", "end_to_end", "kv_handoff"): params.model,
// a file name in the --models directory. tp_layer's real-model cases carry their shards and need none.
inline bool ReadsModelFile(const fixtures::Case& c) {
  return c.op == "layer" || c.op == "end_to_end" || c.op == "kv_handoff";
}

// Why case c cannot run here although the harness implements it ("" if it can): its model file is not in
// `models_dir`. A fixture that names no model is left to run, and fail there with its own error.
inline std::string MissingModelReason(const fixtures::Case& c, const std::filesystem::path& models_dir) {
  if (!ReadsModelFile(c) || !c.params.contains("model") || !c.params["model"].is_string()) return "";
  const std::filesystem::path file = models_dir / c.params["model"].get<std::string>();
  std::error_code ec;
  if (std::filesystem::is_regular_file(file, ec)) return "";
  return "model " + file.string() +
         " not found (the suite manifest's model.fetch says how to get it, --models DIR where it is)";
}

struct CaseSelection {
  std::vector<const fixtures::Case*> run;                              // in manifest order
  std::vector<std::pair<const fixtures::Case*, std::string>> skipped;  // selected by name, not implemented
  int not_matched = 0;                                                 // left out by --cases
};

// With models_dir, a model case whose file is not there is skipped too (MissingModelReason).
inline CaseSelection SelectCases(const std::vector<fixtures::Case>& cases, const std::string& pattern,
                                 const std::optional<std::filesystem::path>& models_dir = std::nullopt) {
  CaseSelection selection;
  const CasePattern re(pattern);
  for (const fixtures::Case& c : cases) {
    if (!re.Matches(c.name)) {
      ++selection.not_matched;
      continue;
    }
    std::string reason = UnsupportedReason(c);
    if (reason.empty() && models_dir) reason = MissingModelReason(c, *models_dir);
    if (reason.empty()) {
      selection.run.push_back(&c);
    } else {
      selection.skipped.emplace_back(&c, std::move(reason));
    }
  }
  return selection;
}

// Sorts each expert's segment of moe_align_block_size's `sorted_token_ids` in place, the segments delimited
// by `expert_ids` (runs of equal ids, block_size entries a block), as verify does (src/fixtures/moe_align.h
// SortWithinExpertSegments, which the runner does not link): the order of the flat indices inside a segment
// is the engine's own (vLLM's kernel and this harness's place them with atomics), and the suite's segments
// ascend, their pads (tokens·top_k, larger than any index) last. An array whose size is not
// expert_ids.size()·block_size is left as it is (its shape differs from the suite's anyway).
inline void SortWithinExpertSegments(const std::vector<std::int32_t>& expert_ids, std::int64_t block_size,
                                     std::vector<std::int32_t>& sorted_token_ids) {
  if (block_size < 1 || sorted_token_ids.size() != expert_ids.size() * static_cast<std::size_t>(block_size))
    return;
  const auto block = static_cast<std::ptrdiff_t>(block_size);
  for (std::size_t b = 0; b < expert_ids.size();) {
    std::size_t end = b + 1;
    while (end < expert_ids.size() && expert_ids[end] == expert_ids[b]) ++end;
    std::sort(sorted_token_ids.begin() + static_cast<std::ptrdiff_t>(b) * block,
              sorted_token_ids.begin() + static_cast<std::ptrdiff_t>(end) * block);
    b = end;
  }
}

// Output `output` of case c in the form the runner judges it (docs/fixtures.md "Checks"): as it is, except
// moe_align_block_size's sorted_token_ids, each segment sorted, the segments delimited by the case's own
// (expected) `expected_expert_ids` (docs/fixtures.md "moe_align_block_size": a harness that judges with
// Compare directly sorts them itself). Any other dtype, or a case without an integer block_size, as it is.
inline fixtures::Tensor InJudgedForm(const fixtures::Case& c, const std::string& output,
                                     const fixtures::Tensor& expected_expert_ids, fixtures::Tensor actual) {
  if (c.op != "moe_align_block_size" || output != "sorted_token_ids" || actual.dtype != "I32" ||
      expected_expert_ids.dtype != "I32" || !c.params.contains("block_size") ||
      !c.params["block_size"].is_number_integer())
    return actual;
  std::vector<std::int32_t> ids = actual.As<std::int32_t>();
  SortWithinExpertSegments(expected_expert_ids.As<std::int32_t>(), c.params["block_size"].get<std::int64_t>(),
                           ids);
  return fixtures::Tensor::From<std::int32_t>("I32", actual.shape, ids);
}

}  // namespace plumb::cuda
