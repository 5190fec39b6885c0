// Little-endian 16- and 32-bit values (FP16 scales, zero points, packed codes) read at any alignment, for
// every kernel variant. Internal to src/kernels/; the hosts plumb builds for (x86-64, aarch64) are
// little-endian, as the formats are.
#pragma once

#include <cstdint>
#include <cstring>

namespace plumb::kernels {

inline std::uint16_t ReadU16(const std::uint8_t* p) {
  std::uint16_t value;
  std::memcpy(&value, p, sizeof value);
  return value;
}

inline std::uint32_t ReadU32(const std::uint8_t* p) {
  std::uint32_t value;
  std::memcpy(&value, p, sizeof value);
  return value;
}

}  // namespace plumb::kernels
