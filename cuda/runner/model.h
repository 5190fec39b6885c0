// The model cases of the suite on the GPU (docs/fixtures.md "tp_layer", "layer", "end_to_end",
// "kv_handoff"): a Llama forward pass composed from the harness's kernels over a GGUF model's weights (or a
// tp_layer case's F32 shards), with the host-side reading of the GGUF and KV hand-off files. model.cpp.
#pragma once

#include <map>
#include <string>

#include "device.h"
#include "ops.h"

namespace plumb::cuda {

// Runs a case of op layer, end_to_end, kv_handoff or tp_layer (RunCase's contract: under check_only_pass
// every file is read and checked and every buffer sized, and no kernel runs).
std::map<std::string, fixtures::Tensor> RunModelCase(const CaseIo& io, const ModelSource& models);

}  // namespace plumb::cuda
