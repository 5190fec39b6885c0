// Model-card and hardware presets for `plumb estimate`, and the estimate itself: what a model needs and
// how fast it can at best decode and prefill on a machine, from the cost model (roofline/cost_model.h).
// Every preset value and its source is in docs/roofline.md ("Presets").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "plumb/model/config.h"
#include "plumb/roofline/cost_model.h"

namespace plumb::roofline {

// "llama-3-8b", "llama-3-70b", "mistral-7b", "qwen2.5-72b", "smollm2-135m", "gemma-3-270m", "deepseek-v3"
// (MoE and MLA), "mixtral-8x7b" (MoE) (case-insensitive), or a path to a Hugging Face config.json (its MoE
// and MLA keys read too). Throws plumb::Error naming the value and the choices.
ModelConfig ModelCard(std::string_view name_or_path);
std::vector<std::string> ModelCardNames();

struct Hardware {
  std::string name;
  double peak_flops = 0;    // FLOP/s of the compute dtype (dense FP16/BF16 tensor cores on GPUs, FP32 FMA
                            // on the host)
  double bandwidth = 0;     // memory bytes/s
  double memory_bytes = 0;  // memory of one device
  std::string source;       // where the figures come from

  Roof roof() const { return {peak_flops, bandwidth}; }
};

// "h100-sxm", "h200", "b200" (case-insensitive); "host" is not a preset (it is measured: roofline/
// host_probe.h). Throws plumb::Error naming the value and the choices.
Hardware HardwarePreset(std::string_view name);
std::vector<std::string> HardwareNames();  // the presets and "host"

struct EstimateSettings {
  ModelConfig config;
  WeightDtype dtype;
  double kv_element_bytes = 2;
  double vector_bytes = 2;  // norms and biases, as a 16-bit checkpoint stores them
  Hardware hardware;
  int tp = 1;                       // tensor parallel: weights, KV, FLOPs and bandwidth split over tp devices
  double memory_utilization = 0.9;  // fraction of each device's memory given to weights and KV (vLLM's
                                    // gpu_memory_utilization)
  std::vector<int> batches;
  std::vector<int> contexts;
};

struct EstimateRow {
  int batch = 0;
  int context = 0;
  double step_bytes = 0;  // one decode step, all devices together
  double step_flops = 0;
  double step_seconds = 0;  // lower bound: max(bytes / (tp · bandwidth), FLOPs / (tp · peak))
  bool compute_bound = false;
  double tokens_per_second = 0;  // all sequences: batch / step_seconds
  double kv_bytes = 0;           // the batch's KV at `context`
  bool fits = false;             // weights + kv_bytes within tp · memory · memory_utilization
};

struct ContextEstimate {
  int context = 0;
  double kv_bytes_per_sequence = 0;
  double prefill_flops = 0;           // a prompt of `context` tokens
  double prefill_seconds = 0;         // lower bound on `tp` devices
  long long compute_bound_batch = 0;  // -1: never (ComputeBoundBatch)
  long long max_sequences = 0;        // sequences of `context` tokens that fit beside the weights
};

struct Estimate {
  double parameters = 0;
  double active_parameters = 0;    // ActiveParameterCount: what one token multiplies by (MoE: k experts)
  double weight_bytes = 0;         // stored
  double bytes_per_parameter = 0;  // of the dtype
  double kv_bytes_per_token = 0;  // KvBytesPerToken: 2 · layers · kv_heads · head_dim · kv element bytes,
                                  // MLA layers · (kv_lora_rank + qk_rope_head_dim) · kv element bytes
  double ridge = 0;               // FLOP/byte
  double batch1_intensity = 0;    // FLOP/byte of a batch-1 decode step's matrix products: 2 / bytes per
                                  // parameter
  double memory_bytes = 0;        // tp · memory · utilization
  std::vector<ContextEstimate> contexts;
  std::vector<EstimateRow> rows;  // every (context, batch), contexts outer
};

// Throws plumb::Error for tp < 1, an empty batch or context list, or a non-positive hardware figure.
Estimate MakeEstimate(const EstimateSettings& settings);

}  // namespace plumb::roofline
