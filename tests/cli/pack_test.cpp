// plumb pack through the CLI: the tiny fixture model from safetensors and from GGUF into every format, the
// packed model generating through build/plumb, deterministic bytes, and one clear error per bad input; a
// SentencePiece GGUF's tokenizer carried as tokenizer.gguf (and a broken one named). The numerics of every
// format are checked in tests/model/packed_load_test.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "plumb/cli/commands.h"
#include "plumb/core/error.h"
#include "plumb/engine/text_model.h"
#include "plumb/formats/gguf.h"
#include "plumb/formats/gguf_writer.h"
#include "plumb/model/model.h"
#include "plumb/model/packing.h"
#include "support/errors.h"
#include "support/golden.h"
#include "support/process.h"
#include "tokenizer/tokenizer_fixtures.h"

namespace plumb {
namespace {

namespace fs = std::filesystem;
using testing::ExpectMessageHas;

const std::string kTiny = testing::FixtureDir("tiny-llama");

// The tiny fixture model with the SentencePiece vocabulary of fixtures/tokenizer/spm-tiny.gguf and a chat
// template: a Llama-2 style GGUF small enough to pack in a test. The fixture's 320-row embedding and LM head
// are widened to the vocabulary by repeating their rows; every other tensor and key is kept.
void WriteSpmModel(const fs::path& path) {
  const GgufFile model = GgufFile::Open(kTiny + "/model.f32.gguf");
  const GgufFile vocab = GgufFile::Open(testing::TokenizerFixture("spm-tiny.gguf"));
  const std::size_t n_vocab = vocab.GetStringArray("tokenizer.ggml.tokens").size();
  GgufWriter writer;
  for (const auto& [key, value] : model.metadata()) {
    writer.Add(key, key == "llama.vocab_size" ? GgufUint32(static_cast<std::uint32_t>(n_vocab)) : value);
  }
  for (const auto& [key, value] : vocab.metadata()) {
    if (key.starts_with("tokenizer.")) writer.Add(key, value);
  }
  writer.Add("tokenizer.chat_template",
             GgufString("{% for m in messages %}[{{ m['content'] }}]{% endfor %}"));
  for (const GgufTensorInfo& t : model.tensors()) {
    std::vector<std::uint8_t> data(t.bytes().begin(), t.bytes().end());
    std::vector<std::uint64_t> dims = t.dims;
    if (t.name == "token_embd.weight" || t.name == "output.weight") {
      const std::size_t row = static_cast<std::size_t>(t.dims[0]) * sizeof(float);  // F32 rows
      const std::size_t rows = static_cast<std::size_t>(t.dims[1]);
      data.resize(n_vocab * row);
      for (std::size_t r = rows; r < n_vocab; ++r)
        std::copy_n(data.begin() + static_cast<std::ptrdiff_t>((r % rows) * row), row,
                    data.begin() + static_cast<std::ptrdiff_t>(r * row));
      dims[1] = n_vocab;
    }
    writer.AddTensor(t.name, t.type, std::move(dims), std::move(data));
  }
  writer.WriteFile(path.string());
}

class PackCli : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("plumb-pack-cli-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // Runs `plumb pack ARGS` in process; returns the exit code, the output in out_ / err_.
  int Pack(std::vector<std::string> args) {
    args.insert(args.begin(), "pack");
    out_.str("");
    err_.str("");
    return cli::RunMain(args, out_, err_);
  }
  std::string PackError(const std::vector<std::string>& args) {
    return testing::ErrorOf([&] { Pack(args); });
  }
  static std::string Bytes(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }

  fs::path root_;
  std::ostringstream out_, err_;
};

TEST_F(PackCli, EveryFormatFromSafetensorsAndGgufLoadsAndGenerates) {
  const testing::GoldenFixture golden(kTiny);
  for (const std::string& source : {kTiny, kTiny + "/model.q8_0.gguf"}) {
    for (const std::string& dtype : PackFormatNames()) {
      SCOPED_TRACE(source + " -> " + dtype);
      const fs::path out = root_ / (fs::path(source).filename().string() + "-" + dtype);
      ASSERT_EQ(Pack({"--model", source, "--dtype", dtype, "--out", out.string(), "--threads", "2"}), 0);
      EXPECT_NE(err_.str().find("as " + dtype), std::string::npos) << err_.str();
      for (const char* file : {"model.safetensors", "config.json"})
        EXPECT_TRUE(fs::exists(out / file)) << file;
      Model model = Model::Load(out.string());
      EXPECT_EQ(model.config().packing.has_value(), ParsePackFormat(dtype)->IsQuantized());
      ContiguousKvCache cache = model.NewKvCache();
      const std::vector<float> logits = model.Prefill(golden.prompt_ids(), cache);
      EXPECT_EQ(logits.size(), static_cast<std::size_t>(model.config().vocab_size));
    }
  }
}

TEST_F(PackCli, F32FromGgufWritesTheSameTensorsAsFromSafetensors) {
  // model.f32.gguf holds model.safetensors' numbers (Q/K rows permuted, which the loader undoes): the
  // packed files must be byte for byte the same, so the GGUF path loses nothing.
  ASSERT_EQ(Pack({"--model", kTiny, "--dtype", "f32", "--out", (root_ / "a").string()}), 0);
  ASSERT_EQ(Pack({"--model", kTiny + "/model.f32.gguf", "--dtype", "f32", "--out", (root_ / "b").string()}),
            0);
  EXPECT_TRUE(Bytes(root_ / "a/model.safetensors") == Bytes(root_ / "b/model.safetensors"));
}

TEST_F(PackCli, TokenizerFilesOfAHuggingFaceSourceAreCopied) {
  const fs::path source = root_ / "hf";
  fs::create_directories(source);
  for (const char* file : {"config.json", "model.safetensors"})
    fs::copy_file(fs::path(kTiny) / file, source / file);
  const fs::path tokenizer = fs::path(PLUMB_SOURCE_DIR) / "fixtures/tokenizer/bpe-tiny";
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(tokenizer / file, source / file);
  ASSERT_EQ(Pack({"--model", source.string(), "--dtype", "bf16", "--out", (root_ / "out").string()}), 0);
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
    EXPECT_EQ(Bytes(root_ / "out" / file), Bytes(tokenizer / file)) << file;
  }
  EXPECT_NE(out_.str().find("tokenizer files copied"), std::string::npos) << out_.str();
}

// A SentencePiece GGUF packs with its tokenizer as tokenizer.gguf, and the packed directory tokenizes the
// committed corpus exactly as the source GGUF does (and as sentencepiece does), carries the chat template,
// and generates from a text prompt.
TEST_F(PackCli, SentencePieceGgufPacksItsTokenizerAsTokenizerGguf) {
  const fs::path source = root_ / "spm.gguf";
  WriteSpmModel(source);
  const fs::path out = root_ / "packed";
  ASSERT_EQ(Pack({"--model", source.string(), "--dtype", "bf16", "--out", out.string()}), 0) << err_.str();
  EXPECT_NE(out_.str().find("tokenizer.gguf written"), std::string::npos) << out_.str();
  EXPECT_TRUE(fs::exists(out / "tokenizer.gguf"));
  EXPECT_TRUE(fs::exists(out / "tokenizer_config.json"));
  EXPECT_FALSE(fs::exists(out / "tokenizer.json"));

  // Vocab-only: no tensors, general.architecture and every tokenizer key of the source.
  const GgufFile written = GgufFile::Open((out / "tokenizer.gguf").string());
  const GgufFile original = GgufFile::Open(source.string());
  EXPECT_TRUE(written.tensors().empty());
  EXPECT_EQ(written.GetString("general.architecture"), "llama");
  for (const auto& [key, value] : original.metadata()) {
    if (key.starts_with("tokenizer.")) {
      EXPECT_TRUE(written.Has(key)) << key;
    }
  }

  const TextModel from_gguf = TextModel::Load(source.string());
  const TextModel packed = TextModel::Load(out.string());
  ASSERT_TRUE(from_gguf.tokenizer && packed.tokenizer);
  const Tokenizer& a = *from_gguf.tokenizer;
  const Tokenizer& b = *packed.tokenizer;
  for (const std::string& text : testing::LoadCorpus()) {
    SCOPED_TRACE(testing::Printable(text));
    const std::vector<std::int32_t> ids = a.Encode(text, true, true);
    ASSERT_EQ(b.Encode(text, true, true), ids);
    EXPECT_EQ(b.Decode(ids), a.Decode(ids));
  }
  testing::ExpectOracleIds(b, testing::ReadJsonFile(testing::TokenizerFixture("expected-spm.json")),
                           testing::LoadCorpus());
  EXPECT_EQ(b.chat_template(), a.chat_template());
  EXPECT_FALSE(b.chat_template().empty());
  EXPECT_EQ(packed.StopIds(), from_gguf.StopIds());

  const nlohmann::json config = testing::ReadJsonFile((out / "tokenizer_config.json").string());
  EXPECT_EQ(config.at("bos_token"), "<s>");
  EXPECT_EQ(config.at("eos_token"), "</s>");
  EXPECT_EQ(config.at("chat_template"), a.chat_template());

  const testing::ProcessResult run = testing::RunPlumb("generate --model " + out.string() +
                                                       " --prompt 'Hello world' --max-tokens 4 --ignore-eos");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("generated: 4 tokens"), std::string::npos) << run.output;

  // Packing the packed directory again carries tokenizer.gguf along; --force over a directory that held one
  // removes it, so that a stale tokenizer.gguf cannot win over the new model's (absent) tokenizer.
  ASSERT_EQ(Pack({"--model", out.string(), "--dtype", "f16", "--out", (root_ / "again").string()}), 0);
  EXPECT_EQ(Bytes(root_ / "again/tokenizer.gguf"), Bytes(out / "tokenizer.gguf"));
  ASSERT_EQ(Pack({"--model", kTiny, "--dtype", "f16", "--out", out.string(), "--force"}), 0);
  EXPECT_FALSE(fs::exists(out / "tokenizer.gguf"));
  EXPECT_FALSE(TextModel::Load(out.string()).tokenizer);
}

// tokenizer.gguf is preferred over a tokenizer.json beside it, and a broken one is an error naming it
// (never a silent fallback to tokenizer.json).
TEST_F(PackCli, TokenizerGgufWinsAndABrokenOneIsNamed) {
  const fs::path source = root_ / "spm.gguf";
  WriteSpmModel(source);
  const fs::path out = root_ / "packed";
  ASSERT_EQ(Pack({"--model", source.string(), "--dtype", "f32", "--out", out.string()}), 0);
  // A byte-level tokenizer.json beside it is ignored.
  fs::copy_file(fs::path(PLUMB_SOURCE_DIR) / "fixtures/tokenizer/bpe-tiny/tokenizer.json",
                out / "tokenizer.json");
  EXPECT_EQ(TextModel::Load(out.string()).tokenizer->spec().model, "llama");

  const std::string path = (out / "tokenizer.gguf").string();
  const std::string whole = Bytes(path);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << whole.substr(0, whole.size() / 2);  // truncated
  ExpectMessageHas(testing::ErrorOf([&] { TextModel::Load(out.string()); }), {path});
  const testing::ProcessResult run =
      testing::RunPlumb("generate --model " + out.string() + " --prompt hi --max-tokens 1");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  ExpectMessageHas(run.output, {"plumb: error: ", path});

  std::ofstream(path, std::ios::binary | std::ios::trunc) << "not a GGUF file at all";
  ExpectMessageHas(testing::ErrorOf([&] { TextModel::Load(out.string()); }), {path, "magic"});

  // A well-formed GGUF without a tokenizer: the missing key, in that file.
  GgufWriter().Add("general.architecture", GgufString("llama")).WriteFile(path);
  ExpectMessageHas(testing::ErrorOf([&] { TextModel::Load(out.string()); }), {path, "tokenizer.ggml.model"});
}

TEST_F(PackCli, SameInputSameBytes) {
  for (const char* dtype : {"int4-asym-g32", "fp8-e4m3"}) {
    ASSERT_EQ(Pack({"--model", kTiny, "--dtype", dtype, "--out", (root_ / "x").string(), "--threads", "1"}),
              0);
    ASSERT_EQ(Pack({"--model", kTiny, "--dtype", dtype, "--out", (root_ / "y").string(), "--threads", "3"}),
              0);
    EXPECT_TRUE(Bytes(root_ / "x/model.safetensors") == Bytes(root_ / "y/model.safetensors")) << dtype;
    EXPECT_EQ(Bytes(root_ / "x/config.json"), Bytes(root_ / "y/config.json"));
    fs::remove_all(root_ / "x");
    fs::remove_all(root_ / "y");
  }
}

TEST_F(PackCli, PerTensorScalesAndKeptEmbeddingReachTheConfig) {
  ASSERT_EQ(Pack({"--model", kTiny, "--dtype", "fp8-e5m2", "--fp8-scale", "tensor", "--keep-embedding",
                  "--out", (root_ / "t").string()}),
            0);
  const ModelConfig config = LoadConfigJson((root_ / "t/config.json").string());
  ASSERT_TRUE(config.packing);
  EXPECT_FALSE(config.packing->format.fp8_per_row);
  EXPECT_FALSE(config.packing->embedding_packed);
  EXPECT_EQ(Model::Load((root_ / "t").string()).weights().token_embedding.type, GgmlType::F16);
}

TEST_F(PackCli, GenerateRunsOnAPackedModel) {
  const fs::path out = root_ / "int4";
  ASSERT_EQ(Pack({"--model", kTiny, "--dtype", "int4-sym-g32", "--out", out.string()}), 0);
  const testing::ProcessResult run = testing::RunPlumb("generate --model " + out.string() +
                                                       " --prompt-ids 1,2,3 --max-tokens 4 --ignore-eos");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("generated: 4 tokens"), std::string::npos) << run.output;
  // The help lists the command and its flags.
  const testing::ProcessResult help = testing::RunPlumb("pack --help");
  EXPECT_EQ(help.exit_code, 0);
  for (const char* flag : {"--model", "--dtype", "--out", "--fp8-scale", "--keep-embedding", "--threads",
                           "--force", "int4-asym-f16zero-g128"}) {
    EXPECT_NE(help.output.find(flag), std::string::npos) << flag;
  }
  EXPECT_NE(testing::RunPlumb("--help").output.find("pack"), std::string::npos);
}

// RoPE scaling survives a pack: config.json says llama3 again (transformers 4's spelling) and the packed
// model gives the source's logits; a GGUF's per-pair rope_freqs.weight has no config.json form, so packing
// one is refused before anything is written.
TEST_F(PackCli, RopeScalingTravelsThroughConfigJsonAndAGgufsFactorsAreRefused) {
  const std::string source = testing::FixtureDir("transformers") + "/llama3-scaling";
  const fs::path out = root_ / "llama3";
  ASSERT_EQ(Pack({"--model", source, "--dtype", "f32", "--out", out.string()}), 0) << err_.str();
  Model original = Model::Load(source), packed = Model::Load(out.string());
  EXPECT_EQ(packed.config().rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_EQ(packed.config().rope_freq_factors, original.config().rope_freq_factors);
  const std::vector<int> prompt = {1,   127, 60,  53, 28,  128, 79, 134, 53,
                                   121, 150, 152, 43, 150, 66,  39, 48,  123};
  ContiguousKvCache a = original.NewKvCache(), b = packed.NewKvCache();
  EXPECT_EQ(original.Prefill(prompt, a, PrefillLogits::kAllRows),
            packed.Prefill(prompt, b, PrefillLogits::kAllRows));

  const fs::path from_gguf = root_ / "from-gguf";
  ExpectMessageHas(
      PackError({"--model", source + "/model.f32.gguf", "--dtype", "f32", "--out", from_gguf.string()}),
      {"rope_freqs.weight", "no config.json spelling"});
  EXPECT_FALSE(fs::exists(from_gguf / "model.safetensors"));
}

TEST_F(PackCli, BadInputIsOneClearError) {
  const std::string out = (root_ / "o").string();
  ExpectMessageHas(PackError({"--model", kTiny, "--dtype", "int3", "--out", out}),
                   {"--dtype", "'int3'", "f16", "fp8-e5m2", "int4-asym-f16zero-g128"});
  ExpectMessageHas(PackError({"--model", kTiny, "--dtype", "f16", "--fp8-scale", "tensor", "--out", out}),
                   {"--fp8-scale", "f16"});
  ExpectMessageHas(PackError({"--model", kTiny, "--dtype", "fp8-e4m3", "--fp8-scale", "row", "--out", out}),
                   {"--fp8-scale", "'row'"});
  ExpectMessageHas(PackError({"--model", kTiny, "--dtype", "f16", "--keep-embedding", "--out", out}),
                   {"--keep-embedding"});
  ExpectMessageHas(PackError({"--model", (root_ / "nothing").string(), "--dtype", "f16", "--out", out}),
                   {"nothing", "does not exist"});
  ExpectMessageHas(PackError({"--model", kTiny, "--dtype", "f16"}), {"--out"});

  // A non-empty --out is refused, and kept as it was, unless --force.
  fs::create_directories(out);
  std::ofstream(fs::path(out) / "notes.txt") << "mine";
  ExpectMessageHas(PackError({"--model", kTiny, "--dtype", "f16", "--out", out}),
                   {out, "not empty", "--force"});
  EXPECT_FALSE(fs::exists(fs::path(out) / "model.safetensors"));
  std::ofstream(fs::path(out) / "model-00002-of-00002.safetensors") << "stale shard";
  EXPECT_EQ(Pack({"--model", kTiny, "--dtype", "f16", "--out", out, "--force"}), 0);
  EXPECT_TRUE(fs::exists(fs::path(out) / "notes.txt"));                          // not ours: kept
  EXPECT_FALSE(fs::exists(fs::path(out) / "model-00002-of-00002.safetensors"));  // a stale shard: removed
  EXPECT_NO_THROW(Model::Load(out));

  ExpectMessageHas(PackError({"--model", out, "--dtype", "f16", "--out", out, "--force"}),
                   {out, "own directory"});
  // --out is a file, or lies under one (so the directory cannot be created).
  std::ofstream(root_ / "file") << "x";
  ExpectMessageHas(PackError({"--model", kTiny, "--dtype", "f16", "--out", (root_ / "file").string()}),
                   {"file", "not a directory"});
  ExpectMessageHas(PackError({"--model", kTiny, "--dtype", "f16", "--out", (root_ / "file/sub").string()}),
                   {"file/sub", "cannot create"});
}

}  // namespace
}  // namespace plumb
