// KV-cache element types: docs/kv-cache.md ("Element types") is the specification this file implements.
#include "plumb/formats/kv_dtype.h"

#include <cstring>

#include "plumb/core/error.h"
#include "plumb/core/extent.h"
#include "plumb/formats/dtype.h"
#include "plumb/formats/fp8.h"

namespace plumb {
namespace {

Fp8Format Fp8FormatOf(KvDtype dtype) {
  return dtype == KvDtype::kFp8E4M3 ? Fp8Format::kE4M3 : Fp8Format::kE5M2;
}

}  // namespace

std::size_t KvDtypeBytes(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF32:
      return 4;
    case KvDtype::kF16:
    case KvDtype::kBF16:
      return 2;
    case KvDtype::kFp8E4M3:
    case KvDtype::kFp8E5M2:
      return 1;
  }
  throw MakeError("unknown KV dtype ", static_cast<int>(dtype));
}

std::string_view KvDtypeName(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF32:
      return "f32";
    case KvDtype::kF16:
      return "f16";
    case KvDtype::kBF16:
      return "bf16";
    case KvDtype::kFp8E4M3:
      return "fp8-e4m3";
    case KvDtype::kFp8E5M2:
      return "fp8-e5m2";
  }
  throw MakeError("unknown KV dtype ", static_cast<int>(dtype));
}

KvDtype ParseKvDtype(std::string_view name) {
  for (KvDtype d : {KvDtype::kF32, KvDtype::kF16, KvDtype::kBF16, KvDtype::kFp8E4M3, KvDtype::kFp8E5M2}) {
    if (name == KvDtypeName(d)) return d;
  }
  throw MakeError("unknown KV cache dtype '", name, "' (choose f32, f16, bf16, fp8-e4m3 or fp8-e5m2)");
}

bool IsFp8(KvDtype dtype) {
  return dtype == KvDtype::kFp8E4M3 || dtype == KvDtype::kFp8E5M2;
}

void EncodeKv(KvDtype dtype, const float* src, int n, float scale, void* dst) {
  switch (dtype) {
    case KvDtype::kF32:
      std::memcpy(dst, src, Extent(n, sizeof(float)));
      return;
    case KvDtype::kF16:
    case KvDtype::kBF16: {
      auto* out = static_cast<std::uint16_t*>(dst);
      for (int i = 0; i < n; ++i) out[i] = dtype == KvDtype::kF16 ? F32ToF16(src[i]) : F32ToBF16(src[i]);
      return;
    }
    case KvDtype::kFp8E4M3:
    case KvDtype::kFp8E5M2: {
      // A division, not a multiplication by 1/scale: vLLM's cache kernels (scaled_vec_conversion) divide.
      F32ToFp8Divided(src, n, scale, Fp8FormatOf(dtype), Fp8Overflow::kSaturate,
                      static_cast<std::uint8_t*>(dst));
      return;
    }
  }
  throw MakeError("unknown KV dtype ", static_cast<int>(dtype));
}

void DecodeKv(KvDtype dtype, const void* src, int n, float scale, float* dst) {
  switch (dtype) {
    case KvDtype::kF32:
      std::memcpy(dst, src, Extent(n, sizeof(float)));
      return;
    case KvDtype::kF16:
    case KvDtype::kBF16: {
      // Read through memcpy: src may be at any byte address (a caller's row need not be 2-byte aligned).
      const auto* in = static_cast<const std::uint8_t*>(src);
      for (int i = 0; i < n; ++i) {
        std::uint16_t bits;
        std::memcpy(&bits, in + 2 * static_cast<std::size_t>(i), sizeof bits);
        dst[i] = dtype == KvDtype::kF16 ? F16ToF32(bits) : BF16ToF32(bits);
      }
      return;
    }
    case KvDtype::kFp8E4M3:
    case KvDtype::kFp8E5M2: {
      const auto* in = static_cast<const std::uint8_t*>(src);
      const float* table = Fp8DecodeTable(Fp8FormatOf(dtype));
      for (int i = 0; i < n; ++i) dst[i] = table[in[i]] * scale;
      return;
    }
  }
  throw MakeError("unknown KV dtype ", static_cast<int>(dtype));
}

}  // namespace plumb
