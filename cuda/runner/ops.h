// The runner's per-op glue: a case's tensors checked against its params, uploaded, run through the kernels of
// cuda/kernels.h, and its outputs downloaded under the names docs/fixtures.md gives them.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "../kernels.h"
#include "plumb/fixtures/suite_reader.h"

namespace plumb::cuda {

// Where the model cases (layer, end_to_end, kv_handoff) find the GGUF file their params.model names, and
// what the suite says of it.
struct ModelSource {
  std::filesystem::path dir = "models";  // params.model is a file name in this directory
  nlohmann::json suite_model;            // the manifest's "model" object (file, bytes, sha256), or null
};

// Runs case c (whose op UnsupportedReason accepts) on the current GPU. With check_only, it does everything
// but touch the GPU: the case's tensors are read and checked as for a run (a model case's GGUF file too), and
// the outputs come back with their names, dtypes and shapes, filled with zeros. `precision` is what the
// kernels round (kBf16: what a BF16 engine rounds; reshape_and_cache writes the cache's own dtype either
// way). Throws plumb::Error naming the case and the tensor or parameter for a fixture that does not match
// docs/fixtures.md (wrong dtype or shape, an index out of range), and for a CUDA failure.
std::map<std::string, fixtures::Tensor> RunCase(const fixtures::Case& c, const fixtures::TensorFile& in,
                                                bool check_only = false,
                                                Precision precision = Precision::kFp32,
                                                const ModelSource& models = {});

}  // namespace plumb::cuda
