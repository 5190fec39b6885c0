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

// The CPU features the kernels choose by, read once (CPUID, and whether the OS saves the YMM/ZMM registers),
// at first use, by isa.cpp: the only code that asks the CPU, so that a kernel never checks a feature per
// call. All false on a build for another architecture. The ISA levels are made of them (IsaSupported); the
// ones beyond a level pick a faster path inside it.
struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;              // kAvx2 requires all three
  bool avx512f = false, avx512bw = false, avx512vl = false;  // kAvx512 requires these and kAvx2's
  // Beyond the levels, each picking a faster path within kAvx512:
  bool avx512vnni = false;  // the int8 dots' vpdpbusd (ggml_int8_avx512.cpp, int4/int4_int8_x86.cpp)
  bool gfni = false;        // FP8 E4M3's byte maps (fp8/fp8_avx512.cpp)
  bool avx512bf16 = false;  // vdpbf16ps: prefill's BF16 panels for the float formats (bf16_panel/)
  // AMX's tiles and int8 tile products (tdpbssd), beside AVX-512 VNNI (the panels' other half), with the OS
  // saving the tile state and Linux granting this process the tile data (arch_prctl ARCH_REQ_XCOMP_PERM,
  // asked once, here): prefill's int8 panels (ggml/int8_panel_amx.cpp).
  bool amx_int8 = false;
  // AMX's BF16 tile products (tdpbf16ps), with the same OS and Linux conditions: prefill's BF16 panels as
  // tiles (bf16_panel/bf16_panel_amx.cpp).
  bool amx_bf16 = false;
};
const CpuFeatures& HostCpuFeatures();

// Within kAvx512 (a kernel reached only where IsaSupported(Isa::kAvx512)): whether the CPU has AVX-512 VNNI,
// GFNI and AVX512-BF16. Skylake-X has AVX-512 without either, so they are not part of the level.
inline bool HasAvx512Vnni() {
  return HostCpuFeatures().avx512vnni;
}
inline bool HasGfni() {
  return HostCpuFeatures().gfni;
}
inline bool HasAvx512Bf16() {
  return HostCpuFeatures().avx512bf16;
}
inline bool HasAmxInt8() {
  return HostCpuFeatures().amx_int8;
}
inline bool HasAmxBf16() {
  return HostCpuFeatures().amx_bf16;
}
// Why HasAmxInt8() is false ("CPU lacks amx_tile, amx_int8", "Linux refused the tile data: ..."), for a
// test's skip; "" when it is true.
std::string AmxMissing();
// Why HasAmxBf16() is false, the same way.
std::string AmxBf16Missing();

// Whether the environment variable `name` is "0": how PLUMB_AMX and PLUMB_BF16 turn a path off for an A/B
// of it against the one beneath on one host. Read at each call; a caller that decides once keeps the answer.
bool EnvTurnsOff(const char* name);

// Whether this build and CPU can run `isa` (kScalar always; kAvx2 on x86-64 with AVX2, FMA and F16C, so that
// no kernel under kAvx2 asks for FMA again; kAvx512 on x86-64 with those and AVX-512 F, BW and VL, enabled by
// the OS).
bool IsaSupported(Isa isa);
// Why IsaSupported(isa) is false, as a reader of a test log wants it: "CPU lacks fma", "CPU lacks avx512bw,
// avx512vl" (feature names as /proc/cpuinfo spells them), "not an aarch64 build"; "" when it is true.
std::string IsaMissing(Isa isa);
// The variant every kernel runs: the best supported one, unless the environment variable PLUMB_ISA (read
// once, at first use) names another ("scalar", "avx2", ...), or SetIsa chose another.
Isa ActiveIsa();
// Selects the variant for all threads (tests and benchmarks compare both in one process). Throws
// plumb::Error when IsaSupported(isa) is false.
void SetIsa(Isa isa);
const char* IsaName(Isa isa);  // "scalar", "avx2", "avx512", "neon"

}  // namespace plumb::kernels
