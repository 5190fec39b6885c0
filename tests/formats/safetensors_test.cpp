// Tests of the safetensors reader and writer (docs/formats.md, "safetensors"): writer -> reader round trips,
// the conversions of ReadF32 / ReadF64 / ReadI32, and one test per malformed-file check, each asserting that
// the error names the file and the offending field or tensor.
#include "plumb/formats/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/formats/dtype.h"
#include "support/errors.h"

namespace plumb {
namespace {

using testing::ErrorOf;
using testing::ExpectMessageHas;

// ---------------------------------------------------------------------------------------------------------
// Helpers

template <typename T>
std::vector<std::uint8_t> ToBytes(const std::vector<T>& values) {
  std::vector<std::uint8_t> bytes(values.size() * sizeof(T));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// A safetensors file: 8-byte little-endian length of `header`, `header`, then `data`.
std::vector<std::uint8_t> Assemble(const std::string& header, const std::vector<std::uint8_t>& data = {}) {
  std::vector<std::uint8_t> bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<std::uint8_t>(header.size() >> (8 * i)));
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

// A header with the one tensor entry "t": `entry` is the JSON of its value.
std::vector<std::uint8_t> OneTensor(const std::string& entry, std::size_t data_bytes = 16) {
  return Assemble("{\"t\":" + entry + "}", std::vector<std::uint8_t>(data_bytes, 0));
}

// Expects FromBytes to reject `bytes` with a message naming the file and containing every needle.
#define EXPECT_REJECTED(bytes, ...)                                                                      \
  do {                                                                                                   \
    SCOPED_TRACE("EXPECT_REJECTED");                                                                     \
    const std::string message_ = ErrorOf([&] { SafetensorsFile::FromBytes(bytes, "bad.safetensors"); }); \
    ExpectMessageHas(message_, {"'bad.safetensors'", __VA_ARGS__});                                      \
  } while (0)

// A path in the temp directory unique to this test and process; the file is removed on destruction.
class TempPath {
 public:
  explicit TempPath(const std::string& suffix) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ =
        (std::filesystem::temp_directory_path() / ("plumb_" + std::string(info->test_suite_name()) + "_" +
                                                   info->name() + "_" + std::to_string(::getpid()) + suffix))
            .string();
  }
  ~TempPath() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempPath(const TempPath&) = delete;
  TempPath& operator=(const TempPath&) = delete;
  const std::string& str() const { return path_; }

 private:
  std::string path_;
};

void WriteFile(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::vector<TensorToWrite> SampleTensors() {
  std::vector<TensorToWrite> t;
  t.push_back({"w.f32", DType::F32, {2, 3}, ToBytes<float>({1.0f, -2.5f, 3.25f, 0.0f, -0.0f, 1e30f})});
  t.push_back({"w.f16", DType::F16, {4}, ToBytes<std::uint16_t>({0x3C00, 0xC100, 0x7BFF, 0x0001})});
  t.push_back({"w.bf16", DType::BF16, {2, 2}, ToBytes<std::uint16_t>({0x3F80, 0xC020, 0x7F7F, 0x0001})});
  t.push_back({"ids.i64", DType::I64, {3}, ToBytes<std::int64_t>({-1, 0, std::int64_t{1} << 40})});
  t.push_back({"ids.i32", DType::I32, {2}, ToBytes<std::int32_t>({-7, 2147483647})});
  t.push_back({"i16", DType::I16, {1, 1, 2}, ToBytes<std::int16_t>({-3, 300})});
  t.push_back({"i8", DType::I8, {3}, ToBytes<std::int8_t>({-128, 0, 127})});
  t.push_back({"u8", DType::U8, {2}, ToBytes<std::uint8_t>({0, 255})});
  t.push_back({"mask", DType::BOOL, {2}, ToBytes<std::uint8_t>({1, 0})});
  t.push_back({"w.e4m3", DType::F8_E4M3, {2, 2}, ToBytes<std::uint8_t>({0x38, 0xB8, 0x7E, 0x7F})});
  t.push_back({"w.e5m2", DType::F8_E5M2, {3}, ToBytes<std::uint8_t>({0x3C, 0x7C, 0x01})});
  t.push_back({"scalar", DType::F64, {}, ToBytes<double>({3.141592653589793})});
  t.push_back({"empty", DType::F32, {0, 5}, {}});
  t.push_back({"empty2", DType::BF16, {3, 0}, {}});
  return t;
}

const std::map<std::string, std::string> kSampleMetadata = {{"format", "pt"},
                                                            {"note", "ünïcödé, \"quoted\""}};

void ExpectMatchesSample(const SafetensorsFile& file) {
  const std::vector<TensorToWrite> sample = SampleTensors();
  ASSERT_EQ(file.tensors().size(), sample.size());
  for (const TensorToWrite& t : sample) {
    SCOPED_TRACE(t.name);
    ASSERT_TRUE(file.Contains(t.name));
    const TensorInfo& info = file.Info(t.name);
    EXPECT_EQ(info.name, t.name);
    EXPECT_EQ(info.dtype, t.dtype);
    EXPECT_EQ(info.shape, t.shape);
    EXPECT_EQ(info.NumBytes(), t.bytes.size());
    const std::span<const std::uint8_t> bytes = file.Bytes(t.name);
    EXPECT_EQ(std::vector<std::uint8_t>(bytes.begin(), bytes.end()), t.bytes);
  }
  EXPECT_EQ(file.Info("scalar").NumElements(), 1);
  EXPECT_EQ(file.Info("empty").NumElements(), 0);
  EXPECT_EQ(file.Info("w.f32").NumElements(), 6);
  EXPECT_EQ(file.metadata(), kSampleMetadata);
  EXPECT_FALSE(file.Contains("w"));
  EXPECT_EQ(file.data_section_offset() % 8, 0u);
  // Ordered by data offset; the writer lays tensors out by name, so this is name order too.
  for (std::size_t i = 1; i < file.tensors().size(); ++i) {
    EXPECT_LE(file.tensors()[i - 1].data_begin, file.tensors()[i].data_begin);
    EXPECT_LT(file.tensors()[i - 1].name, file.tensors()[i].name);
  }
}

// ---------------------------------------------------------------------------------------------------------
// Round trips and the writer's output

TEST(SafetensorsRoundTrip, SeveralDtypesShapesEmptyTensorsAndMetadata) {
  const SafetensorsFile file =
      SafetensorsFile::FromBytes(SerializeSafetensors(SampleTensors(), kSampleMetadata), "mem");
  EXPECT_EQ(file.path(), "mem");
  ExpectMatchesSample(file);
  EXPECT_EQ(file.ReadF32("w.f32"), (std::vector<float>{1.0f, -2.5f, 3.25f, 0.0f, -0.0f, 1e30f}));
  EXPECT_EQ(file.ReadI32("ids.i32"), (std::vector<std::int32_t>{-7, 2147483647}));
  EXPECT_TRUE(file.ReadF32("empty").empty());
  EXPECT_EQ(file.ReadF64("scalar"), (std::vector<double>{3.141592653589793}));
}

TEST(SafetensorsRoundTrip, WriteThenOpenMapsTheFile) {
  TempPath path(".safetensors");
  WriteSafetensors(path.str(), SampleTensors(), kSampleMetadata);
  SafetensorsFile file = SafetensorsFile::Open(path.str());
  EXPECT_EQ(file.path(), path.str());
  ExpectMatchesSample(file);
  const SafetensorsFile moved = std::move(file);  // spans stay valid: the mapping does not move
  ExpectMatchesSample(moved);
}

TEST(SafetensorsRoundTrip, NoTensorsAndNoMetadata) {
  const std::vector<std::uint8_t> bytes = SerializeSafetensors({});
  EXPECT_EQ(bytes, Assemble("{}      "));
  const SafetensorsFile file = SafetensorsFile::FromBytes(bytes, "mem");
  EXPECT_TRUE(file.tensors().empty());
  EXPECT_TRUE(file.metadata().empty());
}

TEST(SafetensorsWriter, ExactBytesSortedKeysAndSpacePadding) {
  std::vector<TensorToWrite> tensors;
  tensors.push_back({"b", DType::F32, {1}, ToBytes<float>({2.0f})});
  tensors.push_back({"a", DType::I8, {2}, {1, 2}});
  std::string header = R"({"__metadata__":{"k":"v"},"a":{"data_offsets":[0,2],"dtype":"I8","shape":[2]},)"
                       R"("b":{"data_offsets":[2,6],"dtype":"F32","shape":[1]}})";
  while ((8 + header.size()) % 8 != 0) header += ' ';
  EXPECT_EQ(header.size(), 136u);  // the example in docs/formats.md
  std::vector<std::uint8_t> data = {1, 2};
  const std::vector<std::uint8_t> two = ToBytes<float>({2.0f});
  data.insert(data.end(), two.begin(), two.end());
  const std::vector<std::uint8_t> expected = Assemble(header, data);
  EXPECT_EQ(SerializeSafetensors(tensors, {{"k", "v"}}), expected);
  std::swap(tensors[0], tensors[1]);  // input order does not matter
  EXPECT_EQ(SerializeSafetensors(tensors, {{"k", "v"}}), expected);
}

TEST(SafetensorsWriter, RejectsBadTensors) {
  const auto serialize = [](TensorToWrite t) { return [t] { SerializeSafetensors({t}); }; };
  ExpectMessageHas(ErrorOf(serialize({"x", DType::F32, {2}, {0, 0, 0, 0}})),
                   {"tensor 'x'", "4 bytes", "[2]", "needs 8"});
  ExpectMessageHas(ErrorOf(serialize({"x", DType::F32, {-1}, {}})), {"tensor 'x'", "negative"});
  ExpectMessageHas(ErrorOf(serialize({"__metadata__", DType::U8, {0}, {}})), {"'__metadata__'", "reserved"});
  ExpectMessageHas(ErrorOf(serialize({"\xFF", DType::U8, {0}, {}})), {"JSON header", "UTF-8"});
  ExpectMessageHas(ErrorOf([] {
                     SerializeSafetensors({{"x", DType::U8, {1}, {1}}, {"x", DType::U8, {1}, {2}}});
                   }),
                   {"tensor 'x'", "two tensors"});
}

TEST(SafetensorsWriter, WriteErrorNamesThePath) {
  const std::string path = "/nonexistent-plumb-dir/out.safetensors";
  ExpectMessageHas(ErrorOf([&] { WriteSafetensors(path, {}); }), {path, "No such file or directory"});
  ExpectMessageHas(ErrorOf([&] {
                     WriteSafetensors(path, {{"x", DType::F32, {2}, {}}});
                   }),
                   {path, "tensor 'x'"});
}

// ---------------------------------------------------------------------------------------------------------
// Typed reads

TEST(SafetensorsRead, F32FromF16AndBF16AndF64) {
  std::vector<TensorToWrite> tensors;
  tensors.push_back({"h", DType::F16, {5}, ToBytes<std::uint16_t>({0x3C00, 0xC100, 0x7BFF, 0x0001, 0xFC00})});
  tensors.push_back({"b", DType::BF16, {4}, ToBytes<std::uint16_t>({0x3F80, 0xC020, 0x7F7F, 0x8000})});
  tensors.push_back({"d", DType::F64, {3}, ToBytes<double>({0.1, -1e300, 2.0})});
  const SafetensorsFile file = SafetensorsFile::FromBytes(SerializeSafetensors(tensors), "mem");
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(file.ReadF32("h"), (std::vector<float>{1.0f, -2.5f, 65504.0f, std::ldexp(1.0f, -24), -inf}));
  const std::vector<float> b = file.ReadF32("b");
  EXPECT_EQ(b, (std::vector<float>{1.0f, -2.5f, std::bit_cast<float>(0x7F7F0000u), -0.0f}));
  EXPECT_EQ(std::bit_cast<std::uint32_t>(b[2]), 0x7F7F0000u);
  EXPECT_TRUE(std::signbit(b[3]));
  EXPECT_EQ(file.ReadF32("d"), (std::vector<float>{0.1f, -inf, 2.0f}));  // F64 -> F32 rounds to nearest
  EXPECT_EQ(file.ReadF64("h"), (std::vector<double>{1.0, -2.5, 65504.0, std::ldexp(1.0, -24),
                                                    -std::numeric_limits<double>::infinity()}));
  EXPECT_EQ(file.ReadF64("b")[1], -2.5);
  EXPECT_EQ(file.ReadF64("d"), (std::vector<double>{0.1, -1e300, 2.0}));
}

TEST(SafetensorsRead, F32ChecksExpectedShape) {
  const SafetensorsFile file = SafetensorsFile::FromBytes(
      SerializeSafetensors({{"w", DType::F32, {2, 3}, std::vector<std::uint8_t>(24)}}), "model.safetensors");
  const std::int64_t good[] = {2, 3};
  EXPECT_EQ(file.ReadF32("w", good).size(), 6u);
  const std::int64_t bad[] = {3, 2};
  ExpectMessageHas(ErrorOf([&] { file.ReadF32("w", bad); }),
                   {"'model.safetensors'", "tensor 'w'", "shape [2, 3]", "expected [3, 2]"});
  const std::int64_t rank3[] = {2, 3, 1};
  ExpectMessageHas(ErrorOf([&] { file.ReadF32("w", rank3); }), {"tensor 'w'", "expected [2, 3, 1]"});
}

TEST(SafetensorsRead, WrongDtypeIsAnError) {
  std::vector<TensorToWrite> tensors;
  tensors.push_back({"ids", DType::I32, {1}, ToBytes<std::int32_t>({5})});
  tensors.push_back({"w", DType::F32, {1}, ToBytes<float>({5.0f})});
  tensors.push_back({"m", DType::BOOL, {1}, {1}});
  tensors.push_back({"q", DType::F8_E4M3, {1}, {0x38}});
  const SafetensorsFile file = SafetensorsFile::FromBytes(SerializeSafetensors(tensors), "f.safetensors");
  ExpectMessageHas(ErrorOf([&] { file.ReadF32("ids"); }), {"'f.safetensors'", "tensor 'ids'", "I32"});
  // FP8 codes mean nothing without their scale, so they are read as bytes, never converted alone.
  ExpectMessageHas(ErrorOf([&] { file.ReadF32("q"); }), {"tensor 'q'", "F8_E4M3"});
  ExpectMessageHas(ErrorOf([&] { file.ReadF64("m"); }), {"tensor 'm'", "BOOL"});
  ExpectMessageHas(ErrorOf([&] { file.ReadI32("w"); }), {"tensor 'w'", "F32"});
}

TEST(SafetensorsRead, I32FromI64OnlyWhenInRange) {
  std::vector<TensorToWrite> tensors;
  tensors.push_back({"ok", DType::I64, {3}, ToBytes<std::int64_t>({-2147483648LL, 0, 2147483647LL})});
  tensors.push_back({"big", DType::I64, {2}, ToBytes<std::int64_t>({1, 2147483648LL})});
  const SafetensorsFile file = SafetensorsFile::FromBytes(SerializeSafetensors(tensors), "f.safetensors");
  EXPECT_EQ(file.ReadI32("ok"), (std::vector<std::int32_t>{-2147483647 - 1, 0, 2147483647}));
  ExpectMessageHas(ErrorOf([&] { file.ReadI32("big"); }), {"tensor 'big'", "element 1", "2147483648"});
}

TEST(SafetensorsRead, MissingTensorNamesFileAndTensor) {
  const SafetensorsFile file = SafetensorsFile::FromBytes(SerializeSafetensors({}), "f.safetensors");
  ExpectMessageHas(ErrorOf([&] { file.Info("lm_head.weight"); }), {"'f.safetensors'", "'lm_head.weight'"});
  ExpectMessageHas(ErrorOf([&] { file.ReadF32("lm_head.weight"); }), {"'lm_head.weight'"});
}

TEST(SafetensorsRead, GapsAndMisalignedDataAreFine) {
  // Tensors at odd offsets with unused bytes before, between and after them: accepted, and read with
  // memcpy (UBSan's alignment check would flag a typed load through a misaligned pointer).
  std::vector<std::uint8_t> data = {0xEE};                                  // gap [0, 1)
  const std::vector<std::uint8_t> f = ToBytes<float>({1.5f, -2.0f, 3.0f});  // [1, 13)
  data.insert(data.end(), f.begin(), f.end());
  data.push_back(0xEE);                                               // gap [13, 14)
  const std::vector<std::uint8_t> d = ToBytes<double>({-0.25, 8.0});  // [14, 30)
  data.insert(data.end(), d.begin(), d.end());
  const std::vector<std::uint8_t> i = ToBytes<std::int64_t>({-5});  // [30, 38)
  data.insert(data.end(), i.begin(), i.end());
  data.insert(data.end(), {0xEE, 0xEE, 0xEE});  // trailing gap
  const SafetensorsFile file =
      SafetensorsFile::FromBytes(Assemble(R"({"f":{"dtype":"F32","shape":[3],"data_offsets":[1,13]},)"
                                          R"("d":{"dtype":"F64","shape":[2],"data_offsets":[14,30]},)"
                                          R"("i":{"dtype":"I64","shape":[],"data_offsets":[30,38]}})",
                                          data),
                                 "mem");
  EXPECT_EQ(file.ReadF32("f"), (std::vector<float>{1.5f, -2.0f, 3.0f}));
  EXPECT_EQ(file.ReadF64("f"), (std::vector<double>{1.5, -2.0, 3.0}));
  EXPECT_EQ(file.ReadF32("d"), (std::vector<float>{-0.25f, 8.0f}));
  EXPECT_EQ(file.ReadI32("i"), (std::vector<std::int32_t>{-5}));
  ASSERT_EQ(file.tensors().size(), 3u);
  EXPECT_EQ(file.tensors()[0].name, "f");
  EXPECT_EQ(file.tensors()[1].name, "d");
  EXPECT_EQ(file.tensors()[2].name, "i");
}

TEST(SafetensorsRead, EmptyTensorMayLieAnywhere) {
  // An empty tensor occupies no bytes, so even an offset inside another tensor overlaps nothing.
  const SafetensorsFile file =
      SafetensorsFile::FromBytes(Assemble(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                          R"("e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}})",
                                          std::vector<std::uint8_t>(8)),
                                 "mem");
  EXPECT_TRUE(file.ReadF32("e").empty());
  EXPECT_EQ(file.Bytes("e").size(), 0u);
}

// ---------------------------------------------------------------------------------------------------------
// Malformed files: one test per check (docs/formats.md, "What plumb validates")

const std::string kGoodEntry = R"({"dtype":"F32","shape":[2,2],"data_offsets":[0,16]})";

TEST(SafetensorsMalformed, ShorterThanLengthField) {
  EXPECT_REJECTED(std::vector<std::uint8_t>(7, 0), "7 bytes", "8-byte header length");
  EXPECT_REJECTED(std::vector<std::uint8_t>{}, "0 bytes");
}

TEST(SafetensorsMalformed, HeaderLengthBeyondFile) {
  std::vector<std::uint8_t> bytes = Assemble("{}");
  bytes[0] = 100;  // claims 100 header bytes, 2 follow
  EXPECT_REJECTED(bytes, "header length 100", "only 2 bytes");
}

TEST(SafetensorsMalformed, HeaderLengthAbsurd) {
  std::vector<std::uint8_t> bytes = Assemble("{}");
  bytes[7] = 0x80;  // 2^63 + 2
  EXPECT_REJECTED(bytes, "header length 9223372036854775810", "limit");
}

TEST(SafetensorsMalformed, HeaderNotJson) {
  EXPECT_REJECTED(Assemble(R"({"t": )"), "not valid UTF-8 JSON", "at byte 6");
  EXPECT_REJECTED(Assemble(""), "not valid UTF-8 JSON", "at byte 0");
  EXPECT_REJECTED(Assemble(R"({"t":{}} x)"), "not valid UTF-8 JSON",
                  "at byte 9 of the header (file offset 17)");
}

// Found by fuzz/safetensors_fuzz.cpp: nlohmann reports a number beyond double's range as out_of_range.406,
// not as a parse_error, and that exception escaped the reader.
TEST(SafetensorsMalformed, HeaderNumberBeyondDouble) {
  EXPECT_REJECTED(Assemble(R"({"t":1e400})"), "not valid JSON", "number overflow", "1e400");
  EXPECT_REJECTED(OneTensor(R"({"dtype":"F32","shape":[4],"data_offsets":[0,-1e999]})"), "not valid JSON",
                  "number overflow");
}

TEST(SafetensorsMalformed, HeaderNotUtf8) {
  EXPECT_REJECTED(Assemble("{\"t\xFF\":" + kGoodEntry + "}", std::vector<std::uint8_t>(16)),
                  "not valid UTF-8 JSON", "ill-formed UTF-8 byte", "'\"t\\xFF'");
  EXPECT_REJECTED(Assemble(std::string("{\"t\0\":1}", 8)), "not valid UTF-8 JSON");
}

TEST(SafetensorsMalformed, HeaderNotObject) {
  EXPECT_REJECTED(Assemble("[1, 2]"), "header is a JSON array, not an object");
  EXPECT_REJECTED(Assemble("\"x\""), "header is a JSON string");
}

TEST(SafetensorsMalformed, EntryNotObject) {
  EXPECT_REJECTED(OneTensor("3"), "tensor 't'", "header entry is a JSON number (3), not an object");
  EXPECT_REJECTED(OneTensor("[\"F32\", [1], [0, 4]]"), "tensor 't'", "header entry is a JSON array");
}

TEST(SafetensorsMalformed, MissingFields) {
  EXPECT_REJECTED(OneTensor(R"({"shape":[2,2],"data_offsets":[0,16]})"), "tensor 't'",
                  "missing field 'dtype'");
  EXPECT_REJECTED(OneTensor(R"({"dtype":"F32","data_offsets":[0,16]})"), "tensor 't'",
                  "missing field 'shape'");
  EXPECT_REJECTED(OneTensor(R"({"dtype":"F32","shape":[2,2]})"), "tensor 't'",
                  "missing field 'data_offsets'");
}

TEST(SafetensorsMalformed, UnknownField) {
  EXPECT_REJECTED(OneTensor(R"({"dtype":"F32","shape":[2,2],"data_offsets":[0,16],"offset":3})"),
                  "tensor 't'", "unknown field 'offset'");
}

TEST(SafetensorsMalformed, DtypeNotString) {
  EXPECT_REJECTED(OneTensor(R"({"dtype":4,"shape":[2,2],"data_offsets":[0,16]})"), "tensor 't'",
                  "field 'dtype' is a JSON number (4), not a string");
}

TEST(SafetensorsMalformed, UnknownDtype) {
  EXPECT_REJECTED(OneTensor(R"({"dtype":"F8_E8M0","shape":[2,8],"data_offsets":[0,16]})"), "tensor 't'",
                  "unsupported dtype \"F8_E8M0\"");
  EXPECT_REJECTED(OneTensor(R"({"dtype":"U16","shape":[2,4],"data_offsets":[0,16]})"), "tensor 't'",
                  "unsupported dtype \"U16\"");
  EXPECT_REJECTED(OneTensor(R"({"dtype":"f32","shape":[2,2],"data_offsets":[0,16]})"), "tensor 't'",
                  "unsupported dtype \"f32\"");
}

TEST(SafetensorsMalformed, ShapeNotArray) {
  EXPECT_REJECTED(OneTensor(R"({"dtype":"F32","shape":4,"data_offsets":[0,16]})"), "tensor 't'",
                  "field 'shape' is a JSON number (4), not an array");
}

TEST(SafetensorsMalformed, ShapeElementNotInteger) {
  EXPECT_REJECTED(OneTensor(R"({"dtype":"F32","shape":[2,2.0],"data_offsets":[0,16]})"), "tensor 't'",
                  "field 'shape' element 1 is 2.0, not an integer");
  EXPECT_REJECTED(OneTensor(R"({"dtype":"F32","shape":["4"],"data_offsets":[0,16]})"), "tensor 't'",
                  "field 'shape' element 0 is \"4\", not an integer");
  EXPECT_REJECTED(OneTensor(R"({"dtype":"F32","shape":[1e30],"data_offsets":[0,16]})"), "tensor 't'",
                  "field 'shape' element 0");
}

TEST(SafetensorsMalformed, NegativeDimension) {
  EXPECT_REJECTED(OneTensor(R"({"dtype":"F32","shape":[-2,-2],"data_offsets":[0,16]})"), "tensor 't'",
                  "field 'shape' element 0 is -2, a negative dimension");
}

TEST(SafetensorsMalformed, DimensionTooLarge) {
  EXPECT_REJECTED(OneTensor(R"({"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,16]})"),
                  "tensor 't'", "field 'shape' element 0 is 18446744073709551615, too large");
}

TEST(SafetensorsMalformed, ElementCountOverflows) {
  EXPECT_REJECTED(OneTensor(R"({"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,16]})"),
                  "tensor 't'", "[4294967296, 4294967296]", "more than 2^63 - 1 elements");
}

TEST(SafetensorsMalformed, ByteCountOverflows) {
  // 2^61 elements fit in int64, but 2^61 * 8 bytes = 2^64 does not fit in 64 bits.
  EXPECT_REJECTED(OneTensor(R"({"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,16]})"),
                  "tensor 't'", "[2305843009213693952]", "F64", "more than 2^64 - 1 bytes");
}

TEST(SafetensorsMalformed, DataOffsetsNotAPair) {
  EXPECT_REJECTED(OneTensor(R"({"dtype":"F32","shape":[2,2],"data_offsets":[0]})"), "tensor 't'",
                  "field 'data_offsets' is [0], not an array [begin, end]");
  EXPECT_REJECTED(OneTensor(R"({"dtype":"F32","shape":[2,2],"data_offsets":[0,8,16]})"), "tensor 't'",
                  "field 'data_offsets' is [0,8,16]");
  EXPECT_REJECTED(OneTensor(R"({"dtype":"F32","shape":[2,2],"data_offsets":{"begin":0}})"), "tensor 't'",
                  "field 'data_offsets'");
}

TEST(SafetensorsMalformed, DataOffsetsNotNonNegativeIntegers) {
  EXPECT_REJECTED(OneTensor(R"({"dtype":"F32","shape":[2,2],"data_offsets":[-1,15]})"), "tensor 't'",
                  "field 'data_offsets' element 0 is -1, not a non-negative integer");
  EXPECT_REJECTED(OneTensor(R"({"dtype":"F32","shape":[2,2],"data_offsets":[0,16.0]})"), "tensor 't'",
                  "field 'data_offsets' element 1 is 16.0");
  EXPECT_REJECTED(OneTensor(R"({"dtype":"F32","shape":[2,2],"data_offsets":[0,null]})"), "tensor 't'",
                  "field 'data_offsets' element 1 is null");
}

TEST(SafetensorsMalformed, BeginAfterEnd) {
  EXPECT_REJECTED(OneTensor(R"({"dtype":"F32","shape":[0],"data_offsets":[16,0]})"), "tensor 't'",
                  "field 'data_offsets' [16, 0] has begin > end");
}

TEST(SafetensorsMalformed, EndBeyondDataSection) {
  EXPECT_REJECTED(OneTensor(kGoodEntry, 15), "tensor 't'",
                  "field 'data_offsets' end 16 is beyond the data section, which has 15 bytes");
  EXPECT_REJECTED(OneTensor(R"({"dtype":"F32","shape":[2,2],"data_offsets":[18446744073709551600,)"
                            R"(18446744073709551615]})"),
                  "tensor 't'", "end 18446744073709551615");
}

TEST(SafetensorsMalformed, SizeDoesNotMatchShape) {
  EXPECT_REJECTED(OneTensor(R"({"dtype":"F32","shape":[2,3],"data_offsets":[0,16]})"), "tensor 't'",
                  "[0, 16] spans 16 bytes, but shape [2, 3] of dtype F32 needs 24 bytes");
  EXPECT_REJECTED(OneTensor(R"({"dtype":"BF16","shape":[],"data_offsets":[0,4]})"), "tensor 't'",
                  "shape [] of dtype BF16 needs 2 bytes");
}

TEST(SafetensorsMalformed, OverlappingTensors) {
  EXPECT_REJECTED(Assemble(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                           std::vector<std::uint8_t>(12)),
                  "tensors 'a' (data_offsets [0, 8]) and 'b' (data_offsets [4, 12]) overlap");
  // One inside another, with a third tensor sorted between them.
  EXPECT_REJECTED(Assemble(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                           R"("b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]},)"
                           R"("c":{"dtype":"U8","shape":[1],"data_offsets":[15,16]}})",
                           std::vector<std::uint8_t>(16)),
                  "tensors 'a'", "'b'", "overlap");
  // The same range twice.
  EXPECT_REJECTED(Assemble(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                           R"("b":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})",
                           std::vector<std::uint8_t>(4)),
                  "'a'", "'b'", "overlap");
}

TEST(SafetensorsMalformed, MetadataNotObject) {
  EXPECT_REJECTED(Assemble(R"({"__metadata__":["format","pt"]})"), "'__metadata__' is a JSON array");
}

TEST(SafetensorsMalformed, MetadataValueNotString) {
  EXPECT_REJECTED(Assemble(R"({"__metadata__":{"format":"pt","epoch":3}})"),
                  "'__metadata__' value of 'epoch' is a JSON number (3), not a string");
  EXPECT_REJECTED(Assemble(R"({"__metadata__":{"nested":{"a":"b"}}})"), "'__metadata__' value of 'nested'");
}

TEST(SafetensorsMalformed, DuplicateKeys) {
  EXPECT_REJECTED(
      Assemble("{\"t\":" + kGoodEntry + ",\"t\":" + kGoodEntry + "}", std::vector<std::uint8_t>(16)),
      "key 't' twice in the top-level object");
  EXPECT_REJECTED(OneTensor(R"({"dtype":"F32","shape":[2,2],"dtype":"F16","data_offsets":[0,16]})"),
                  "key 'dtype' twice in the value of 't'");
  EXPECT_REJECTED(Assemble(R"({"__metadata__":{"k":"a","k":"b"}})"),
                  "key 'k' twice in the value of '__metadata__'");
}

// ---------------------------------------------------------------------------------------------------------
// Open(): the memory-mapped path

TEST(SafetensorsOpen, TruncatedFile) {
  const std::vector<std::uint8_t> good = SerializeSafetensors(SampleTensors(), kSampleMetadata);
  const std::size_t data_offset = SafetensorsFile::FromBytes(good, "mem").data_section_offset();
  TempPath path(".safetensors");

  // Cut inside the data section: the last tensor's end lies beyond it.
  WriteFile(path.str(), std::vector<std::uint8_t>(good.begin(), good.end() - 1));
  ExpectMessageHas(ErrorOf([&] { SafetensorsFile::Open(path.str()); }),
                   {"'" + path.str() + "'", "tensor 'w.f32'", "is beyond the data section"});

  // Cut inside the header.
  WriteFile(path.str(), std::vector<std::uint8_t>(good.begin(), good.begin() + data_offset / 2));
  ExpectMessageHas(ErrorOf([&] { SafetensorsFile::Open(path.str()); }),
                   {"'" + path.str() + "'", "header length", "runs past the end of the file"});

  // Cut inside the length field, and an empty file.
  WriteFile(path.str(), std::vector<std::uint8_t>(good.begin(), good.begin() + 5));
  ExpectMessageHas(ErrorOf([&] { SafetensorsFile::Open(path.str()); }), {"'" + path.str() + "'", "5 bytes"});
  WriteFile(path.str(), {});
  ExpectMessageHas(ErrorOf([&] { SafetensorsFile::Open(path.str()); }), {"'" + path.str() + "'", "0 bytes"});
}

TEST(SafetensorsOpen, MissingFile) {
  const std::string path = "/nonexistent-plumb-dir/model.safetensors";
  ExpectMessageHas(ErrorOf([&] { SafetensorsFile::Open(path); }), {path, "No such file or directory"});
}

TEST(SafetensorsOpen, Directory) {
  TempPath dir(".d");
  std::filesystem::create_directory(dir.str());
  ExpectMessageHas(ErrorOf([&] { SafetensorsFile::Open(dir.str()); }), {dir.str(), "not a regular file"});
}

}  // namespace
}  // namespace plumb
