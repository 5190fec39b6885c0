// WritePackedCheckpoint, the library side of `plumb pack` (tests/cli/pack_test.cpp covers the command):
// what it writes, that the result loads and computes what PackModel's tensors compute, and how it treats
// an output directory that is not empty.
#include "plumb/engine/pack_checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "plumb/core/error.h"
#include "plumb/model/model.h"
#include "support/errors.h"
#include "support/golden.h"

namespace plumb {
namespace {

namespace fs = std::filesystem;

class PackCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("plumb-pack-checkpoint-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  static PackOptions F16() { return {*ParsePackFormat("f16"), false, 1}; }

  const std::string model_ = testing::FixtureDir("tiny-llama");
  fs::path root_;
};

TEST_F(PackCheckpoint, WritesALoadableCheckpointAndSaysWhatItWrote) {
  const fs::path out = root_ / "f16";
  int calls = 0;
  const PackedCheckpointSummary s =
      WritePackedCheckpoint(model_, out.string(), F16(), false, [&](const PackProgress&) { ++calls; });
  EXPECT_EQ(s.safetensors_path, (out / "model.safetensors").string());
  EXPECT_TRUE(fs::exists(out / "config.json"));
  EXPECT_GT(calls, 0);
  // tiny-llama has no tokenizer files, and the summary says so.
  EXPECT_EQ(s.tokenizer_note, "no tokenizer (the source has none)");

  const Model source = Model::Load(model_);
  const PackedCheckpoint expected = PackModel(source.config(), source.weights(), F16());
  EXPECT_EQ(s.tensor_count, expected.tensors.size());
  std::size_t bytes = 0;
  for (const TensorToWrite& t : expected.tensors) bytes += t.bytes.size();
  EXPECT_EQ(s.weight_bytes, bytes);
  EXPECT_GT(fs::file_size(s.safetensors_path), bytes);  // the tensors and a header

  Model packed = Model::Load(out.string());
  EXPECT_EQ(packed.config().num_layers, source.config().num_layers);
  ContiguousKvCache cache = packed.NewKvCache(8);
  const std::vector<int> tokens = {1, 2, 3};
  const std::vector<float> logits = packed.Prefill(tokens, cache);
  EXPECT_EQ(logits.size(), static_cast<std::size_t>(packed.config().vocab_size));
}

TEST_F(PackCheckpoint, ANonEmptyDirectoryNeedsOverwriteWhichRemovesOnlyCheckpointFiles) {
  const fs::path out = root_ / "out";
  fs::create_directories(out);
  std::ofstream(out / "notes.txt") << "mine";
  std::ofstream(out / "model-00002-of-00002.safetensors") << "stale shard";
  const std::string refused =
      testing::ErrorOf([&] { WritePackedCheckpoint(model_, out.string(), F16(), false); });
  EXPECT_NE(refused.find("directory is not empty"), std::string::npos) << refused;
  EXPECT_TRUE(fs::exists(out / "model-00002-of-00002.safetensors"));  // nothing touched

  WritePackedCheckpoint(model_, out.string(), F16(), true);
  EXPECT_TRUE(fs::exists(out / "notes.txt"));
  EXPECT_FALSE(fs::exists(out / "model-00002-of-00002.safetensors"));
  EXPECT_TRUE(fs::exists(out / "model.safetensors"));
}

TEST_F(PackCheckpoint, RefusesTheModelsOwnDirectoryAndAMissingModel) {
  const std::string own = testing::ErrorOf([&] { WritePackedCheckpoint(model_, model_, F16(), true); });
  EXPECT_NE(own.find("is the model's own directory"), std::string::npos) << own;
  const std::string missing = testing::ErrorOf(
      [&] { WritePackedCheckpoint((root_ / "absent").string(), (root_ / "x").string(), F16(), false); });
  EXPECT_NE(missing.find("does not exist"), std::string::npos) << missing;
  EXPECT_FALSE(fs::exists(root_ / "x"));  // refused before anything was created
}

}  // namespace
}  // namespace plumb
