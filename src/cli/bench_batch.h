// plumb bench --batch B,.. --context T,..: decode throughput of many sequences per step (Model::Step over a
// paged KV cache), and paged against contiguous attention at batch 1.
#pragma once

#include <ostream>

#include "plumb/cli/flags.h"
#include "plumb/model/model.h"

namespace plumb::cli {

void AddBatchBenchFlags(Flags& flags);
int RunBatchBench(const Flags& flags, Model& model, std::ostream& out, std::ostream& err);

}  // namespace plumb::cli
