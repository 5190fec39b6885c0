// The timed runs `plumb roofline` and `plumb bench` hold against the roofline: a decode step of a batch at
// a given context, and a prefill, each after one warm-up, with an optional ForwardObserver (a KernelTimer)
// attached to the timed runs only. The cost of these passes does not depend on the token ids or on the
// values in the cache, so both use fixed ids and zero-filled caches.
#pragma once

#include <vector>

#include "plumb/formats/kv_dtype.h"
#include "plumb/kv/kv_sequence.h"
#include "plumb/kv/paged_kv_cache.h"
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

// Setting up a batched-decode measurement (`plumb bench --batch`) without running the model.

// Gives `kv` `length` more committed positions of random (normal, seeded by `salt`) keys and values, the
// same row at every position: a decode step's cost does not depend on what the cache holds, and filling 64
// sequences of 4096 positions by prefill would take far longer than the measurement. The committed token
// ids differ per salt, so sequences of different salts share no prefix and read their own blocks, as
// independent requests do. Throws what Reserve throws (a full cache or pool).
void FillSynthetic(KvSequence& kv, int length, int salt);

// Adds a sequence to a fresh `pool` whose blocks, once it holds `positions`, come in a shuffled order
// rather than in address order, as after requests have come and gone: one block is first handed to each of
// as many placeholder sequences, which are then freed in a fixed shuffled order (the free list gives back
// the last freed block first). Returns the new sequence's id.
SeqId ShuffleFreeBlocks(PagedKvCache& pool, int positions, int block_size);

// The median of `values` (the mean of the middle two for an even count); values must not be empty.
double Median(std::vector<double> values);

}  // namespace plumb::roofline
