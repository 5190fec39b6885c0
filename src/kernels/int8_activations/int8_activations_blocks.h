// QuantizeActivations' block quantizers (kernels/int8_activations.h states the definition), one per ISA.
// Internal to src/kernels/.
#pragma once

#include <cstdint>

namespace plumb::kernels {

namespace scalar {
// One block: x[0 .. count) (count ≤ 32; the rest of the block is 0) into q[32], *d, *s and *sum.
void QuantizeBlock(const float* x, int count, std::int8_t* q, float* d, float* s, std::int32_t* sum);
}  // namespace scalar

#if defined(__x86_64__)
namespace avx2 {
// Blocks [0, blocks) of x, each bitwise scalar::QuantizeBlock of 32 elements; returns how many it did
// (`blocks`). Only where IsaSupported(Isa::kAvx2).
int QuantizeBlocks(const float* x, int blocks, std::int8_t* q, float* d, float* s, std::int32_t* sum);
}  // namespace avx2
#endif

#if defined(__aarch64__)
namespace neon {
// The same with NEON (every aarch64 CPU has it): FCVTAS rounds half away from zero, as std::round.
int QuantizeBlocks(const float* x, int blocks, std::int8_t* q, float* d, float* s, std::int32_t* sum);
}  // namespace neon
#endif

}  // namespace plumb::kernels
