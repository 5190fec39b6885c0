// Packing a loaded model's weights into another element type: the tensors and config of a packed
// checkpoint (docs/formats.md "Packed checkpoints"), which LoadSafetensorsWeights reads back.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "plumb/formats/safetensors.h"
#include "plumb/model/config.h"
#include "plumb/model/packing.h"
#include "plumb/model/weights.h"

namespace plumb {

struct PackOptions {
  PackFormat format;            // for FP8, format.fp8_per_row picks the scale granularity
  bool keep_embedding = false;  // FP8/INT4 only: the token embedding and LM head as F16 instead
  int threads = 1;              // quantization splits rows over this many threads
};

// One tensor group done: `name` is the Hugging Face prefix (e.g. "model.layers.0.mlp.up_proj"), `bytes`
// the packed bytes produced so far.
struct PackProgress {
  int index = 0;  // 1-based
  int count = 0;
  std::string name;
  std::size_t bytes = 0;
};

struct PackedCheckpoint {
  ModelConfig config;  // the source's, with packing set for FP8/INT4
  std::vector<TensorToWrite> tensors;
};

// Every matrix is dequantized to FP32 row by row (kernels::DequantizeRowOf) and converted: F32 as is,
// F16/BF16 rounded to nearest even (F32ToF16 / F32ToBF16), FP8 by QuantizeFp8, INT4 by QuantizeInt4.
// Norms and biases stay F32. Tensor names are Hugging Face's; a tied LM head is not written. Throws
// plumb::Error for an option that does not apply (keep_embedding with a 16/32-bit format) and for a
// weight that F16 cannot hold (a finite value that would round to infinity).
PackedCheckpoint PackModel(const ModelConfig& config, const ModelWeights& weights, const PackOptions& options,
                           const std::function<void(const PackProgress&)>& progress = {});

class Model;
// `source` with its weights packed as `options` says, in memory: PackModel's tensors read back as a packed
// checkpoint would be (LoadSafetensorsWeights over SafetensorsFile::FromBytes), with nothing written to disk.
// What `plumb roofline --dtype` and `plumb bench --dtype` measure.
Model RepackModel(const Model& source, const PackOptions& options);

}  // namespace plumb
