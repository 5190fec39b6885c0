// SHA-256 (FIPS 180-4), for fingerprints: the KV hand-off file names the weights it was computed with by the
// SHA-256 of the model's files (docs/kv-cache.md, "KV hand-off format"). Not for anything secret.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

namespace plumb {

class Sha256 {
 public:
  Sha256();
  // Appends bytes to the message; may be called any number of times.
  void Update(std::span<const std::uint8_t> bytes);
  // The digest of everything appended, as 64 lowercase hex digits. Ends the message: call once.
  std::string HexDigest();

 private:
  void Block(const std::uint8_t* block);  // one 64-byte block into state_

  std::array<std::uint32_t, 8> state_;
  std::array<std::uint8_t, 64> pending_{};  // the last, partial block
  std::size_t pending_size_ = 0;
  std::uint64_t total_bytes_ = 0;
};

// SHA-256 of the bytes, as 64 lowercase hex digits.
std::string Sha256Hex(std::span<const std::uint8_t> bytes);

}  // namespace plumb
