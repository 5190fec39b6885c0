// The ops built on scalar::Exp, vectorized: softmax's exponentials and SwiGLU. Every variant gives the scalar
// loop's bits: Exp's steps are IEEE double operations (fma, add, multiply, one rounding to float), which a
// vector lane rounds exactly as a scalar register does, and an input that takes one of Exp's special cases
// (|x| ≥ 88, infinities, NaN) sends its whole vector through scalar::Exp. Internal to src/kernels.
#pragma once

namespace plumb::kernels {

// x[i] = scalar::Exp(x[i] − shift) for i < n (softmax's step, shift its max).
using ExpMinusFn = void (*)(float* x, int n, float shift);
// A gated activation, out[i] = act(gate[i]) · up[i]; out may be gate or up. SwiGLU: scalar::SwiGlu's
// gate[i] / (1 + Exp(−gate[i])) · up[i]; GeGLU: scalar::GeluTanhGlu's.
using GatedFn = void (*)(const float* gate, const float* up, float* out, int n);

// The variants for ActiveIsa(): AVX-512's or AVX2's where the CPU also has FMA, else the plain loops.
ExpMinusFn ActiveExpMinus();
GatedFn ActiveSwiGlu();
GatedFn ActiveGeluTanhGlu();

#if defined(__x86_64__)
namespace avx2 {  // four doubles per register; requires AVX2 and FMA (exp_avx2.cpp)
void ExpMinus(float* x, int n, float shift);
void SwiGlu(const float* gate, const float* up, float* out, int n);
void GeluTanhGlu(const float* gate, const float* up, float* out, int n);
}  // namespace avx2
namespace avx512 {  // eight doubles per register; requires AVX-512 F, BW, VL and FMA (exp_avx512.cpp)
void ExpMinus(float* x, int n, float shift);
void SwiGlu(const float* gate, const float* up, float* out, int n);
void GeluTanhGlu(const float* gate, const float* up, float* out, int n);
}  // namespace avx512
#endif

}  // namespace plumb::kernels
