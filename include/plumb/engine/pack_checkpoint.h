// Writing a packed checkpoint directory (docs/formats.md, "Packed checkpoints"): the weights of any model
// plumb loads, converted by PackModel (model/pack.h) into model.safetensors, with config.json and the
// tokenizer, so that every command (and Hugging Face tools, for F16/BF16) loads it like any checkpoint.
// `plumb pack` is this plus flags and printing.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "plumb/model/pack.h"

namespace plumb {

struct PackedCheckpointSummary {
  std::string safetensors_path;  // <out_dir>/model.safetensors
  std::size_t tensor_count = 0;
  std::size_t weight_bytes = 0;  // bytes of every tensor written
  // Where the tokenizer came from: "tokenizer.json written from the GGUF vocabulary" (or tokenizer.gguf),
  // "tokenizer files copied", or "no tokenizer (the source has none)".
  std::string tokenizer_note;
};

// Loads model_path (a GGUF file or a checkpoint), packs it with `options` and writes out_dir:
// model.safetensors, config.json and the tokenizer (from a GGUF source: tokenizer.json for byte-level BPE,
// tokenizer.gguf for SentencePiece, its end-of-turn id added to config.json's eos ids; from a directory:
// its tokenizer.json / tokenizer.gguf / tokenizer_config.json copied). Everything that can fail fast (the
// input, its tokenizer, the output directory) is checked before the slow part. out_dir must not exist, be
// empty, or (with overwrite) holds files plumb pack writes, which are removed first so that a stale shard
// or index cannot be loaded beside the new file. It may not be the model's own directory. Throws
// plumb::Error naming the path and what is wrong.
PackedCheckpointSummary WritePackedCheckpoint(const std::string& model_path, const std::string& out_dir,
                                              const PackOptions& options, bool overwrite,
                                              const std::function<void(const PackProgress&)>& progress = {});

}  // namespace plumb
