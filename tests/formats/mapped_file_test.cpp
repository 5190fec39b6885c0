// Tests of plumb::MappedFile (include/plumb/core/mapped_file.h): contents, empty files, moves, errors.
#include "plumb/core/mapped_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include "plumb/core/error.h"

namespace plumb {
namespace {

// A file in the temp directory unique to this test, tag and process, removed on destruction.
class TempFile {
 public:
  TempFile(const std::string& tag, const std::string& contents) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = (std::filesystem::temp_directory_path() /
             ("plumb_MappedFile_" + std::string(info->name()) + "_" + tag + "_" + std::to_string(::getpid())))
                .string();
    std::ofstream(path_, std::ios::binary) << contents;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string Contents(const MappedFile& file) {
  return std::string(reinterpret_cast<const char*>(file.data()), file.size());
}

TEST(MappedFile, MapsTheWholeFile) {
  const std::string text("hello\0world\n", 12);
  TempFile temp("a", text);
  const MappedFile file = MappedFile::Open(temp.path());
  EXPECT_EQ(file.path(), temp.path());
  EXPECT_EQ(file.size(), 12u);
  EXPECT_EQ(Contents(file), text);
  EXPECT_EQ(file.bytes().size(), 12u);
}

TEST(MappedFile, EmptyFileHasSizeZero) {
  TempFile temp("a", "");
  const MappedFile file = MappedFile::Open(temp.path());
  EXPECT_EQ(file.size(), 0u);
  EXPECT_EQ(file.data(), nullptr);
  EXPECT_TRUE(file.bytes().empty());
}

TEST(MappedFile, MovesKeepTheMapping) {
  TempFile one("1", "first");
  TempFile two("2", "second");
  MappedFile a = MappedFile::Open(one.path());
  const std::uint8_t* where = a.data();
  MappedFile b = std::move(a);
  EXPECT_EQ(b.data(), where);
  EXPECT_EQ(Contents(b), "first");
  EXPECT_EQ(a.size(), 0u);  // NOLINT(bugprone-use-after-move): a moved-from MappedFile is empty
  EXPECT_EQ(a.data(), nullptr);

  MappedFile c = MappedFile::Open(two.path());
  c = std::move(b);  // unmaps "second"
  EXPECT_EQ(Contents(c), "first");
  EXPECT_EQ(c.path(), one.path());
  c = MappedFile();
  EXPECT_EQ(c.size(), 0u);
}

TEST(MappedFile, MissingFileNamesPathAndReason) {
  const std::string path = "/nonexistent-plumb-dir/weights.bin";
  try {
    MappedFile::Open(path);
    FAIL() << "expected plumb::Error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("'" + path + "'"), std::string::npos) << message;
    EXPECT_NE(message.find("No such file or directory"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace plumb
