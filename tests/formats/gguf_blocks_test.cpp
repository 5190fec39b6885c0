// Tests of DequantizeRow (docs/formats.md, "GGUF blocks") against gguf-py's own dequantizer: the fixture
// fixtures/blocks/blocks.safetensors holds random blocks of every type and gguf.quants.dequantize's float32
// output for them (tools/reference/make_block_fixtures.py), and every element must match bit for bit.
// Then the contract around it: block sizes, unaligned input, and one clear error per bad argument.
#include "plumb/formats/gguf_blocks.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/formats/safetensors.h"

namespace plumb {
namespace {

const std::string kFixture = std::string(PLUMB_SOURCE_DIR) + "/fixtures/blocks/blocks.safetensors";

// Every ggml type id the type table knows.
std::vector<GgmlType> AllKnownTypes() {
  std::vector<GgmlType> types;
  for (std::uint32_t id = 0; id < 64; ++id) {
    if (FindGgmlType(id)) types.push_back(static_cast<GgmlType>(id));
  }
  return types;
}

std::vector<GgmlType> DequantizableTypes() {
  std::vector<GgmlType> types;
  for (GgmlType type : AllKnownTypes()) {
    if (CanDequantize(type)) types.push_back(type);
  }
  return types;
}

std::string Name(GgmlType type) {
  return std::string(GgmlTypeName(type));
}

// The tensor's bytes, copied (the mapping gives no alignment guarantee).
std::vector<std::uint8_t> Bytes(const SafetensorsFile& file, const std::string& name) {
  const auto span = file.Bytes(name);
  return {span.begin(), span.end()};
}

// F32 tensor bits, copied raw so that NaN payloads are compared too.
std::vector<std::uint32_t> Bits(const SafetensorsFile& file, const std::string& name) {
  const auto span = file.Bytes(name);
  std::vector<std::uint32_t> bits(span.size() / 4);
  std::memcpy(bits.data(), span.data(), bits.size() * 4);
  return bits;
}

std::vector<std::uint32_t> BitsOf(const std::vector<float>& values) {
  std::vector<std::uint32_t> bits(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) bits[i] = std::bit_cast<std::uint32_t>(values[i]);
  return bits;
}

TEST(CanDequantize, IsExactlyTheDocumentedSet) {
  const std::set<GgmlType> expected = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,
                                       GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                                       GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                                       GgmlType::Q6_K, GgmlType::MXFP4};
  for (GgmlType type : AllKnownTypes())
    EXPECT_EQ(CanDequantize(type), expected.count(type) == 1) << Name(type);
  EXPECT_FALSE(CanDequantize(static_cast<GgmlType>(4)));    // a retired id (Q4_2)
  EXPECT_FALSE(CanDequantize(static_cast<GgmlType>(999)));  // not an id at all
}

TEST(GgmlRowBytes, IsBlocksTimesBlockBytes) {
  for (GgmlType type : AllKnownTypes()) {
    const GgmlTypeTraits traits = GgmlTraits(type);
    EXPECT_EQ(GgmlRowBytes(type, 0), 0) << Name(type);
    EXPECT_EQ(GgmlRowBytes(type, 6 * traits.block_elements), 6 * traits.block_bytes) << Name(type);
  }
  EXPECT_THROW(GgmlRowBytes(GgmlType::Q4_K, 128), Error);
  EXPECT_THROW(GgmlRowBytes(GgmlType::F16, -1), Error);
  EXPECT_THROW(GgmlRowBytes(static_cast<GgmlType>(999), 32), Error);
}

// ---------------------------------------------------------------------------------------------------------
// Against gguf-py

TEST(DequantizeRow, FixtureCoversEveryDequantizableType) {
  const SafetensorsFile file = SafetensorsFile::Open(kFixture);
  for (GgmlType type : DequantizableTypes()) {
    EXPECT_TRUE(file.Contains(Name(type) + ".bytes")) << Name(type);
    EXPECT_TRUE(file.Contains(Name(type) + ".values")) << Name(type);
  }
  // And nothing in it goes unchecked: every tensor belongs to a dequantizable type.
  for (const TensorInfo& info : file.tensors()) {
    const std::string type_name = info.name.substr(0, info.name.find('.'));
    bool known = false;
    for (GgmlType type : DequantizableTypes()) known = known || Name(type) == type_name;
    EXPECT_TRUE(known) << info.name;
  }
}

class DequantizeFixture : public ::testing::TestWithParam<GgmlType> {};

TEST_P(DequantizeFixture, MatchesGgufPyBitForBit) {
  const GgmlType type = GetParam();
  const SafetensorsFile file = SafetensorsFile::Open(kFixture);
  const std::vector<std::uint8_t> raw = Bytes(file, Name(type) + ".bytes");
  const std::vector<std::uint32_t> expected = Bits(file, Name(type) + ".values");
  const GgmlTypeTraits traits = GgmlTraits(type);
  ASSERT_EQ(raw.size() % traits.block_bytes, 0u);
  const auto n = static_cast<std::int64_t>(raw.size() / traits.block_bytes * traits.block_elements);
  ASSERT_EQ(static_cast<std::size_t>(n), expected.size());
  ASSERT_EQ(GgmlRowBytes(type, n), static_cast<std::int64_t>(raw.size()));

  std::vector<float> out(n);
  DequantizeRow(type, raw.data(), out.data(), n);
  const std::vector<std::uint32_t> got = BitsOf(out);
  int mismatches = 0;
  for (std::int64_t i = 0; i < n && mismatches < 10; ++i) {
    if (got[i] != expected[i]) {
      ++mismatches;
      ADD_FAILURE() << Name(type) << " element " << i << " (block " << i / traits.block_elements << ", index "
                    << i % traits.block_elements << "): got " << out[i] << " (0x" << std::hex << got[i]
                    << "), gguf-py " << std::bit_cast<float>(expected[i]) << " (0x" << expected[i] << ")"
                    << std::dec;
    }
  }
}

TEST_P(DequantizeFixture, BlockByBlockAndFromUnalignedBytesGiveTheSameBits) {
  const GgmlType type = GetParam();
  const SafetensorsFile file = SafetensorsFile::Open(kFixture);
  const std::vector<std::uint8_t> raw = Bytes(file, Name(type) + ".bytes");
  const GgmlTypeTraits traits = GgmlTraits(type);
  const auto n = static_cast<std::int64_t>(raw.size() / traits.block_bytes * traits.block_elements);
  std::vector<float> whole(n);
  DequantizeRow(type, raw.data(), whole.data(), n);

  // One block per call: no state carries across blocks.
  std::vector<float> pieces(n);
  for (std::int64_t b = 0; b < n / traits.block_elements; ++b) {
    DequantizeRow(type, raw.data() + b * traits.block_bytes, pieces.data() + b * traits.block_elements,
                  traits.block_elements);
  }
  EXPECT_EQ(BitsOf(pieces), BitsOf(whole));

  // GGUF tensor data is only 32-byte aligned as a whole, and rows of odd-sized blocks start anywhere.
  std::vector<std::uint8_t> shifted(raw.size() + 3);
  std::memcpy(shifted.data() + 3, raw.data(), raw.size());
  std::vector<float> from_shifted(n);
  DequantizeRow(type, shifted.data() + 3, from_shifted.data(), n);
  EXPECT_EQ(BitsOf(from_shifted), BitsOf(whole));
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DequantizeFixture, ::testing::ValuesIn(DequantizableTypes()),
                         [](const ::testing::TestParamInfo<GgmlType>& param_info) {
                           return Name(param_info.param);
                         });

// ---------------------------------------------------------------------------------------------------------
// Errors

std::string ErrorOf(GgmlType type, std::int64_t n) {
  std::vector<std::uint8_t> src(1024);
  std::vector<float> dst(1024);
  try {
    DequantizeRow(type, src.data(), dst.data(), n);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(DequantizeRow, PartialBlockIsAnErrorNamingTypeBlockAndN) {
  const std::string message = ErrorOf(GgmlType::Q4_1, 33);
  EXPECT_NE(message.find("DequantizeRow"), std::string::npos) << message;
  EXPECT_NE(message.find("Q4_1"), std::string::npos) << message;
  EXPECT_NE(message.find("32"), std::string::npos) << message;
  EXPECT_NE(message.find("33"), std::string::npos) << message;
  EXPECT_NE(ErrorOf(GgmlType::Q6_K, 32).find("256"), std::string::npos);
  EXPECT_NE(ErrorOf(GgmlType::Q8_0, 16).find("Q8_0"), std::string::npos);
}

TEST(DequantizeRow, NegativeLengthIsAnError) {
  const std::string message = ErrorOf(GgmlType::F16, -2);
  EXPECT_NE(message.find("-2"), std::string::npos) << message;
  EXPECT_NE(message.find("negative"), std::string::npos) << message;
}

TEST(DequantizeRow, UnsupportedTypeIsAnErrorNamingItAndTheSupportedOnes) {
  const std::string message = ErrorOf(GgmlType::IQ2_XXS, 256);
  EXPECT_NE(message.find("IQ2_XXS"), std::string::npos) << message;
  EXPECT_NE(message.find("supported: F32"), std::string::npos) << message;
  const std::string unknown = ErrorOf(static_cast<GgmlType>(999), 32);
  EXPECT_NE(unknown.find("999"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("not a known ggml type"), std::string::npos) << unknown;
}

TEST(DequantizeRow, ZeroElementsTouchNothing) {
  for (GgmlType type : DequantizableTypes()) EXPECT_NO_THROW(DequantizeRow(type, nullptr, nullptr, 0));
}

}  // namespace

// Readable parameter names in gtest's output.
void PrintTo(GgmlType type, std::ostream* out) {
  *out << GgmlTypeName(type);
}
}  // namespace plumb
