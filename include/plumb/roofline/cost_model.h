// The roofline cost model: the bytes every kernel of a forward pass moves and the FLOPs it does, from a
// model's shapes and the dtypes its weights and KV cache are stored in. A kernel cannot run faster than its
// bytes ÷ the memory bandwidth nor than its FLOPs ÷ the peak arithmetic rate; decode at small batch is held
// by the first (every weight is read for one token per sequence), prefill by the second (every weight read
// serves P tokens). The formulas, kernel by kernel, are in docs/roofline.md ("The cost model").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "plumb/formats/ggml_types.h"
#include "plumb/formats/int4.h"
#include "plumb/model/config.h"
#include "plumb/model/forward_observer.h"
#include "plumb/model/weights.h"

namespace plumb::roofline {

// How weight matrices are stored, for the model: the bytes of a [rows][cols] matrix, overheads included
// (GGUF block scales, INT4 group scales and zero points, FP8 per-row and per-block scales). docs/roofline.md
// "Weight dtypes" lists every name and its bytes per parameter.
struct WeightDtype {
  enum class Kind { kPlain, kGgml, kFp8, kInt4, kMicroscaled, kBlockFp8 };
  std::string name;  // as given on the command line, canonical spelling ("f16", "q4_k", ...)
  Kind kind = Kind::kPlain;
  double element_bytes = 4;       // kPlain: bytes per element with no overhead (4, 2, 1, 0.5)
  GgmlType ggml = GgmlType::F32;  // kGgml
  Int4Params int4;                // kInt4
  MicroscalingScheme mx = MicroscalingScheme::kMxfp4;  // kMicroscaled

  // Bytes of one stored [rows][cols] matrix (a GGUF row is whole blocks; INT4 and FP8 add their scales).
  double MatrixBytes(int rows, int cols) const;
  // Bytes per parameter of a long row: the figure "2 / bytes per parameter" is the batch-1 intensity of.
  double BytesPerParameter() const;
};

// "f32", "f16" (also "fp16"), "bf16", "fp8-e4m3" (also "fp8"), "fp8-e5m2" (a per-row FP32 scale each),
// "int8" and "int4" (ideal: 1 and ½ byte, no scales: the textbook figures), the packed INT4 formats
// ("int4-sym-g32", ..., formats/int4.h), the microscaled ones ("mxfp4", "nvfp4", "mxfp8-e4m3", "mxfp8-e5m2":
// formats/microscaling.h; "mxfp4" is also GGUF's type 39, the same bytes), "fp8-block128" (an FP32 scale per
// 128 × 128 block: formats/block_fp8.h) and every GGUF block type by its
// lower-case name ("q4_0", "q4_k", "iq4_xs", ...). Throws plumb::Error naming the value and the choices.
WeightDtype ParseWeightDtype(std::string_view name);
std::string WeightDtypeChoices();  // for --help and errors

// Stored bytes of every weight kind, summed over the layers.
struct WeightBytes {
  double q = 0, k = 0, v = 0, o = 0;   // attention projections (all layers)
  double gate = 0, up = 0, down = 0;   // MLP matrices (all layers)
  double qkv_bias = 0;                 // Q/K/V biases (all layers; 0 without)
  double attn_norm = 0, mlp_norm = 0;  // RMSNorm weights (all layers)
  double qk_norm = 0, post_norm = 0;   // Gemma 3's q/k head norms and post-block norms (all layers)
  double final_norm = 0;
  double embedding = 0;      // the whole [V][d] token embedding
  double embedding_row = 0;  // one row of it: what looking up a token reads
  double lm_head = 0;        // the [V][d] head; the embedding's bytes when tied
  bool tied = false;
  // Mixture of experts (0 for a dense model): gate, up and down above hold every expert of every layer and
  // the dense layers' MLPs; these are one expert's matrices in one layer, and the routers of all MoE layers.
  double expert_gate = 0, expert_up = 0, expert_down = 0;
  double router = 0;

  // Every byte stored once (a tied head is the embedding).
  double Stored() const;
};

// Bytes of a model of `config` stored in `dtype` (every matrix, embedding and head included), with norm and
// bias vectors of `vector_bytes` per element (plumb keeps them FP32; GPU checkpoints store them as 16-bit).
WeightBytes WeightBytesFor(const ModelConfig& config, const WeightDtype& dtype, double vector_bytes = 4);
// The bytes of a loaded model, matrix by matrix (WeightMatrix::Bytes), so mixed GGUF quantizations count
// exactly.
WeightBytes WeightBytesOf(const ModelWeights& weights);

// Parameters of the model's matrices (embedding and an untied head included; norms and biases too; every
// expert and router of a MoE model).
double ParameterCount(const ModelConfig& config);
// The parameters one token's forward pass multiplies by: ParameterCount less the experts it is not routed
// to and less an untied token embedding (a lookup reads one row of it), as DeepSeek counts its 37B.
double ActiveParameterCount(const ModelConfig& config);

// The expected number of distinct experts, of `experts`, that `tokens` tokens each choosing `chosen`
// touch, if every token routes independently and uniformly: E·(1 − (1 − k/E)^B). k at B = 1, → E as B
// grows. What a MoE layer's weights cost a step of B rows (docs/roofline.md "Mixture of experts and latent
// attention").
double ExpertsTouched(int experts, int chosen, double tokens);

// KV-cache bytes one token adds over all layers: 2 · layers · kv_heads · head_dim elements, or with MLA
// layers · (kv_lora_rank + qk_rope_head_dim) (the compressed latent and the shared RoPE key).
double KvBytesPerToken(const ModelConfig& config, double kv_element_bytes);

// One kernel of a pass. Per-layer kernels run `instances` = num_layers times with the same cost each.
struct KernelCost {
  ForwardKernel kernel = ForwardKernel::kEmbedding;
  int instances = 1;
  std::string shape;            // of one instance, e.g. "1×576 · 576×576" (rows × in · in × out)
  double flops = 0;             // one instance
  double weight_bytes = 0;      // one instance: weights (and norm / bias vectors) read
  double activation_bytes = 0;  // one instance: FP32 activations read and written
  double kv_bytes = 0;          // one instance: KV cache read (attention) or written (kv_write)

  double Bytes() const { return weight_bytes + activation_bytes + kv_bytes; }
  double Intensity() const;  // FLOPs per byte (0 for a kernel that moves nothing)
};

// Every kernel of one forward pass, in ForwardKernel order; a MoE model with dense layers has gate_proj,
// up_proj, swiglu and down_proj twice, the dense layers' and then the MoE layers' (Kernel finds the first).
struct PassCost {
  ForwardPhase phase = ForwardPhase::kDecode;
  int batch = 1;    // sequences
  int rows = 1;     // tokens computed (batch for a decode step, P for a prefill)
  int context = 0;  // decode: positions cached before the step; prefill: 0
  std::vector<KernelCost> kernels;

  const KernelCost& Kernel(ForwardKernel kernel) const;
  double Flops() const;  // all kernels, all instances
  double Bytes() const;
  double WeightBytes() const;
  double KvBytes() const;
  double Intensity() const { return Bytes() > 0 ? Flops() / Bytes() : 0; }
};

// What the passes are computed with besides the weights.
struct CostOptions {
  double kv_element_bytes = 4;  // KvDtypeBytes of the cache
  double activation_bytes = 4;  // plumb's activations are FP32
  // The fast kernel family over weights with int8 kernels (kernels/int8_activations.h): a one-row pass then
  // has a `quantize` kernel, x rounded to int8 before the projections.
  bool int8_activations = false;
};

// One decode step of `batch` sequences, each holding `context` positions before it (so attending to
// context + 1, its new token included). Throws plumb::Error for batch < 1 or context < 0.
PassCost DecodeStepCost(const ModelConfig& config, const WeightBytes& weights, const CostOptions& options,
                        int batch, int context);
// A prefill of `prompt` tokens into an empty cache, logits of the last row only (what generation needs).
PassCost PrefillCost(const ModelConfig& config, const WeightBytes& weights, const CostOptions& options,
                     int prompt);

// The roofline of a machine: the two ceilings a kernel runs under.
struct Roof {
  double peak_flops = 0;                                   // FLOP/s
  double bandwidth = 0;                                    // bytes/s
  double Ridge() const { return peak_flops / bandwidth; }  // FLOP/byte where the ceilings meet
  // The lower bound on a kernel's or pass's time: max(bytes ÷ bandwidth, FLOPs ÷ peak).
  double Seconds(double flops, double bytes) const;
  bool ComputeBound(double flops, double bytes) const { return flops * bandwidth > bytes * peak_flops; }
};

// The smallest batch at which a decode step at `context` turns compute-bound on `roof` (its FLOPs ÷ peak
// reach its bytes ÷ bandwidth), or -1 if it never does (the KV reads grow as fast as the FLOPs: at long
// contexts attention keeps decode bandwidth-bound at any batch). Step bytes and FLOPs are linear in the
// batch, so this solves W + B·b = B·f / ridge for B; a MoE model's weight bytes grow with B (the experts
// touched), so there the smallest such B is searched for.
long long ComputeBoundBatch(const ModelConfig& config, const WeightBytes& weights, const CostOptions& options,
                            int context, const Roof& roof);

}  // namespace plumb::roofline
