#include "plumb/core/sha256.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace plumb {
namespace {

std::string HashOf(const std::string& text) {
  return Sha256Hex({reinterpret_cast<const std::uint8_t*>(text.data()), text.size()});
}

// FIPS 180-4's examples (NIST's "SHA256.pdf" example values): one block, two blocks, and the empty message.
TEST(Sha256, GivesTheStandardsExampleDigests) {
  EXPECT_EQ(HashOf(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(HashOf("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(HashOf("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, OneMillionAsFedInPiecesOfAnySizeHashAsOneMessage) {
  const std::vector<std::uint8_t> a(1000000, 'a');
  EXPECT_EQ(Sha256Hex(a), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  Sha256 pieces;
  std::size_t at = 0;
  for (std::size_t step = 1; at < a.size(); step = step * 7 % 131 + 1) {
    const std::size_t n = std::min(step, a.size() - at);
    pieces.Update({a.data() + at, n});
    at += n;
  }
  EXPECT_EQ(pieces.HexDigest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

}  // namespace
}  // namespace plumb
