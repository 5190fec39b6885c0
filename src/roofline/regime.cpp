#include "plumb/roofline/regime.h"

namespace plumb::roofline {

Regime Classify(const Roof& roof, double flops, double bytes, double measured_seconds) {
  const double bound = roof.Seconds(flops, bytes);
  if (measured_seconds > kOverheadFactor * bound && measured_seconds < kOverheadSeconds) {
    return Regime::kOverhead;
  }
  return roof.ComputeBound(flops, bytes) ? Regime::kCompute : Regime::kBandwidth;
}

const char* RegimeName(Regime regime) {
  switch (regime) {
    case Regime::kCompute:
      return "compute-bound";
    case Regime::kBandwidth:
      return "bandwidth-bound";
    case Regime::kOverhead:
      return "overhead-bound";
  }
  return "?";
}

}  // namespace plumb::roofline
