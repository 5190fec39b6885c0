// Device helpers shared by the harness's kernels: reductions, the FP16 / BF16 / FP8 decodings of
// docs/formats.md, and the KV cache's element types and layouts (docs/kv-cache.md).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels.h"
#include "plumb/core/error.h"

namespace plumb::cuda {

// Every kernel runs with this many threads per block: four warps, enough to spread a row's work.
inline constexpr int kThreads = 128;

// Throws plumb::Error naming the kernel if its launch failed (a bad configuration; faults inside the kernel
// surface at the runner's next synchronising copy, which checks too).
inline void CheckLaunch(const char* kernel) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) throw MakeError("CUDA kernel ", kernel, ": ", cudaGetErrorString(status));
}

// v rounded to BF16 (nearest even) and back under Precision::kBf16, as it is under kFp32.
__device__ inline float Rounded(float v, Precision precision) {
  return precision == Precision::kBf16 ? __bfloat162float(__float2bfloat16_rn(v)) : v;
}

__device__ inline float WarpSum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
__device__ inline float WarpMax(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// The sum (or max) of v over the block's kThreads threads, returned to every thread. `scratch` is shared
// memory of kThreads / 32 floats; the function synchronises before reusing it, so calls may follow each
// other.
__device__ inline float BlockSum(float v, float* scratch) {
  v = WarpSum(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // an earlier call may still be reading scratch
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) total += scratch[w];
  return total;
}
__device__ inline float BlockMax(float v, float* scratch) {
  v = WarpMax(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float m = scratch[0];
  for (int w = 1; w < kThreads / 32; ++w) m = fmaxf(m, scratch[w]);
  return m;
}

// docs/formats.md "FP16" and "BF16": both decode exactly to FP32.
__device__ inline float HalfBits(std::uint16_t bits) {
  return __half2float(__ushort_as_half(bits));
}
__device__ inline float Bf16Bits(std::uint16_t bits) {
  return __uint_as_float(static_cast<unsigned>(bits) << 16);
}

// docs/formats.md "FP8": every E4M3 / E5M2 code is exactly an FP16 value, so the toolkit's FP8 → half
// conversion followed by half → float is the exact decoding (NaN codes stay NaN, E5M2's infinities stay inf).
__device__ inline float Fp8Bits(std::uint8_t code, bool e4m3) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(code, e4m3 ? __NV_E4M3 : __NV_E5M2);
  return __half2float(__half(h));
}

// docs/formats.md "FP4 E2M1" and "E8M0", decoded by the toolkit's own conversions (every FP4 value is an
// FP16 value, every E8M0 value a BF16 value; E8M0's 0xFF gives NaN), so that a difference between them and
// the suite's definitions is a finding about one or the other.
__device__ inline float Fp4Bits(std::uint8_t code) {
  const __half_raw h = __nv_cvt_fp4_to_halfraw(code, __NV_E2M1);
  return __half2float(__half(h));
}
__device__ inline float E8m0Bits(std::uint8_t code) {
  return __bfloat162float(__nv_bfloat16(__nv_cvt_e8m0_to_bf16raw(code)));
}

// A 16-bit little-endian field at any byte address (GGUF blocks have no alignment).
__device__ inline std::uint16_t LoadU16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}

// ---- the KV cache ---------------------------------------------------------------------------------------

__host__ __device__ inline int KvBytes(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF32:
      return 4;
    case KvDtype::kF16:
    case KvDtype::kBf16:
      return 2;
    case KvDtype::kFp8E4m3:
    case KvDtype::kFp8E5m2:
      return 1;
  }
  return 1;
}

// Element offset of (block, offset in block, kv head, element j) in the key or value cache of `kv`'s layout
// (docs/fixtures.md "attention_decode": NHD, or vLLM's paged-kernel layout with x = 16 / element bytes;
// "attention_prefill": the contiguous layout, one block of `block_size` = capacity positions).
__device__ inline std::int64_t KvIndex(const PagedKv& kv, bool is_key, std::int64_t block, int offset,
                                       int head, int j) {
  if (kv.layout == KvLayout::kNhd) {
    return ((block * kv.block_size + offset) * kv.n_kv_heads + head) * kv.head_dim + j;
  }
  if (kv.layout == KvLayout::kContiguous) {  // [n_kv_heads][capacity][head_dim]; block is always 0
    return ((block * kv.n_kv_heads + head) * kv.block_size + offset) * kv.head_dim + j;
  }
  const std::int64_t block_head = block * kv.n_kv_heads + head;
  if (is_key) {
    const int x = 16 / KvBytes(kv.dtype);
    return ((block_head * (kv.head_dim / x) + j / x) * kv.block_size + offset) * x + j % x;
  }
  return (block_head * kv.head_dim + j) * kv.block_size + offset;
}

// The stored element at `index`, decoded to FP32 (docs/kv-cache.md "Element types": FP8 is fp8(code) ·
// scale).
__device__ inline float LoadKv(const void* cache, KvDtype dtype, std::int64_t index, float scale) {
  switch (dtype) {
    case KvDtype::kF32:
      return static_cast<const float*>(cache)[index];
    case KvDtype::kF16:
      return HalfBits(static_cast<const std::uint16_t*>(cache)[index]);
    case KvDtype::kBf16:
      return Bf16Bits(static_cast<const std::uint16_t*>(cache)[index]);
    case KvDtype::kFp8E4m3:
      return Fp8Bits(static_cast<const std::uint8_t*>(cache)[index], true) * scale;
    case KvDtype::kFp8E5m2:
      return Fp8Bits(static_cast<const std::uint8_t*>(cache)[index], false) * scale;
  }
  return 0.0f;
}

// Encodes x into the element at `index` (docs/kv-cache.md "Element types"): FP16 and BF16 round to nearest
// even (__float2half_rn, __float2bfloat16_rn, which plumb's conversions match bit for bit); FP8 divides by
// the scale in FP32, then converts with saturation (__NV_SATFINITE), as vLLM's cache kernels do.
__device__ inline void StoreKv(void* cache, KvDtype dtype, std::int64_t index, float x, float scale) {
  switch (dtype) {
    case KvDtype::kF32:
      static_cast<float*>(cache)[index] = x;
      return;
    case KvDtype::kF16:
      static_cast<std::uint16_t*>(cache)[index] = __half_as_ushort(__float2half_rn(x));
      return;
    case KvDtype::kBf16:
      static_cast<std::uint16_t*>(cache)[index] = __bfloat16_as_ushort(__float2bfloat16_rn(x));
      return;
    case KvDtype::kFp8E4m3:
      static_cast<std::uint8_t*>(cache)[index] = __nv_cvt_float_to_fp8(x / scale, __NV_SATFINITE, __NV_E4M3);
      return;
    case KvDtype::kFp8E5m2:
      static_cast<std::uint8_t*>(cache)[index] = __nv_cvt_float_to_fp8(x / scale, __NV_SATFINITE, __NV_E5M2);
      return;
  }
}

}  // namespace plumb::cuda
