// The timed runs `plumb roofline` and `plumb bench` hold against the roofline: a decode step of a batch at
// a given context, and a prefill, each after one warm-up, with an optional ForwardObserver (a KernelTimer)
// attached to the timed runs only. The cost of these passes does not depend on the token ids or on the
// values in the cache, so both use fixed ids and zero-filled caches.
#pragma once

#include <vector>

#include "plumb/formats/kv_dtype.h"
#include "plumb/model/forward_observer.h"
#include "plumb/model/model.h"

namespace plumb::roofline {

// `count` fixed, spread-out ids in [0, vocab); `salt` gives another set.
std::vector<int> SpreadTokens(int count, int vocab, int salt);

// Mean seconds of one decode step of `batch` sequences, each with `context` cached positions of dtype
// `kv` (zeros) and one new token, over `steps` timed steps after one warm-up. Batch 1 runs Model::Decode,
// more run Model::Step; every cache is set back to `context` after each step, so each timed step reads
// exactly context + 1 positions. `observer` (may be null) sees the timed steps only.
double TimeDecodeStep(Model& model, KvDtype kv, int batch, int context, int steps, ForwardObserver* observer);

// Mean seconds of a `prompt`-token Model::Prefill into an empty cache of dtype `kv`, over `runs` timed runs
// after one warm-up; `observer` (may be null) sees the timed runs only.
double TimePrefill(Model& model, KvDtype kv, int prompt, int runs, ForwardObserver* observer);

}  // namespace plumb::roofline
