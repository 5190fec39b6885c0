// plumb generate --save-kv / --load-kv: a run cut in two continues as the uninterrupted run does (the same
// ids for every KV dtype), and a file that does not fit the run is refused with one line naming it and the
// field. The bytes themselves are tested in tests/kv/kv_handoff_test.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "plumb/cli/commands.h"
#include "plumb/core/error.h"
#include "plumb/formats/safetensors.h"
#include "support/golden.h"
#include "support/process.h"

namespace plumb {
namespace {

const std::string kModel = testing::FixtureDir("tiny-llama");
constexpr const char* kPrompt = "1,5,9,14,2,7";

std::string Scratch(const std::string& name) {
  const std::string dir = std::string(PLUMB_BINARY_DIR) + "/test-scratch/kv_handoff_cli";
  std::filesystem::create_directories(dir);
  return dir + "/" + name;
}

// Runs plumb in process; returns stdout, or the error's message prefixed with "error: ".
std::string RunCli(std::vector<std::string> args) {
  std::ostringstream out, err;
  try {
    EXPECT_EQ(cli::RunMain(args, out, err), 0);
  } catch (const Error& e) {
    return std::string("error: ") + e.what();
  }
  return out.str();
}

std::vector<std::string> Generate(const std::string& kv_dtype, int max_tokens) {
  return {"generate", "--model",      kModel,         "--kv-dtype",
          kv_dtype,   "--ignore-eos", "--max-tokens", std::to_string(max_tokens)};
}

std::vector<std::string> With(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

std::vector<std::string> Split(const std::string& ids) {
  std::istringstream in(ids);
  std::vector<std::string> out;
  for (std::string id; in >> id;) out.push_back(id);
  return out;
}

TEST(KvHandoffCli, ASavedRunContinuesAsTheUninterruptedOneForEveryKvDtype) {
  for (const char* dtype : {"f32", "f16", "bf16", "fp8-e4m3", "fp8-e5m2"}) {
    SCOPED_TRACE(dtype);
    const std::string file = Scratch(std::string(dtype) + ".safetensors");
    const std::vector<std::string> whole = Split(RunCli(With(Generate(dtype, 9), {"--prompt-ids", kPrompt})));
    ASSERT_EQ(whole.size(), 9u);
    const std::vector<std::string> first =
        Split(RunCli(With(Generate(dtype, 3), {"--prompt-ids", kPrompt, "--save-kv", file})));
    // Load, generate 3 and save again; load that and finish: a hand-off of a hand-off.
    const std::string file2 = Scratch(std::string(dtype) + ".2.safetensors");
    const std::vector<std::string> second =
        Split(RunCli(With(Generate(dtype, 3), {"--load-kv", file, "--save-kv", file2})));
    const std::vector<std::string> third = Split(RunCli(With(Generate(dtype, 3), {"--load-kv", file2})));
    std::vector<std::string> joined = first;
    joined.insert(joined.end(), second.begin(), second.end());
    joined.insert(joined.end(), third.begin(), third.end());
    EXPECT_EQ(joined, whole);
    const SafetensorsFile saved = SafetensorsFile::Open(file2);
    EXPECT_EQ(saved.metadata().at("length"), "11");  // 6 prompt ids + 5 of the 6 generated
    EXPECT_EQ(saved.metadata().at("next_token"), whole[5]);
    EXPECT_EQ(saved.metadata().at("kv_dtype"), dtype);
  }
}

TEST(KvHandoffCli, LeftOutKvDtypeIsTheFilesAndMorePromptIdsFollowTheNextToken) {
  const std::string file = Scratch("fp8.safetensors");
  RunCli(With(Generate("fp8-e4m3", 2), {"--prompt-ids", kPrompt, "--save-kv", file}));
  const std::vector<std::string> args = {"generate",     "--model",      kModel, "--load-kv",    file,
                                         "--ignore-eos", "--max-tokens", "2",    "--prompt-ids", "3,4"};
  std::ostringstream out, err;
  EXPECT_EQ(cli::RunMain(args, out, err), 0);
  EXPECT_EQ(Split(out.str()).size(), 2u) << out.str();
  // 6 prompt ids and the first generated one are in the file; it says which dtype it adopted.
  EXPECT_NE(err.str().find("KV cache: 7 positions of fp8-e4m3 loaded from " + file), std::string::npos)
      << err.str();
}

std::string Refusal(const std::vector<std::string>& args) {
  const std::string message = RunCli(args);
  EXPECT_EQ(message.rfind("error: ", 0), 0u) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  return message;
}

void ExpectNames(const std::string& message, const std::string& file, const std::string& field) {
  EXPECT_NE(message.find(file), std::string::npos) << message;
  EXPECT_NE(message.find(field), std::string::npos) << message;
}

TEST(KvHandoffCli, RefusesAFileThatDoesNotFitTheRun) {
  const std::string file = Scratch("refusals.safetensors");
  RunCli(With(Generate("bf16", 3), {"--prompt-ids", kPrompt, "--save-kv", file}));
  // Another KV dtype than asked.
  ExpectNames(Refusal(With(Generate("f16", 2), {"--load-kv", file})), file, "kv_dtype");
  // Another model: the same shapes (another quantization of the same weights) or another architecture.
  ExpectNames(
      Refusal({"generate", "--model", testing::FixtureDir("tiny-llama/model.q8_0.gguf"), "--load-kv", file}),
      file, "weights_sha256");
  ExpectNames(
      Refusal({"generate", "--model", testing::FixtureDir("tiny-gemma3/model.q.gguf"), "--load-kv", file}),
      file, "architecture");
  // Longer than the context asked for.
  ExpectNames(Refusal(With(Generate("bf16", 1), {"--load-kv", file, "--ctx", "4"})), file, "length");
  // Truncated.
  std::ifstream in(file, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = Scratch("truncated.safetensors");
  std::ofstream(cut, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 5));
  ExpectNames(Refusal(With(Generate("bf16", 1), {"--load-kv", cut})), cut, "");
  // Another format version.
  const SafetensorsFile good = SafetensorsFile::Open(file);
  std::map<std::string, std::string> meta = good.metadata();
  meta["format_version"] = "7";
  std::vector<TensorToWrite> tensors;
  for (const TensorInfo& t : good.tensors()) {
    const std::span<const std::uint8_t> b = good.Bytes(t.name);
    tensors.push_back({t.name, t.dtype, t.shape, {b.begin(), b.end()}});
  }
  const std::string v7 = Scratch("version7.safetensors");
  WriteSafetensors(v7, tensors, meta);
  ExpectNames(Refusal(With(Generate("bf16", 1), {"--load-kv", v7})), v7, "format_version");
  // Not with a prompts file.
  EXPECT_NE(Refusal(With(Generate("bf16", 1), {"--prompts-file", file, "--load-kv", file})).find("--load-kv"),
            std::string::npos);
}

TEST(KvHandoffCli, TheBinaryPrintsARefusalAsOneErrorLine) {
  const std::string file = Scratch("binary.safetensors");
  RunCli(With(Generate("f32", 2), {"--prompt-ids", kPrompt, "--save-kv", file}));
  const testing::ProcessResult r =
      testing::RunPlumb("generate --model " + kModel + " --kv-dtype f16 --load-kv " + file);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(
      r.output,
      "plumb: error: " + file +
          ": KV hand-off field kv_dtype is f32 but --kv-dtype f16 was asked for (leave --kv-dtype out to "
          "use the file's)\n");
}

}  // namespace
}  // namespace plumb
