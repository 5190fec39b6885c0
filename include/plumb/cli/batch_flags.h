// The flags of batched generation (plumb generate --prompts-file), shared with plumb bench --batch.
#pragma once

#include <cstddef>

#include "plumb/cli/flags.h"
#include "plumb/engine/scheduler.h"
#include "plumb/formats/kv_dtype.h"
#include "plumb/kv/paged_kv_cache.h"
#include "plumb/model/config.h"

namespace plumb::cli {

// --kv-dtype alone (chat's cache is contiguous). Unset, the cache is f16 when the fast kernel family runs
// (what laptop engines keep) and f32 with the exact one (the oracle's precision).
void AddKvDtypeFlag(Flags& flags);
// --kv-dtype resolved after --kernels has been applied (common_flags.h ApplyKernelsFlag).
KvDtype ReadKvDtypeFlag(const Flags& flags);

// --kv-dtype --block-size --kv-budget-mib --no-prefix-cache
void AddPagedKvFlags(Flags& flags);
// The pool for `max_sequences` sequences of up to `ctx` positions: the budget's blocks, but never more than
// those sequences could fill. Throws plumb::Error for a bad flag.
PagedKvConfig ReadPagedKvFlags(const Flags& flags, const ModelConfig& model, int ctx, int max_sequences);

// --max-batch --step-tokens --kv-policy --deterministic
void AddSchedulerFlags(Flags& flags);
SchedulerOptions ReadSchedulerFlags(const Flags& flags);

}  // namespace plumb::cli
