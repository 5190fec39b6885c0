// The identity a KV hand-off file records (kv/kv_handoff.h): the model's shape and a fingerprint of its
// weights, so that a cache is never continued by a model that did not compute it.
#pragma once

#include <string>

#include "plumb/kv/kv_handoff.h"
#include "plumb/model/config.h"

namespace plumb {

// SHA-256 of the bytes a model path's weights come from (docs/kv-cache.md, "KV hand-off format"): a file
// (GGUF, or a safetensors file) is hashed whole; a checkpoint directory as its config.json followed by its
// *.safetensors files in name order, each preceded by its name and a 0 byte. The whole file, not a sample:
// two quantizations or fine-tunes of one model share every shape and may share most bytes; one pass over
// the file per export or import (0.8 s for SmolLM2's 98 MB, docs/kv-cache.md) is the price.
std::string ModelFingerprint(const std::string& model_path);

// The identity of the model at `model_path` with configuration `config`.
KvHandoffModel ModelIdentity(const ModelConfig& config, const std::string& model_path);

}  // namespace plumb
