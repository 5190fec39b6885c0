// The kernel variants, one switch for the whole process: every op with SIMD code (row dots, packed dots,
// the small-row GEMM, KV decoding, attention's dots) runs the variant ActiveIsa() names, and every variant
// computes its op's scalar definition bit for bit (docs/architecture.md, "ISA variants").
//
// The best variant the CPU supports is chosen at the first call, unless the environment variable PLUMB_ISA
// names one (scalar, avx2, avx512, neon; an error if this machine cannot run it); SetIsa switches at run
// time, which is how one test process compares every variant with the definition.
#pragma once

#include <string>

namespace plumb::kernels {

enum class Isa { kScalar, kAvx2, kNeon, kAvx512 };

// Whether this build and CPU can run `isa` (kScalar always; kAvx2 on x86-64 with AVX2 and F16C; kAvx512 on
// x86-64 with those and AVX-512 F, BW and VL, enabled by the OS).
bool IsaSupported(Isa isa);
// Why IsaSupported(isa) is false, as a reader of a test log wants it: "CPU lacks avx512bw, avx512vl"
// (feature names as /proc/cpuinfo spells them), "not an aarch64 build"; "" when it is true.
std::string IsaMissing(Isa isa);
// The variant every kernel runs: the best supported one, unless the environment variable PLUMB_ISA (read
// once, at first use) names another ("scalar", "avx2", ...), or SetIsa chose another.
Isa ActiveIsa();
// Selects the variant for all threads (tests and benchmarks compare both in one process). Throws
// plumb::Error when IsaSupported(isa) is false.
void SetIsa(Isa isa);
const char* IsaName(Isa isa);  // "scalar", "avx2", "avx512", "neon"

}  // namespace plumb::kernels
