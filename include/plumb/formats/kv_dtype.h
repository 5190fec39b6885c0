// The element types a KV cache stores keys and values in, and the one conversion each way that defines them.
//
//   f32        the float as it is
//   f16, bf16  F32ToF16 / F32ToBF16 (round to nearest even, formats/dtype.h); read back exactly
//   fp8-e4m3,  stored = F32ToFp8(x / scale, format, SATFINITE); read = Fp8ToF32(stored) · scale, both in
//   FP32. fp8-e5m2   The scale is per KV head (a per-tensor scale is the same value for every head). This is
//   how
//              vLLM's cache kernels apply k_scale / v_scale (a division on the way in, a multiplication on
//              the way out); docs/kv-cache.md gives the bits and the citation.
// Every cache (contiguous or paged) stores through EncodeKv and every attention kernel reads through
// DecodeKv, so the numerics of a KV dtype live here and nowhere else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace plumb {

enum class KvDtype : std::uint8_t { kF32, kF16, kBF16, kFp8E4M3, kFp8E5M2 };

// 4, 2, 2, 1, 1.
std::size_t KvDtypeBytes(KvDtype dtype);
// "f32", "f16", "bf16", "fp8-e4m3", "fp8-e5m2" (the spelling of --kv-dtype).
std::string_view KvDtypeName(KvDtype dtype);
// Inverse of KvDtypeName; throws plumb::Error naming the value and the choices.
KvDtype ParseKvDtype(std::string_view name);
bool IsFp8(KvDtype dtype);

// n floats -> n elements of dtype at dst (KvDtypeBytes(dtype) · n bytes). scale: the FP8 scale of this
// head (ignored by the other dtypes).
void EncodeKv(KvDtype dtype, const float* src, int n, float scale, void* dst);
// n elements of dtype at src -> n floats.
void DecodeKv(KvDtype dtype, const void* src, int n, float scale, float* dst);

}  // namespace plumb
