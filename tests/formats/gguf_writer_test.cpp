// Tests of the GGUF writer (docs/formats.md, "Writing GGUF"): write -> GgufFile -> the same values for every
// value type and the same tensor bytes at every alignment; byte for byte what the test builder (and so
// gguf-py's layout) gives for the same input; and one refusal per rule the reader would otherwise enforce.
#include "plumb/formats/gguf_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/formats/gguf.h"
#include "support/errors.h"
#include "support/gguf_builder.h"

namespace plumb {
namespace {

using testing::ErrorOf;
using testing::ExpectMessageHas;
using testing::ExpectSameGgufValue;
using testing::GgufBuilder;

// A tensor's bytes: a pattern that differs per tensor, so a misplaced tensor cannot read back as another.
std::vector<std::uint8_t> Pattern(std::size_t n, int seed) {
  std::vector<std::uint8_t> bytes(n);
  for (std::size_t k = 0; k < n; ++k) bytes[k] = static_cast<std::uint8_t>(k * 13 + seed * 71 + 5);
  return bytes;
}

TEST(GgufWriter, EveryValueTypeRoundTrips) {
  const auto values = testing::GgufValueSamples();
  GgufWriter writer;
  for (const auto& [key, value] : values) writer.Add(key, value);
  const std::vector<std::uint8_t> bytes = writer.Bytes();
  const GgufFile file = GgufFile::FromBytes(bytes, "w.gguf");
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.alignment(), 32u);
  EXPECT_TRUE(file.tensors().empty());
  // No tensors: the file ends with the padding after the metadata (as gguf-py writes it).
  EXPECT_EQ(file.data_offset(), bytes.size());
  EXPECT_EQ(bytes.size() % 32, 0u);
  ASSERT_EQ(file.metadata().size(), values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(file.metadata()[i].first, values[i].first);  // order kept
    ExpectSameGgufValue(file.metadata()[i].second, values[i].second, values[i].first);
  }
  EXPECT_TRUE(writer.Has("u8"));
  EXPECT_FALSE(writer.Has("absent"));
}

// Awkward tensor sizes (not multiples of the alignment, quantized blocks) under the default alignment and
// general.alignment 1, 8 and 64: written to disk, opened, every byte where it belongs.
TEST(GgufWriter, TensorsRoundTripAtEveryAlignment) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("plumb-gguf-writer-" + std::to_string(::getpid()) + ".gguf");
  for (const std::uint32_t alignment : {0u, 1u, 8u, 64u}) {
    SCOPED_TRACE(alignment);
    GgufWriter writer;
    writer.Add("general.architecture", GgufString("llama"));
    if (alignment != 0) writer.Add("general.alignment", GgufUint32(alignment));
    writer.AddTensor("norm", GgmlType::F32, {5}, Pattern(20, 1))
        .AddTensor("blk.0.q", GgmlType::Q8_0, {64, 3}, Pattern(2 * 34 * 3, 2))
        .AddTensor("blk.0.k", GgmlType::Q4_1, {32, 1, 2}, Pattern(2 * 20, 3))
        .AddTensor("f16", GgmlType::F16, {3, 1, 1, 2}, Pattern(12, 4));
    writer.WriteFile(path.string());
    const GgufFile file = GgufFile::Open(path.string());
    const std::uint64_t expected_alignment = alignment == 0 ? 32 : alignment;
    EXPECT_EQ(file.alignment(), expected_alignment);
    EXPECT_EQ(writer.alignment(), expected_alignment);
    ASSERT_EQ(file.tensors().size(), 4u);
    const std::vector<std::vector<std::uint64_t>> dims = {{5}, {64, 3}, {32, 1, 2}, {3, 1, 1, 2}};
    const std::vector<std::size_t> sizes = {20, 204, 40, 12};
    std::uint64_t expected_offset = 0;
    for (std::size_t i = 0; i < 4; ++i) {
      const GgufTensorInfo& t = file.tensors()[i];
      EXPECT_EQ(t.dims, dims[i]) << t.name;
      EXPECT_EQ(t.offset, expected_offset) << t.name;  // packed in order, each start aligned
      EXPECT_EQ(t.file_offset % expected_alignment, 0u) << t.name;
      const std::vector<std::uint8_t> want = Pattern(sizes[i], static_cast<int>(i + 1));
      EXPECT_EQ(std::vector<std::uint8_t>(t.bytes().begin(), t.bytes().end()), want) << t.name;
      expected_offset = GgufAlignUp(expected_offset + sizes[i], expected_alignment);
    }
    EXPECT_EQ(std::filesystem::file_size(path), file.data_offset() + expected_offset);  // last one padded
  }
  std::filesystem::remove(path);
}

// The builder encodes with the writer's functions but lays the file out itself (to record offsets): for a
// valid input the two must agree byte for byte, so the builder's many reader tests cover the writer's files.
TEST(GgufWriter, SameBytesAsTheTestBuilder) {
  for (const std::uint32_t alignment : {0u, 16u}) {
    SCOPED_TRACE(alignment);
    GgufWriter writer;
    GgufBuilder builder;
    if (alignment != 0) {
      writer.Add("general.alignment", GgufUint32(alignment));
      builder.SetAlignment(alignment);
    }
    for (const auto& [key, value] : testing::GgufValueSamples()) {
      writer.Add(key, value);
      builder.Add(key, value);
    }
    writer.AddTensor("a", GgmlType::Q8_0, {32, 3}, Pattern(3 * 34, 1))
        .AddTensor("b", GgmlType::F32, {7}, Pattern(28, 2));
    builder.AddTensor("a", GgmlType::Q8_0, {32, 3}, Pattern(3 * 34, 1))
        .AddTensor("b", GgmlType::F32, {7}, Pattern(28, 2));
    EXPECT_TRUE(writer.Bytes() == builder.Bytes());
  }
}

TEST(GgufWriter, RefusesWhatTheReaderWouldReject) {
  auto add_error = [](const std::string& key, const GgufValue& value) {
    return ErrorOf([&] { GgufWriter().Add(key, value); });
  };
  ExpectMessageHas(ErrorOf([] { GgufWriter().Add("", GgufUint8(1)); }), {"key #0", "empty"});
  ExpectMessageHas(ErrorOf([] { GgufWriter().Add("k", GgufUint8(1)).Add("k", GgufString("x")); }),
                   {"'k'", "added twice"});
  ExpectMessageHas(add_error("t", GgufInteger(static_cast<GgufValueType>(13), 0)), {"'t'", "value type 13"});
  ExpectMessageHas(add_error("u8", GgufInteger(GgufValueType::UINT8, 256)), {"'u8'", "256", "uint8"});
  ExpectMessageHas(add_error("i8", GgufInteger(GgufValueType::INT8, -129)), {"'i8'", "-129", "int8"});
  ExpectMessageHas(add_error("u32", GgufInteger(GgufValueType::UINT32, -1)), {"'u32'", "-1", "uint32"});
  ExpectMessageHas(add_error("i32", GgufInteger(GgufValueType::INT32, std::int64_t{1} << 31)),
                   {"'i32'", "int32"});
  GgufValue inexact = GgufFloat32(0);
  inexact.number = 0.1;  // a double a float cannot hold
  ExpectMessageHas(add_error("f", inexact), {"'f'", "float32"});
  ExpectMessageHas(add_error("a", GgufArray(GgufValueType::UINT32, {GgufUint32(1), GgufUint16(2)})),
                   {"'a'[1]", "uint16", "array of uint32"});
  ExpectMessageHas(add_error("e", GgufArray(static_cast<GgufValueType>(99), {})), {"'e'", "element type 99"});
  ExpectMessageHas(
      add_error("n", GgufArray(GgufValueType::ARRAY, {GgufIntArray(GgufValueType::UINT8, {300})})),
      {"'n'[0][0]", "300"});
  const auto nested = [](int depth) {
    GgufValue value = GgufIntArray(GgufValueType::UINT8, {7});
    for (int level = 1; level < depth; ++level) value = GgufArray(GgufValueType::ARRAY, {value});
    return value;
  };
  EXPECT_NO_THROW(GgufWriter().Add("deep", nested(64)));  // the reader's limit, as gguf_test checks
  ExpectMessageHas(add_error("deeper", nested(65)), {"'deeper'", "nested more than 64"});
  ExpectMessageHas(add_error("general.alignment", GgufUint64(32)), {"general.alignment", "uint64"});
  ExpectMessageHas(add_error("general.alignment", GgufUint32(24)),
                   {"general.alignment", "24", "power of two"});
  ExpectMessageHas(add_error("general.alignment", GgufUint32(0)), {"general.alignment", "power of two"});

  auto tensor_error = [](std::vector<std::uint64_t> dims, std::size_t bytes, GgmlType type = GgmlType::F32) {
    return ErrorOf([&] { GgufWriter().AddTensor("w", type, dims, std::vector<std::uint8_t>(bytes)); });
  };
  ExpectMessageHas(ErrorOf([] {
                     GgufWriter().AddTensor("", GgmlType::F32, {1}, {0, 0, 0, 0});
                   }),
                   {"tensor #0", "empty"});
  ExpectMessageHas(ErrorOf([] {
                     GgufWriter()
                         .AddTensor("w", GgmlType::F32, {1}, {0, 0, 0, 0})
                         .AddTensor("w", GgmlType::F32, {1}, {0, 0, 0, 0});
                   }),
                   {"'w'", "added twice"});
  ExpectMessageHas(tensor_error({}, 4), {"'w'", "0 dims"});
  ExpectMessageHas(tensor_error({1, 1, 1, 1, 1}, 4), {"'w'", "5 dims"});
  ExpectMessageHas(tensor_error({4, 0}, 0), {"'w'", "dims[1] is 0"});
  ExpectMessageHas(tensor_error({16, 2}, 34, GgmlType::Q8_0), {"'w'", "dims[0] = 16", "Q8_0"});
  ExpectMessageHas(tensor_error({3}, 11), {"'w'", "11 bytes", "expected 3 blocks of 4 bytes"});
  ExpectMessageHas(tensor_error({std::uint64_t{1} << 32, std::uint64_t{1} << 32}, 0), {"'w'", "2^63 - 1"});
}

TEST(GgufWriter, WriteFileNamesThePath) {
  const std::string path = "/nonexistent-plumb-dir/x.gguf";
  ExpectMessageHas(ErrorOf([&] { GgufWriter().Add("k", GgufBool(true)).WriteFile(path); }),
                   {"cannot create", path});
}

}  // namespace
}  // namespace plumb
