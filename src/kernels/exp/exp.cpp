// Which variant of the Exp-based ops runs (exp_kernels.h), and the plain loops.
#include "exp_kernels.h"
#include "plumb/kernels/isa.h"
#include "plumb/kernels/scalar.h"

namespace plumb::kernels {
namespace {

void ExpMinusPlain(float* x, int n, float shift) {
  for (int i = 0; i < n; ++i) x[i] = scalar::Exp(x[i] - shift);
}

void SwiGluPlain(const float* gate, const float* up, float* out, int n) {
  scalar::SwiGlu(gate, up, out, n);
}

void GeluTanhGluPlain(const float* gate, const float* up, float* out, int n) {
  scalar::GeluTanhGlu(gate, up, out, n);
}

}  // namespace

ExpMinusFn ActiveExpMinus() {
#if defined(__x86_64__)
  if (ActiveIsa() == Isa::kAvx512) return avx512::ExpMinus;
  if (ActiveIsa() == Isa::kAvx2) return avx2::ExpMinus;
#endif
  return ExpMinusPlain;
}

GatedFn ActiveSwiGlu() {
#if defined(__x86_64__)
  if (ActiveIsa() == Isa::kAvx512) return avx512::SwiGlu;
  if (ActiveIsa() == Isa::kAvx2) return avx2::SwiGlu;
#endif
  return SwiGluPlain;
}

GatedFn ActiveGeluTanhGlu() {
#if defined(__x86_64__)
  if (ActiveIsa() == Isa::kAvx512) return avx512::GeluTanhGlu;
  if (ActiveIsa() == Isa::kAvx2) return avx2::GeluTanhGlu;
#endif
  return GeluTanhGluPlain;
}

}  // namespace plumb::kernels
