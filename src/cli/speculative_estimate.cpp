// plumb estimate's speculative-decoding figures; see speculative_estimate.h and docs/roofline.md.
#include "speculative_estimate.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "plumb/core/error.h"
#include "plumb/sample/speculative.h"
#include "roofline_common.h"

namespace plumb::cli {
namespace {

// A finite decimal number in [lo, hi]; `flag` names it in the error.
double ParseInRange(const std::string& text, const std::string& flag, double lo, double hi,
                    const char* range) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno != 0 || !std::isfinite(value) ||
      value < lo || value > hi) {
    throw MakeError(flag, ": expected a number in ", range, ", got '", text, "'");
  }
  return value;
}

// A batch-1 decode step at `context` on the settings' hardware, bandwidth-bound: its bytes over the
// bandwidth of the tp devices.
double BandwidthBoundStep(roofline::EstimateSettings settings, int context) {
  settings.batches = {1};
  settings.contexts = {context};
  const roofline::Estimate e = roofline::MakeEstimate(settings);
  return e.rows.front().step_bytes / (settings.tp * settings.hardware.bandwidth);
}

}  // namespace

void AddSpeculativeFlags(Flags& f) {
  f.AddValue(
      "acceptance", "A",
      "speculative decoding: the draft's per-token acceptance rate in [0, 1]; adds the expected tokens "
      "per target step and speedup (docs/roofline.md \"Speculative decoding\")");
  f.AddValue("draft-tokens", "K", "draft tokens proposed per target step (with --acceptance)", "4");
  f.AddValue("draft-cost", "C",
             "one draft token's cost in target decode steps, e.g. 0.05 (with --acceptance)");
  f.AddValue(
      "draft-card", "NAME",
      "the draft model card: its cost is its batch-1 decode step over the target's, both bandwidth-bound "
      "on --hardware (with --acceptance)");
  f.AddValue("verify-cost", "V",
             "a verification step (k + 1 tokens) in target decode steps: 1 while decode is bandwidth-bound "
             "(a GPU at batch 1); a CPU's measured cost is in docs/performance.md (with --acceptance)",
             "1");
}

std::optional<SpeculativeRequest> ReadSpeculativeFlags(const Flags& flags) {
  if (!flags.IsSet("acceptance")) {
    for (const char* flag : {"draft-tokens", "draft-cost", "draft-card", "verify-cost"}) {
      if (flags.IsSet(flag))
        throw MakeError("--", flag, " needs --acceptance (the draft's per-token acceptance rate)");
    }
    return std::nullopt;
  }
  SpeculativeRequest r;
  r.acceptance = ParseInRange(flags.String("acceptance"), "--acceptance", 0.0, 1.0, "[0, 1]");
  r.draft_tokens = flags.Int("draft-tokens", 1, 64);
  r.verify_cost = ParseInRange(flags.String("verify-cost"), "--verify-cost", 1e-3, 1e3, "[0.001, 1000]");
  if (flags.IsSet("draft-cost") == flags.IsSet("draft-card"))
    throw MakeError(
        "--acceptance needs the draft's cost: exactly one of --draft-cost C and --draft-card NAME");
  if (flags.IsSet("draft-cost")) {
    r.draft_cost = ParseInRange(flags.String("draft-cost"), "--draft-cost", 0.0, 1e6, "[0, 1e6]");
  } else {
    r.draft_card = flags.String("draft-card");
  }
  return r;
}

SpeculativeEstimate EstimateSpeculative(const SpeculativeRequest& request,
                                        const roofline::EstimateSettings& target) {
  SpeculativeEstimate s;
  s.request = request;
  s.context = target.contexts.front();
  if (request.draft_cost) {
    s.draft_cost = *request.draft_cost;
  } else {
    roofline::EstimateSettings draft = target;
    draft.config = roofline::ModelCard(request.draft_card);
    s.draft_step_seconds = BandwidthBoundStep(draft, s.context);
    s.target_step_seconds = BandwidthBoundStep(target, s.context);
    s.draft_cost = s.draft_step_seconds / s.target_step_seconds;
  }
  s.tokens_per_step = ExpectedTokensPerStep(request.acceptance, request.draft_tokens);
  s.speedup = ExpectedSpeedup(request.acceptance, request.draft_tokens, s.draft_cost, request.verify_cost);
  return s;
}

void PrintSpeculative(std::ostream& out, const SpeculativeEstimate& s) {
  const SpeculativeRequest& r = s.request;
  out << "speculative: k " << r.draft_tokens << " draft tokens, acceptance α " << Fixed(r.acceptance, 3)
      << ", draft cost c " << Fixed(s.draft_cost, 4) << " target steps";
  if (!r.draft_card.empty()) {
    out << " (" << r.draft_card << " " << Duration(s.draft_step_seconds) << " / "
        << Duration(s.target_step_seconds) << ", batch-1 steps at context " << s.context
        << ", bandwidth-bound)";
  }
  out << "\n             tokens per target step (1 − α^(k+1)) / (1 − α) = " << Fixed(s.tokens_per_step, 3)
      << " | speedup ≈ that / (k·c + v) = " << Fixed(s.speedup, 2)
      << "× (verifying k + 1 tokens costs v = " << Fixed(r.verify_cost, 2) << " target steps"
      << (r.verify_cost == 1 ? ": one bandwidth-bound step" : "") << ")\n";
}

void WriteSpeculativeJson(roofline::JsonWriter& j, const SpeculativeEstimate& s) {
  const SpeculativeRequest& r = s.request;
  j.Key("speculative").BeginObject();
  j.Key("acceptance").Value(r.acceptance).Key("draft_tokens").Value(r.draft_tokens);
  j.Key("draft_cost").Value(s.draft_cost);
  if (r.draft_card.empty()) {  // c given as a number: no steps behind it
    j.Key("draft_card").Null().Key("draft_step_seconds").Null().Key("target_step_seconds").Null();
  } else {
    j.Key("draft_card").Value(r.draft_card).Key("draft_step_seconds").Value(s.draft_step_seconds);
    j.Key("target_step_seconds").Value(s.target_step_seconds);
  }
  j.Key("verify_cost").Value(r.verify_cost);
  j.Key("tokens_per_step").Value(s.tokens_per_step).Key("speedup").Value(s.speedup);
  j.Key("formula").Value(
      "tokens_per_step = (1 - a^(k+1)) / (1 - a); speedup = tokens_per_step / (k*c + verify_cost)");
  j.EndObject();
}

}  // namespace plumb::cli
