// Tests of the GGUF reader (docs/formats.md, "GGUF container"): builder -> reader round trips of every
// value type, files written by the gguf reference package (fixtures/gguf, made by
// tools/reference/make_gguf_samples.py), the real SmolLM2 model, and one test per malformed-file check, each
// asserting that the error names the file, the field and the byte offset the builder recorded for it.
#include "plumb/formats/gguf.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "plumb/core/error.h"
#include "support/errors.h"
#include "support/gguf_builder.h"

namespace plumb {
namespace {

using testing::ErrorOf;
using testing::ExpectMessageHas;
using testing::ExpectSameGgufValue;

using testing::GgufArray;
using testing::GgufBool;
using testing::GgufBuilder;
using testing::GgufFloat32;
using testing::GgufFloat32Array;
using testing::GgufFloat64;
using testing::GgufImage;
using testing::GgufInt16;
using testing::GgufInt32;
using testing::GgufInt64;
using testing::GgufInt8;
using testing::GgufIntArray;
using testing::GgufString;
using testing::GgufStringArray;
using testing::GgufTensorSpec;
using testing::GgufUint16;
using testing::GgufUint32;
using testing::GgufUint64;
using testing::GgufUint8;

constexpr char kName[] = "test.gguf";

// ---------------------------------------------------------------------------------------------------------
// Helpers

GgufFile Parse(const std::vector<std::uint8_t>& bytes) {
  return GgufFile::FromBytes(bytes, kName);
}

std::string At(std::uint64_t offset) {
  return " at offset " + std::to_string(offset) + ": ";
}

// Expects the reader to reject `bytes` with a message that starts with the file name and contains every
// needle (typically the field's name and " at offset N: ").
#define EXPECT_REJECTED(bytes, ...)                                          \
  do {                                                                       \
    SCOPED_TRACE("EXPECT_REJECTED");                                         \
    const std::string message_ = ErrorOf([&] { Parse(bytes); });             \
    EXPECT_EQ(message_.rfind(std::string(kName) + ": ", 0), 0u) << message_; \
    ExpectMessageHas(message_, {__VA_ARGS__});                               \
  } while (0)

// A small valid file with a bit of everything: the base of the corruption tests.
GgufBuilder SmallBuilder() {
  GgufBuilder b;
  b.Add("general.architecture", GgufString("llama"))
      .Add("llama.block_count", GgufUint32(2))
      .Add("tokenizer.ggml.tokens", GgufStringArray({"<s>", "a", ""}))
      .Add("nested", GgufArray(GgufValueType::ARRAY, {GgufIntArray(GgufValueType::INT16, {1, -2}),
                                                      GgufIntArray(GgufValueType::INT16, {3})}))
      .Add("flag", GgufBool(true))
      .AddTensor("token_embd.weight", GgmlType::Q8_0, {32, 3})
      .AddTensor("norm", GgmlType::F32, {5});
  return b;
}

// ---------------------------------------------------------------------------------------------------------
// Round trips through the builder

TEST(GgufRead, EveryValueTypeRoundTrips) {
  const std::vector<std::pair<std::string, GgufValue>> values = testing::GgufValueSamples();
  GgufBuilder builder;
  for (const auto& [key, value] : values) builder.Add(key, value);
  const GgufFile file = Parse(builder.Bytes());

  ASSERT_EQ(file.metadata().size(), values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(file.metadata()[i].first, values[i].first);  // file order kept
    ExpectSameGgufValue(file.metadata()[i].second, values[i].second, values[i].first);
    ASSERT_NE(file.FindValue(values[i].first), nullptr);
    EXPECT_EQ(file.FindValue(values[i].first), &file.metadata()[i].second);
  }
  EXPECT_EQ(file.FindValue("absent"), nullptr);
  EXPECT_FALSE(file.Has("absent"));
  EXPECT_TRUE(std::isnan(file.FindValue("f32.nan")->number));
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.alignment(), 32u);
  EXPECT_TRUE(file.tensors().empty());
}

TEST(GgufRead, VersionsTwoAndThreeReadAlike) {
  for (const std::uint32_t version : {2u, 3u}) {
    SCOPED_TRACE(version);
    const GgufImage image = SmallBuilder().SetVersion(version).Build();
    const GgufFile file = Parse(image.bytes);
    EXPECT_EQ(file.version(), version);
    EXPECT_EQ(file.GetStringArray("tokenizer.ggml.tokens"), (std::vector<std::string>{"<s>", "a", ""}));
    EXPECT_EQ(file.tensors().size(), 2u);
  }
}

TEST(GgufRead, TensorInfosAndDataPointIntoTheFile) {
  GgufBuilder builder = SmallBuilder();
  builder.AddTensor("q41", GgmlType::Q4_1, {64, 2, 3}).AddTensor("f16", GgmlType::F16, {3, 1, 1, 2});
  const GgufImage image = builder.Build();
  const GgufFile file = Parse(image.bytes);

  EXPECT_EQ(file.data_offset(), image.at.data_offset);
  EXPECT_EQ(file.data_offset() % 32, 0u);
  ASSERT_EQ(file.tensors().size(), builder.tensors().size());
  for (std::size_t i = 0; i < builder.tensors().size(); ++i) {
    const GgufTensorSpec& want = builder.tensors()[i];
    const GgufTensorInfo& got = file.tensors()[i];
    SCOPED_TRACE(want.name);
    EXPECT_EQ(got.name, want.name);
    EXPECT_EQ(static_cast<std::uint32_t>(got.type), want.type_id);
    EXPECT_EQ(got.dims, want.dims);
    std::uint64_t product = 1;
    for (const std::uint64_t d : want.dims) product *= d;
    EXPECT_EQ(got.n_elements, product);
    const GgmlTypeTraits traits = GgmlTraits(got.type);
    EXPECT_EQ(got.n_bytes, product / static_cast<std::uint64_t>(traits.block_elements) *
                               static_cast<std::uint64_t>(traits.block_bytes));
    EXPECT_EQ(got.n_bytes, want.data.size());
    EXPECT_EQ(got.file_offset, image.at.tensors[i].data_at);
    EXPECT_EQ(got.offset, got.file_offset - file.data_offset());
    EXPECT_EQ(got.offset % 32, 0u);
    ASSERT_EQ(got.bytes().size(), want.data.size());
    EXPECT_TRUE(std::equal(want.data.begin(), want.data.end(), got.bytes().begin()));
    EXPECT_EQ(file.FindTensor(want.name), &got);
  }
  EXPECT_EQ(file.FindTensor("absent"), nullptr);
}

TEST(GgufRead, CustomAlignmentPlacesTheDataSection) {
  for (const std::uint32_t alignment : {1u, 8u, 64u, 4096u}) {
    SCOPED_TRACE(alignment);
    GgufBuilder builder = SmallBuilder();
    const GgufImage image = builder.SetAlignment(alignment).AddTensor("extra", GgmlType::I8, {3}).Build();
    const GgufFile file = Parse(image.bytes);
    EXPECT_EQ(file.alignment(), alignment);
    EXPECT_EQ(file.data_offset(), image.at.data_offset);
    EXPECT_EQ(file.data_offset() % alignment, 0u);
    for (std::size_t i = 0; i < file.tensors().size(); ++i) {
      EXPECT_EQ(file.tensors()[i].file_offset, image.at.tensors[i].data_at);
    }
  }
}

// Overlaps are rejected, but gaps and any order are not: see docs/formats.md, "GGUF container".
TEST(GgufRead, GapsAndOutOfOrderOffsetsAreAccepted) {
  GgufBuilder builder;
  builder.AddTensor(GgufTensorSpec{"late", 0, {4}, std::vector<std::uint8_t>(16, 1), 256})
      .AddTensor(GgufTensorSpec{"early", 0, {8}, std::vector<std::uint8_t>(32, 2), 32});
  const GgufFile file = Parse(builder.Bytes());
  EXPECT_EQ(file.FindTensor("late")->offset, 256u);
  EXPECT_EQ(file.FindTensor("late")->bytes()[0], 1);
  EXPECT_EQ(file.FindTensor("early")->offset, 32u);
  EXPECT_EQ(file.FindTensor("early")->bytes()[31], 2);
}

TEST(GgufRead, ArraysNest64DeepButNotDeeper) {
  const auto nested = [](int depth) {
    GgufValue value = GgufIntArray(GgufValueType::UINT8, {7});
    for (int level = 1; level < depth; ++level) value = GgufArray(GgufValueType::ARRAY, {value});
    return value;
  };
  const GgufFile file = Parse(GgufBuilder().Add("deep", nested(64)).Bytes());
  const GgufValue* value = file.FindValue("deep");
  for (int level = 1; level < 64; ++level) {
    ASSERT_EQ(value->element_type, GgufValueType::ARRAY);
    value = &value->elements.at(0);
  }
  EXPECT_EQ(value->elements.at(0).integer, 7);

  const GgufImage image = GgufBuilder().Add("deeper", nested(65)).Build();
  // The 64th array's element type (ARRAY) is what is refused: 63 levels of 12-byte headers in.
  EXPECT_REJECTED(image.bytes, "metadata key 'deeper' (entry 0) value",
                  "array element type" + At(image.at.kvs[0].value_at + 63 * 12), "nested more than 64");
}

TEST(GgufRead, OpenReadsAFileAndNamesAMissingOne) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("plumb_gguf_test_" + std::to_string(::getpid()) + ".gguf");
  const GgufImage image = SmallBuilder().Build();
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(image.bytes.data()),
              static_cast<std::streamsize>(image.bytes.size()));
  }
  {
    GgufFile file = GgufFile::Open(path.string());
    EXPECT_EQ(file.path(), path.string());
    EXPECT_EQ(file.GetString("general.architecture"), "llama");
    const GgufTensorInfo* norm = file.FindTensor("norm");
    ASSERT_NE(norm, nullptr);
    EXPECT_EQ(norm->data[0], image.bytes[image.at.tensors[1].data_at]);
    const GgufFile moved = std::move(file);  // the data pointers stay valid when the file moves
    EXPECT_EQ(moved.FindTensor("norm")->data[0], image.bytes[image.at.tensors[1].data_at]);
  }
  std::filesystem::remove(path);
  ExpectMessageHas(ErrorOf([&] { GgufFile::Open(path.string()); }), {path.string()});
}

// ---------------------------------------------------------------------------------------------------------
// Typed getters

TEST(GgufGetters, ReturnValuesOfTheRightTypes) {
  GgufBuilder builder;
  builder.Add("u8", GgufUint8(200))
      .Add("i32", GgufInt32(7))
      .Add("u64", GgufUint64(std::numeric_limits<std::uint64_t>::max()))
      .Add("f32", GgufFloat32(0.25f))
      .Add("f64", GgufFloat64(1e-300))
      .Add("b", GgufBool(true))
      .Add("s", GgufString("text"))
      .Add("strs", GgufStringArray({"a", "b"}))
      .Add("f32s", GgufFloat32Array({1.5f, 2.5f}))
      .Add("f64s", GgufArray(GgufValueType::FLOAT64, {GgufFloat64(-3.0)}))
      .Add("i8s", GgufIntArray(GgufValueType::INT8, {-1, 2}))
      .Add("u64s", GgufIntArray(GgufValueType::UINT64, {0, std::numeric_limits<std::int64_t>::max()}))
      .Add("empty", GgufArray(GgufValueType::STRING, {}));
  const GgufFile file = Parse(builder.Bytes());
  EXPECT_EQ(file.GetUint("u8"), 200u);
  EXPECT_EQ(file.GetUint("i32"), 7u);
  EXPECT_EQ(file.GetUint("u64"), std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(file.FindUint("absent"), std::nullopt);
  EXPECT_EQ(file.GetFloat("f32"), 0.25);
  EXPECT_EQ(file.GetFloat("f64"), 1e-300);
  EXPECT_EQ(file.FindFloat("absent"), std::nullopt);
  EXPECT_TRUE(file.GetBool("b"));
  EXPECT_EQ(file.FindBool("absent"), std::nullopt);
  EXPECT_EQ(file.GetString("s"), "text");
  EXPECT_EQ(file.FindString("s"), std::optional<std::string>("text"));
  EXPECT_EQ(file.FindString("absent"), std::nullopt);
  EXPECT_EQ(file.GetStringArray("strs"), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(file.GetStringArray("empty").empty());
  EXPECT_EQ(file.GetFloatArray("f32s"), (std::vector<double>{1.5, 2.5}));
  EXPECT_EQ(file.GetFloatArray("f64s"), (std::vector<double>{-3.0}));
  EXPECT_EQ(file.GetIntArray("i8s"), (std::vector<std::int64_t>{-1, 2}));
  EXPECT_EQ(file.GetIntArray("u64s"),
            (std::vector<std::int64_t>{0, std::numeric_limits<std::int64_t>::max()}));
}

TEST(GgufGetters, NameTheKeyOnMissingOrMistypedValues) {
  GgufBuilder builder;
  builder.Add("neg", GgufInt8(-3))
      .Add("s", GgufString("x"))
      .Add("u32", GgufUint32(1))
      .Add("strs", GgufStringArray({"a"}))
      .Add("nested", GgufArray(GgufValueType::ARRAY, {GgufStringArray({"a"})}))
      .Add("big", GgufIntArray(GgufValueType::UINT64, {1, -1}));
  const GgufFile file = Parse(builder.Bytes());
  const std::string prefix = std::string(kName) + ": metadata key ";
  EXPECT_EQ(ErrorOf([&] { file.GetUint("absent"); }), prefix + "'absent' is missing");
  EXPECT_EQ(ErrorOf([&] { file.GetString("absent"); }), prefix + "'absent' is missing");
  EXPECT_EQ(ErrorOf([&] { file.GetStringArray("absent"); }), prefix + "'absent' is missing");
  ExpectMessageHas(ErrorOf([&] { file.GetUint("neg"); }), {prefix + "'neg'", "negative value -3", "int8"});
  EXPECT_EQ(ErrorOf([&] { file.GetUint("s"); }), prefix + "'s' has type string, expected an integer");
  EXPECT_EQ(ErrorOf([&] { file.FindFloat("u32"); }),
            prefix + "'u32' has type uint32, expected float32 or float64");
  EXPECT_EQ(ErrorOf([&] { file.GetBool("u32"); }), prefix + "'u32' has type uint32, expected bool");
  EXPECT_EQ(ErrorOf([&] { file.FindString("u32"); }), prefix + "'u32' has type uint32, expected string");
  EXPECT_EQ(ErrorOf([&] { file.GetIntArray("strs"); }),
            prefix + "'strs' has type array of string, expected array of integers");
  EXPECT_EQ(ErrorOf([&] { file.GetFloatArray("s"); }),
            prefix + "'s' has type string, expected array of float32 or float64");
  EXPECT_EQ(ErrorOf([&] { file.GetStringArray("nested"); }),
            prefix + "'nested' has type array of array of string, expected array of string");
  ExpectMessageHas(ErrorOf([&] { file.GetIntArray("big"); }),
                   {prefix + "'big' element 1", "18446744073709551615", "does not fit in int64"});
}

TEST(GgufGetters, ValueTypeNames) {
  EXPECT_EQ(GgufValueTypeName(GgufValueType::UINT8), "uint8");
  EXPECT_EQ(GgufValueTypeName(GgufValueType::FLOAT64), "float64");
  EXPECT_EQ(GgufValueTypeName(GgufValueType::ARRAY), "array");
  EXPECT_EQ(GgufValueTypeName(static_cast<GgufValueType>(13)), "unknown");
}

// ---------------------------------------------------------------------------------------------------------
// Malformed files: each check, its field and its offset

TEST(GgufReject, EveryTruncationIsAnErrorNeverACrash) {
  const GgufImage image = SmallBuilder().Build();
  // The last tensor ends short of the file's end only by padding; up to its last byte every cut is fatal.
  const std::uint64_t needed = image.at.tensors.back().data_at + 5 * 4;
  for (std::size_t n = 0; n < needed; ++n) {
    SCOPED_TRACE("prefix of " + std::to_string(n) + " bytes");
    const std::string message = ErrorOf([&] { Parse(image.Prefix(n)); });
    EXPECT_EQ(message.rfind(std::string(kName) + ": ", 0), 0u) << message;
    EXPECT_NE(message.find(" at offset "), std::string::npos) << message;
  }
  EXPECT_NO_THROW(Parse(image.Prefix(static_cast<std::size_t>(needed))));
}

// Not a check of its own: any byte of the header, metadata or tensor infos set to 0x00, 0xFF or one more
// than it was must give a valid file or a plumb::Error, never a crash or (under ASan) a bad read.
TEST(GgufReject, EveryCorruptedByteIsHandled) {
  GgufBuilder builder = SmallBuilder();
  const GgufImage image = builder.SetAlignment(32).Build();
  int rejected = 0;
  for (std::size_t at = 0; at < image.at.infos_end; ++at) {
    for (const int change : {0, 1, 2}) {
      std::vector<std::uint8_t> bytes = image.bytes;
      bytes[at] = change == 0 ? 0x00 : change == 1 ? 0xFF : static_cast<std::uint8_t>(bytes[at] + 1);
      try {
        Parse(bytes);
      } catch (const Error& e) {
        ++rejected;
        EXPECT_EQ(std::string(e.what()).rfind(std::string(kName) + ": ", 0), 0u) << e.what();
      }
    }
  }
  EXPECT_GT(rejected, 0);
}

TEST(GgufReject, TruncationNamesTheFieldBeingRead) {
  const GgufImage image = SmallBuilder().Build();
  EXPECT_REJECTED(image.Prefix(2), "magic" + At(0), "needs 4 bytes");
  EXPECT_REJECTED(image.Prefix(6), "version" + At(4));
  EXPECT_REJECTED(image.Prefix(12), "tensor_count" + At(8));
  EXPECT_REJECTED(image.Prefix(20), "kv_count" + At(16));
  // (A single entry: with more, the cut makes kv_count too large for the bytes left, caught first.)
  const GgufImage one = GgufBuilder().Add("arch", GgufString("llama")).Build();
  const std::uint64_t arch_at = one.at.kvs[0].value_at;  // "llama": length 5, then the bytes
  EXPECT_REJECTED(one.Prefix(static_cast<std::size_t>(arch_at + 8 + 2)),
                  "metadata key 'arch' (entry 0) value string length" + At(arch_at),
                  "string length 5 runs past the end");
  const std::uint64_t dims_at = image.at.tensors[1].dims_at;
  EXPECT_REJECTED(image.Prefix(static_cast<std::size_t>(dims_at + 4)),
                  "tensor 1 ('norm') dims[0]" + At(dims_at), "needs 8 bytes");
  EXPECT_REJECTED(image.Prefix(static_cast<std::size_t>(image.at.infos_end + 1)),
                  "data section" + At(image.at.infos_end));
}

TEST(GgufReject, BadMagic) {
  GgufImage image = SmallBuilder().Build();
  image.PatchByte(3, 'X');
  EXPECT_REJECTED(image.bytes, "magic" + At(0), "'GGUX'", "not a GGUF file");
}

TEST(GgufReject, VersionOneAndUnknownVersions) {
  EXPECT_REJECTED(SmallBuilder().SetVersion(1).Bytes(), "version" + At(4), "version 1", "not supported");
  EXPECT_REJECTED(SmallBuilder().SetVersion(0).Bytes(), "version" + At(4), "unsupported GGUF version 0");
  EXPECT_REJECTED(SmallBuilder().SetVersion(4).Bytes(), "version" + At(4), "unsupported GGUF version 4");
}

TEST(GgufReject, BigEndianFile) {
  GgufImage image = SmallBuilder().Build();
  image.PatchU32(image.at.version_at, 0x03000000u);  // 3, byte-swapped
  EXPECT_REJECTED(image.bytes, "version" + At(4), "big-endian");
}

TEST(GgufReject, CountsPastTheEnd) {
  for (const std::uint64_t count :
       {std::uint64_t{1} << 60, std::numeric_limits<std::uint64_t>::max(), std::uint64_t{1000}}) {
    SCOPED_TRACE(count);
    GgufImage image = SmallBuilder().Build();
    image.PatchU64(image.at.tensor_count_at, count);
    EXPECT_REJECTED(image.bytes, "tensor_count" + At(8), std::to_string(count) + " tensor infos cannot fit");
    image = SmallBuilder().Build();
    image.PatchU64(image.at.kv_count_at, count);
    EXPECT_REJECTED(image.bytes, "kv_count" + At(16), std::to_string(count) + " entries cannot fit");
  }
}

TEST(GgufReject, StringLengthPastTheEnd) {
  GgufImage image = SmallBuilder().Build();
  image.PatchU64(image.at.kvs[1].key_at, std::uint64_t{1} << 62);
  EXPECT_REJECTED(image.bytes, "metadata entry 1 key length" + At(image.at.kvs[1].key_at),
                  "string length 4611686018427387904 runs past the end");
  image = SmallBuilder().Build();
  image.PatchU64(image.at.kvs[0].value_at, image.bytes.size());  // "llama" -> longer than what is left
  EXPECT_REJECTED(image.bytes, "metadata key 'general.architecture' (entry 0) value string length" +
                                   At(image.at.kvs[0].value_at));
  image = SmallBuilder().Build();
  image.PatchU64(image.at.tensors[1].name_at, std::numeric_limits<std::uint64_t>::max());
  EXPECT_REJECTED(image.bytes, "tensor 1 name length" + At(image.at.tensors[1].name_at));
}

TEST(GgufReject, ArrayCountPastTheEnd) {
  // 2^60 one-byte elements: must be an error before anything is allocated, not a bad_alloc.
  GgufImage image = GgufBuilder().Add("bytes", GgufIntArray(GgufValueType::UINT8, {1, 2, 3})).Build();
  const std::uint64_t count_at = image.at.kvs[0].value_at + 4;
  image.PatchU64(count_at, std::uint64_t{1} << 60);
  EXPECT_REJECTED(image.bytes, "metadata key 'bytes' (entry 0) value array count" + At(count_at),
                  "1152921504606846976 elements of type uint8");
  // Strings take at least their 8-byte length each: 3 strings fit in the bytes of "<s>", "a", "", not 4.
  image = SmallBuilder().Build();
  const std::uint64_t tokens_count_at = image.at.kvs[2].value_at + 4;
  image.PatchU64(tokens_count_at, image.bytes.size() - tokens_count_at);
  EXPECT_REJECTED(image.bytes, "'tokenizer.ggml.tokens' (entry 2) value array count" + At(tokens_count_at),
                  "at least 8 bytes each");
  // An inner array's count, named with its index.
  image = SmallBuilder().Build();
  const std::uint64_t inner_count_at = image.at.kvs[3].value_at + 12 + 4;
  image.PatchU64(inner_count_at, std::numeric_limits<std::uint64_t>::max());
  EXPECT_REJECTED(image.bytes, "'nested' (entry 3) value[0] array count" + At(inner_count_at));
}

TEST(GgufReject, UnknownValueTypes) {
  GgufImage image = SmallBuilder().Build();
  image.PatchU32(image.at.kvs[4].type_at, 13);
  EXPECT_REJECTED(image.bytes, "metadata key 'flag' (entry 4) value type" + At(image.at.kvs[4].type_at),
                  "unknown value type 13");
  image = SmallBuilder().Build();
  image.PatchU32(image.at.kvs[2].value_at, 0xFFFFFFFFu);
  EXPECT_REJECTED(image.bytes,
                  "'tokenizer.ggml.tokens' (entry 2) value array element type" + At(image.at.kvs[2].value_at),
                  "unknown value type 4294967295");
}

TEST(GgufReject, BoolThatIsNeitherZeroNorOne) {
  const GgufImage image = GgufBuilder().AddRaw("b", 7, {2}).Build();
  EXPECT_REJECTED(image.bytes, "metadata key 'b' (entry 0) value" + At(image.at.kvs[0].value_at),
                  "bool byte is 2");
}

TEST(GgufReject, DuplicateAndEmptyKeys) {
  GgufBuilder builder = SmallBuilder();
  const GgufImage image = builder.Add("llama.block_count", GgufUint32(3)).Build();
  EXPECT_REJECTED(image.bytes, "metadata key 'llama.block_count' (entry 5)" + At(image.at.kvs[5].key_at),
                  "duplicate key: entry 1");
  // Keys are not checked as UTF-8; messages escape their bytes.
  const std::string odd("\xff\x01k", 3);
  const GgufImage odd_image = GgufBuilder().Add(odd, GgufUint8(1)).Add(odd, GgufUint8(2)).Build();
  EXPECT_REJECTED(odd_image.bytes, "metadata key '\\xFF\\x01k' (entry 1)", "duplicate key: entry 0");
  const GgufImage empty = GgufBuilder().Add("", GgufUint8(1)).Build();
  EXPECT_REJECTED(empty.bytes, "metadata entry 0 key" + At(empty.at.kvs[0].key_at), "the key is empty");
}

TEST(GgufReject, NDims) {
  for (const std::uint32_t n_dims : {0u, 5u, 0xFFFFFFFFu}) {
    SCOPED_TRACE(n_dims);
    GgufImage image = SmallBuilder().Build();
    image.PatchU32(image.at.tensors[1].n_dims_at, n_dims);
    EXPECT_REJECTED(image.bytes, "tensor 1 ('norm') n_dims" + At(image.at.tensors[1].n_dims_at),
                    "n_dims is " + std::to_string(n_dims) + ", must be 1 to 4");
  }
}

TEST(GgufReject, ZeroDim) {
  GgufImage image = SmallBuilder().Build();
  image.PatchU64(image.at.tensors[0].dims_at + 8, 0);
  EXPECT_REJECTED(image.bytes, "tensor 0 ('token_embd.weight') dims[1]" + At(image.at.tensors[0].dims_at + 8),
                  "dimension is 0");
}

TEST(GgufReject, ElementCountOverflow) {
  // Product past 2^64 (2^32 * 2^32 * 2) and product past 2^63 - 1 but within 2^64 (2^62 * 4).
  const std::uint64_t p32 = std::uint64_t{1} << 32;
  const std::uint64_t p62 = std::uint64_t{1} << 62;
  for (const auto& [dims, bad] : std::vector<std::pair<std::vector<std::uint64_t>, int>>{
           {{p32, p32, 2}, 1}, {{p62, 4}, 1}, {{std::numeric_limits<std::uint64_t>::max()}, 0}}) {
    const GgufImage image = GgufBuilder().AddTensor(GgufTensorSpec{"big", 24, dims, {}, 0}).Build();
    const std::uint64_t dim_at = image.at.tensors[0].dims_at + 8 * static_cast<std::uint64_t>(bad);
    EXPECT_REJECTED(image.bytes, "tensor 0 ('big') dims[" + std::to_string(bad) + "]" + At(dim_at),
                    "exceed 2^63 - 1");
  }
}

TEST(GgufReject, ByteCountOverflow) {
  // 2^62 F64 elements is a valid count, but 2^65 bytes.
  const GgufImage image =
      GgufBuilder().AddTensor(GgufTensorSpec{"f64", 28, {std::uint64_t{1} << 62}, {}, 0}).Build();
  EXPECT_REJECTED(image.bytes, "tensor 0 ('f64') type" + At(image.at.tensors[0].type_at),
                  "more than 2^64 bytes");
}

TEST(GgufReject, RowNotAWholeNumberOfBlocks) {
  // 16 elements of Q8_0 (block 32); and 33 x 32 = 1056 elements, a whole number of blocks in total, but
  // rows of 33 would make blocks straddle rows.
  for (const auto& dims : {std::vector<std::uint64_t>{16}, std::vector<std::uint64_t>{33, 32}}) {
    const GgufImage image = GgufBuilder().AddTensor(GgufTensorSpec{"q", 8, dims, {}, 0}).Build();
    EXPECT_REJECTED(image.bytes, "tensor 0 ('q') dims[0]" + At(image.at.tensors[0].dims_at),
                    "row length " + std::to_string(dims[0]) + " is not a multiple of the Q8_0 block size 32");
  }
}

TEST(GgufReject, UnknownGgmlType) {
  for (const std::uint32_t type : {4u, 5u, 31u, 40u, 1000u}) {
    GgufImage image = SmallBuilder().Build();
    image.PatchU32(image.at.tensors[1].type_at, type);
    EXPECT_REJECTED(image.bytes, "tensor 1 ('norm') type" + At(image.at.tensors[1].type_at),
                    "unknown ggml type id " + std::to_string(type));
  }
}

TEST(GgufReject, MisalignedOffset) {
  GgufImage image = SmallBuilder().Build();
  image.PatchU64(image.at.tensors[1].offset_at, 120);
  EXPECT_REJECTED(image.bytes, "tensor 1 ('norm') offset" + At(image.at.tensors[1].offset_at),
                  "data offset 120 is not a multiple of the alignment 32");
}

TEST(GgufReject, DataPastTheEnd) {
  const GgufImage base = SmallBuilder().Build();
  const std::uint64_t data_size = base.bytes.size() - base.at.data_offset;
  for (const std::uint64_t offset : {data_size, (std::numeric_limits<std::uint64_t>::max() / 32) * 32}) {
    SCOPED_TRACE(offset);
    GgufImage image = base;
    image.PatchU64(image.at.tensors[1].offset_at, offset);
    EXPECT_REJECTED(image.bytes, "tensor 1 ('norm') offset" + At(image.at.tensors[1].offset_at),
                    "runs past the end of the data section");
  }
  // The last tensor (F32, 5 elements, padded to 32 bytes) made 9 elements: 36 bytes, 4 past the end.
  GgufImage longer = base;
  longer.PatchU64(longer.at.tensors[1].dims_at, 9);
  EXPECT_REJECTED(longer.bytes, "tensor 1 ('norm') offset" + At(longer.at.tensors[1].offset_at),
                  "+ 36) runs past the end of the data section");
  // The file cut after the data section has started, inside the last tensor.
  EXPECT_REJECTED(base.Prefix(static_cast<std::size_t>(base.at.tensors[1].data_at + 19)),
                  "tensor 1 ('norm') offset" + At(base.at.tensors[1].offset_at), "runs past the end");
}

TEST(GgufReject, OverlappingTensors) {
  GgufImage image = SmallBuilder().Build();
  // token_embd (Q8_0 32x3 = 102 bytes) at 0; norm moved to 96, inside it.
  image.PatchU64(image.at.tensors[1].offset_at, 96);
  EXPECT_REJECTED(image.bytes, "tensor 1 ('norm') offset" + At(image.at.tensors[1].offset_at),
                  "data [96, 116) overlaps the data of tensor 0 ('token_embd.weight') at [0, 102)");
  // Same start: the later one in the file is named.
  image.PatchU64(image.at.tensors[1].offset_at, 0);
  EXPECT_REJECTED(image.bytes, "tensor 1 ('norm') offset", "overlaps the data of tensor 0");
}

TEST(GgufReject, DuplicateTensorNames) {
  GgufBuilder builder = SmallBuilder();
  const GgufImage image = builder.AddTensor("norm", GgmlType::F32, {2}).Build();
  EXPECT_REJECTED(image.bytes, "tensor 2 ('norm') name" + At(image.at.tensors[2].name_at),
                  "duplicate tensor name: tensor 1");
}

TEST(GgufReject, BadAlignment) {
  for (const std::uint32_t alignment : {0u, 48u, 3u, 0x80000001u}) {
    SCOPED_TRACE(alignment);
    GgufBuilder builder = SmallBuilder();
    // The key says `alignment`; the builder lays the data out at 32 (else 0x80000001 would pad ~2 GiB).
    const GgufImage image = builder.SetAlignment(alignment).SetLayoutAlignment(32).Build();
    EXPECT_REJECTED(image.bytes,
                    "metadata key 'general.alignment' (entry 5) value" + At(image.at.kvs[5].value_at),
                    "alignment " + std::to_string(alignment) + " is not a power of two");
  }
  for (const GgufValue& value : {GgufUint64(32), GgufInt32(32), GgufString("32")}) {
    const GgufImage image = GgufBuilder().Add("general.alignment", value).Build();
    EXPECT_REJECTED(image.bytes,
                    "metadata key 'general.alignment' (entry 0) value" + At(image.at.kvs[0].value_at),
                    "has type " + std::string(GgufValueTypeName(value.type)) + ", expected uint32");
  }
}

// ---------------------------------------------------------------------------------------------------------
// Files written by gguf-py (tools/reference/make_gguf_samples.py); the manifest says what was written.

std::string FixturePath(const std::string& name) {
  return std::string(PLUMB_SOURCE_DIR) + "/fixtures/gguf/" + name;
}

nlohmann::json LoadManifest() {
  std::ifstream in(FixturePath("manifest.json"));
  if (!in) throw MakeError(FixturePath("manifest.json"), ": cannot open");
  return nlohmann::json::parse(in);
}

std::string FromHex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  return out;
}

// The manifest's typed value as the GgufValue the reader should produce.
GgufValue ExpectedValue(const nlohmann::json& j) {
  const std::string type = j.at("type");
  if (type == "float32") {
    return GgufFloat32(std::bit_cast<float>(j.at("bits").get<std::uint32_t>()));
  }
  if (type == "float64") return GgufFloat64(std::bit_cast<double>(j.at("bits").get<std::uint64_t>()));
  if (type == "bool") return GgufBool(j.at("value").get<bool>());
  if (type == "string") return GgufString(FromHex(j.at("hex")));
  static const std::vector<std::pair<std::string, GgufValueType>> kTypes = {
      {"uint8", GgufValueType::UINT8},     {"int8", GgufValueType::INT8},
      {"uint16", GgufValueType::UINT16},   {"int16", GgufValueType::INT16},
      {"uint32", GgufValueType::UINT32},   {"int32", GgufValueType::INT32},
      {"uint64", GgufValueType::UINT64},   {"int64", GgufValueType::INT64},
      {"float32", GgufValueType::FLOAT32}, {"float64", GgufValueType::FLOAT64},
      {"bool", GgufValueType::BOOL},       {"string", GgufValueType::STRING},
      {"array", GgufValueType::ARRAY}};
  const auto type_of = [&](const std::string& name) {
    for (const auto& [n, t] : kTypes) {
      if (n == name) return t;
    }
    throw MakeError("manifest: unknown type ", name);
  };
  if (type == "array") {
    std::vector<GgufValue> elements;
    for (const nlohmann::json& e : j.at("elements")) elements.push_back(ExpectedValue(e));
    return GgufArray(type_of(j.at("element_type")), std::move(elements));
  }
  const nlohmann::json& v = j.at("value");
  const std::int64_t integer =
      v.is_number_unsigned() ? static_cast<std::int64_t>(v.get<std::uint64_t>()) : v.get<std::int64_t>();
  return testing::GgufInteger(type_of(type), integer);
}

TEST(GgufReferenceFiles, ReadExactlyWhatGgufPyWrote) {
  const nlohmann::json manifest = LoadManifest();
  int files_checked = 0;
  for (const auto& [name, want] : manifest.at("files").items()) {
    if (want.at("big_endian").get<bool>()) continue;
    SCOPED_TRACE(name);
    const GgufFile file = GgufFile::Open(FixturePath(name));
    EXPECT_EQ(file.version(), want.at("version").get<std::uint32_t>());
    EXPECT_EQ(file.alignment(), want.at("alignment").get<std::uint64_t>());
    EXPECT_EQ(file.data_offset(), want.at("data_offset").get<std::uint64_t>());

    const nlohmann::json& metadata = want.at("metadata");
    ASSERT_EQ(file.metadata().size(), metadata.size());
    for (std::size_t i = 0; i < metadata.size(); ++i) {
      const std::string key = metadata[i].at("key");
      EXPECT_EQ(file.metadata()[i].first, key);
      ExpectSameGgufValue(file.metadata()[i].second, ExpectedValue(metadata[i]), key);
    }

    const nlohmann::json& tensors = want.at("tensors");
    ASSERT_EQ(file.tensors().size(), tensors.size());
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const GgufTensorInfo& got = file.tensors()[i];
      const nlohmann::json& t = tensors[i];
      SCOPED_TRACE(got.name);
      EXPECT_EQ(got.name, t.at("name").get<std::string>());
      EXPECT_EQ(static_cast<std::uint32_t>(got.type), t.at("type").get<std::uint32_t>());
      EXPECT_EQ(GgmlTypeName(got.type), t.at("type_name").get<std::string>());
      EXPECT_EQ(got.dims, t.at("dims").get<std::vector<std::uint64_t>>());
      EXPECT_EQ(got.offset, t.at("offset").get<std::uint64_t>());
      EXPECT_EQ(got.n_bytes, t.at("n_bytes").get<std::uint64_t>());
      const std::string data = FromHex(t.at("data_hex"));
      ASSERT_EQ(got.bytes().size(), data.size());
      EXPECT_EQ(std::memcmp(got.data, data.data(), data.size()), 0);
    }
    ++files_checked;
  }
  EXPECT_EQ(files_checked, 3);
}

TEST(GgufReferenceFiles, BigEndianFileIsRejectedAsSuch) {
  const std::string path = FixturePath("big_endian_v3.gguf");
  ExpectMessageHas(ErrorOf([&] { GgufFile::Open(path); }), {path + ": version" + At(4), "big-endian"});
}

// ---------------------------------------------------------------------------------------------------------
// The real model (the test command fetches it first, so its absence is a failure, not a skip)

TEST(GgufRealModel, SmolLM2Q41) {
  const std::string path = std::string(PLUMB_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  ASSERT_TRUE(std::filesystem::exists(path))
      << path << " is missing: scripts/test fetches it (models/ holds the downloaded SmolLM2-135M-Instruct "
      << "Q4_1 GGUF); run that, or fetch it by hand, before this test";
  const GgufFile file = GgufFile::Open(path);
  const std::uint64_t file_size = std::filesystem::file_size(path);

  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.GetString("general.architecture"), "llama");
  const std::uint64_t blocks = file.GetUint("llama.block_count");
  const std::uint64_t embedding = file.GetUint("llama.embedding_length");
  const std::uint64_t vocab = file.GetUint("llama.vocab_size");
  EXPECT_EQ(blocks, 30u);
  EXPECT_EQ(vocab, 49152u);
  // Each block has 9 tensors (4 attention, 3 feed-forward, 2 norms); plus token_embd and output_norm
  // (the output projection is tied to token_embd).
  EXPECT_EQ(file.tensors().size(), 9 * blocks + 2);
  EXPECT_EQ(file.tensors().size(), 272u);
  for (std::uint64_t b = 0; b < blocks; ++b) {
    EXPECT_NE(file.FindTensor("blk." + std::to_string(b) + ".attn_q.weight"), nullptr) << b;
  }

  const GgufTensorInfo* embd = file.FindTensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->type, GgmlType::Q8_0);
  EXPECT_EQ(embd->dims, (std::vector<std::uint64_t>{embedding, vocab}));
  EXPECT_EQ(embd->dims, (std::vector<std::uint64_t>{576, 49152}));

  const std::vector<std::string> tokens = file.GetStringArray("tokenizer.ggml.tokens");
  EXPECT_EQ(tokens.size(), vocab);
  EXPECT_EQ(file.GetIntArray("tokenizer.ggml.token_type").size(), vocab);
  EXPECT_EQ(file.GetStringArray("tokenizer.ggml.merges").size(), 48900u);

  // Every tensor inside the file and aligned; gguf-py's and llama.cpp's layout: sorted by offset, each
  // starts at the previous one's end padded to the alignment, and the last ends at the end of the file.
  std::vector<const GgufTensorInfo*> sorted;
  for (const GgufTensorInfo& t : file.tensors()) {
    EXPECT_EQ(t.file_offset % file.alignment(), 0u) << t.name;
    EXPECT_LE(t.file_offset + t.n_bytes, file_size) << t.name;
    sorted.push_back(&t);
  }
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  std::uint64_t expected_offset = 0;
  for (const GgufTensorInfo* t : sorted) {
    EXPECT_EQ(t->offset, expected_offset) << t->name;
    expected_offset = (t->offset + t->n_bytes + file.alignment() - 1) / file.alignment() * file.alignment();
  }
  EXPECT_EQ(file.data_offset() + sorted.back()->offset + sorted.back()->n_bytes, file_size);
}

}  // namespace
}  // namespace plumb
