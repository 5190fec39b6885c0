// Why a kernel took the time it did, judged against the roofline (docs/roofline.md, "Regimes"): what
// `plumb explain` and `plumb roofline` print beside every measured kernel.
#pragma once

#include "plumb/roofline/cost_model.h"

namespace plumb::roofline {

enum class Regime { kCompute, kBandwidth, kOverhead };

// A kernel that took more than kOverheadFactor × its roofline bound and less than kOverheadSeconds did too
// little work to amortise thread fork and join, loop set-up and the observer's clock: overhead-bound.
inline constexpr double kOverheadFactor = 4.0;
inline constexpr double kOverheadSeconds = 50e-6;

// Overhead-bound as above; otherwise the ceiling its intensity (flops ÷ bytes) puts it under.
Regime Classify(const Roof& roof, double flops, double bytes, double measured_seconds);
const char* RegimeName(Regime regime);  // "compute-bound", "bandwidth-bound", "overhead-bound"

}  // namespace plumb::roofline
