// plumb estimate's speculative-decoding figures (docs/roofline.md "Speculative decoding"): from the draft's
// acceptance rate α, its k draft tokens per step and its cost c per token (given, or the ratio of a draft
// model card's decode step to the target's), the expected tokens per target step (1 − α^(k+1)) / (1 − α) and
// the speedup over the target alone, that divided by k·c + 1 (plumb/sample/speculative.h).
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "plumb/cli/flags.h"
#include "plumb/roofline/json_writer.h"
#include "plumb/roofline/presets.h"

namespace plumb::cli {

// --acceptance, --draft-tokens, --draft-cost, --draft-card.
void AddSpeculativeFlags(Flags& flags);

struct SpeculativeRequest {
  double acceptance = 0;             // α
  int draft_tokens = 0;              // k
  std::optional<double> draft_cost;  // c as given (--draft-cost), or
  std::string draft_card;            // the draft model card whose step time gives c (--draft-card)
  double verify_cost = 1;            // v: a k + 1-token verification step in target decode steps
};

// The request, or nullopt without --acceptance. Throws plumb::Error (one line naming the flag) for values out
// of range, both or neither of --draft-cost and --draft-card, or a draft flag without --acceptance.
std::optional<SpeculativeRequest> ReadSpeculativeFlags(const Flags& flags);

struct SpeculativeEstimate {
  SpeculativeRequest request;
  double draft_cost = 0;  // c, in target decode steps per draft token
  // With --draft-card: both batch-1 decode steps at the first --context, bytes / bandwidth on the hardware.
  double draft_step_seconds = 0, target_step_seconds = 0;
  int context = 0;
  double tokens_per_step = 0;  // ExpectedTokensPerStep(α, k)
  double speedup = 0;          // ExpectedSpeedup(α, k, c), verification costing one target step
};

// The figures for the target of `target` (its config, dtype, hardware, tp and first context). Throws
// plumb::Error for an unknown draft card.
SpeculativeEstimate EstimateSpeculative(const SpeculativeRequest& request,
                                        const roofline::EstimateSettings& target);

// Two lines for the tables, and the "speculative" object of the JSON (docs/roofline.md "JSON").
void PrintSpeculative(std::ostream& out, const SpeculativeEstimate& s);
void WriteSpeculativeJson(roofline::JsonWriter& j, const SpeculativeEstimate& s);

}  // namespace plumb::cli
