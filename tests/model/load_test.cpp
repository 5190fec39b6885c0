// Loading whole checkpoints: sharded files, and a clear error (naming file and tensor) for every way a
// checkpoint can disagree with itself. Each case is a modified copy of fixtures/tiny-llama in a temp dir.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "plumb/formats/safetensors.h"
#include "plumb/model/model.h"
#include "support/golden.h"

namespace plumb {
namespace {

namespace fs = std::filesystem;

class CheckpointLoading : public ::testing::Test {
 protected:
  void SetUp() override {
    source_ = testing::FixtureDir("tiny-llama");
    dir_ = fs::temp_directory_path() / ("plumb-load-test-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::copy_file(fs::path(source_) / "config.json", dir_ / "config.json");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The fixture's tensors, each as stored, for rewriting.
  std::vector<TensorToWrite> Tensors() const {
    const SafetensorsFile file = SafetensorsFile::Open(source_ + "/model.safetensors");
    std::vector<TensorToWrite> tensors;
    for (const TensorInfo& info : file.tensors()) {
      const auto bytes = file.Bytes(info.name);
      tensors.push_back({info.name, info.dtype, info.shape, {bytes.begin(), bytes.end()}});
    }
    return tensors;
  }
  void WriteConfig(const std::string& text) const { std::ofstream(dir_ / "config.json") << text; }
  std::string LoadError() const {
    try {
      Model::Load(dir_.string());
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  std::string source_;
  fs::path dir_;
};

TEST_F(CheckpointLoading, ShardsListedInTheIndexGiveTheSameLogits) {
  std::vector<TensorToWrite> first = Tensors(), second;
  // Move every layer-1 tensor and the head into a second shard.
  for (auto it = first.begin(); it != first.end();) {
    if (it->name.find("layers.1.") != std::string::npos || it->name == "lm_head.weight") {
      second.push_back(std::move(*it));
      it = first.erase(it);
    } else {
      ++it;
    }
  }
  nlohmann::json index = {{"metadata", nlohmann::json::object()}, {"weight_map", nlohmann::json::object()}};
  for (const auto& t : first) index["weight_map"][t.name] = "model-00001-of-00002.safetensors";
  for (const auto& t : second) index["weight_map"][t.name] = "model-00002-of-00002.safetensors";
  WriteSafetensors((dir_ / "model-00001-of-00002.safetensors").string(), first);
  WriteSafetensors((dir_ / "model-00002-of-00002.safetensors").string(), second);
  std::ofstream(dir_ / "model.safetensors.index.json") << index.dump();

  Model sharded = Model::Load(dir_.string());
  Model whole = Model::Load(source_);
  const std::vector<int> prompt = {1, 5, 9, 200};
  ContiguousKvCache a = sharded.NewKvCache(), b = whole.NewKvCache();
  EXPECT_EQ(sharded.Prefill(prompt, a), whole.Prefill(prompt, b));
}

TEST_F(CheckpointLoading, AFileWithConfigBesideItLoads) {
  WriteSafetensors((dir_ / "weights.safetensors").string(), Tensors());
  EXPECT_NO_THROW(Model::Load((dir_ / "weights.safetensors").string()));
}

TEST_F(CheckpointLoading, MissingPiecesAreNamed) {
  EXPECT_NE(LoadError().find("no model.safetensors or model.safetensors.index.json"), std::string::npos)
      << LoadError();
  fs::remove(dir_ / "config.json");
  WriteSafetensors((dir_ / "model.safetensors").string(), Tensors());
  EXPECT_NE(LoadError().find("no config.json"), std::string::npos) << LoadError();
}

// Model files are told by their content, never their name (issue 21): a GGUF saved under another name or
// reached through a symlink, a safetensors file under another name; anything else is refused with what was
// found.
TEST_F(CheckpointLoading, FilesAreRecognisedByContentNotName) {
  const fs::path gguf = fs::path(source_) / "model.q4_1.gguf";
  fs::copy_file(gguf, dir_ / "model.bin");
  fs::create_symlink(gguf, dir_ / "link-without-extension");
  Model reference = Model::Load(gguf.string());
  const std::vector<int> prompt = {1, 5, 9, 200};
  for (const char* name : {"model.bin", "link-without-extension"}) {
    EXPECT_EQ(DetectModelPath((dir_ / name).string()), ModelPathKind::kGguf) << name;
    Model renamed = Model::Load((dir_ / name).string());
    ContiguousKvCache a = renamed.NewKvCache(), b = reference.NewKvCache();
    EXPECT_EQ(renamed.Prefill(prompt, a), reference.Prefill(prompt, b)) << name;
  }
  WriteSafetensors((dir_ / "weights.data").string(), Tensors());
  EXPECT_EQ(DetectModelPath((dir_ / "weights.data").string()), ModelPathKind::kSafetensorsFile);
  EXPECT_NO_THROW(Model::Load((dir_ / "weights.data").string()));
  EXPECT_EQ(DetectModelPath(dir_.string()), ModelPathKind::kCheckpointDir);

  const auto error_for = [](const std::string& path) {
    try {
      Model::Load(path);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(loaded)");
  };
  EXPECT_EQ(error_for("/dev/zero"),
            "/dev/zero: not a GGUF or safetensors file (first bytes 00 00 00 00 00 00 00 00 00) and not a "
            "directory");
  std::ofstream(dir_ / "short.gguf") << "GG";
  EXPECT_EQ(error_for((dir_ / "short.gguf").string()),
            (dir_ / "short.gguf").string() +
                ": not a GGUF or safetensors file (first bytes 47 47) and not a directory");
  std::ofstream(dir_ / "empty.gguf").flush();
  EXPECT_NE(error_for((dir_ / "empty.gguf").string()).find("(empty) and not a directory"), std::string::npos);
  EXPECT_NE(error_for((dir_ / "absent").string()).find("model path does not exist"), std::string::npos);
}

TEST_F(CheckpointLoading, MissingTensorIsNamed) {
  std::vector<TensorToWrite> tensors = Tensors();
  std::erase_if(tensors,
                [](const TensorToWrite& t) { return t.name == "model.layers.1.mlp.up_proj.weight"; });
  WriteSafetensors((dir_ / "model.safetensors").string(), tensors);
  EXPECT_NE(LoadError().find("missing tensor \"model.layers.1.mlp.up_proj.weight\""), std::string::npos)
      << LoadError();
}

// A tensor plumb does not compute (Qwen3's per-head q_norm here) refuses the checkpoint, naming it; the RoPE
// buffers of older checkpoints, which transformers ignores too, do not.
TEST_F(CheckpointLoading, ATensorPlumbDoesNotUseIsRefusedByName) {
  std::vector<TensorToWrite> tensors = Tensors();
  const std::vector<std::uint8_t> four_floats(16, 0);
  tensors.push_back({"model.layers.1.self_attn.rotary_emb.inv_freq", DType::F32, {4}, four_floats});
  WriteSafetensors((dir_ / "model.safetensors").string(), tensors);
  EXPECT_EQ(LoadError(), "");
  tensors.push_back({"model.layers.0.self_attn.q_norm.weight", DType::F32, {4}, four_floats});
  WriteSafetensors((dir_ / "model.safetensors").string(), tensors);
  EXPECT_NE(
      LoadError().find("model.safetensors: tensor \"model.layers.0.self_attn.q_norm.weight\" is not part "
                       "of the llama model plumb computes"),
      std::string::npos)
      << LoadError();
}

TEST_F(CheckpointLoading, UntiedModelWithoutLmHeadIsAnError) {
  std::vector<TensorToWrite> tensors = Tensors();
  std::erase_if(tensors, [](const TensorToWrite& t) { return t.name == "lm_head.weight"; });
  WriteSafetensors((dir_ / "model.safetensors").string(), tensors);
  EXPECT_NE(LoadError().find("lm_head.weight"), std::string::npos) << LoadError();
}

TEST_F(CheckpointLoading, ShapeThatDisagreesWithTheConfigIsNamed) {
  WriteSafetensors((dir_ / "model.safetensors").string(), Tensors());
  std::ifstream in(source_ + "/config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  config["intermediate_size"] = 161;
  WriteConfig(config.dump());
  const std::string error = LoadError();
  EXPECT_NE(error.find("model.layers.0.mlp.gate_proj.weight"), std::string::npos) << error;
  EXPECT_NE(error.find("expected [161, 64]"), std::string::npos) << error;
}

TEST_F(CheckpointLoading, NonFloatWeightsAreAnError) {
  std::vector<TensorToWrite> tensors = Tensors();
  for (TensorToWrite& t : tensors) {
    if (t.name == "model.norm.weight") t.dtype = DType::I32;  // same byte count, wrong type
  }
  WriteSafetensors((dir_ / "model.safetensors").string(), tensors);
  EXPECT_NE(LoadError().find("model.norm.weight"), std::string::npos) << LoadError();
}

TEST_F(CheckpointLoading, TruncatedWeightsFileIsAnErrorNotACrash) {
  WriteSafetensors((dir_ / "model.safetensors").string(), Tensors());
  const auto size = fs::file_size(dir_ / "model.safetensors");
  fs::resize_file(dir_ / "model.safetensors", size - 1000);
  const std::string error = LoadError();
  EXPECT_NE(error.find("model.safetensors"), std::string::npos) << error;
}

TEST_F(CheckpointLoading, MalformedIndexIsNamed) {
  std::ofstream(dir_ / "model.safetensors.index.json") << "{\"weight_map\": [1, 2]}";
  EXPECT_NE(LoadError().find("missing object \"weight_map\""), std::string::npos) << LoadError();
  std::ofstream(dir_ / "model.safetensors.index.json") << "{\"weight_map\": {\"x\": 3}}";
  EXPECT_NE(LoadError().find("is not a file name"), std::string::npos) << LoadError();
  std::ofstream(dir_ / "model.safetensors.index.json") << "{not json";
  EXPECT_NE(LoadError().find("invalid JSON"), std::string::npos) << LoadError();
}

}  // namespace
}  // namespace plumb
