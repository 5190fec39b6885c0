// ExportTokenizerJson: a byte-level tokenizer written as tokenizer.json + tokenizer_config.json and read back
// by Tokenizer::FromTokenizerJson must encode the committed corpus exactly as the oracle (HF tokenizers)
// does, and describe the same tokenizer: SmolLM2's GGUF vocabulary (models/, as tokenizer_gguf_test uses it)
// under each of the four pre-tokenizers, and the small HF fixtures exported again. SentencePiece is refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "plumb/formats/gguf.h"
#include "plumb/tokenizer/tokenizer.h"
#include "plumb/tokenizer/tokenizer_export.h"
#include "tokenizer/tokenizer_fixtures.h"

namespace plumb {
namespace {

namespace fs = std::filesystem;
using testing::ErrorOf;
using testing::LoadCorpus;
using testing::ReadJsonFile;
using testing::TokenizerFixture;

const std::string kSmolLmPath = std::string(PLUMB_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

// Writes the exported files to a fresh directory and reads them back.
Tokenizer ExportAndReload(const TokenizerSpec& spec, const std::string& tag) {
  const fs::path dir = fs::temp_directory_path() / ("plumb-export-" + std::to_string(::getpid()) + "-" + tag);
  fs::remove_all(dir);
  fs::create_directories(dir);
  const TokenizerJsonFiles files = ExportTokenizerJson(spec);
  std::ofstream(dir / "tokenizer.json") << files.tokenizer_json;
  std::ofstream(dir / "tokenizer_config.json") << files.tokenizer_config_json;
  Tokenizer reloaded = Tokenizer::FromTokenizerJson((dir / "tokenizer.json").string());
  fs::remove_all(dir);
  return reloaded;
}

// Everything the two specs say that changes encoding, decoding or stopping.
void ExpectSameTokenizer(const TokenizerSpec& a, const TokenizerSpec& b) {
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.merges, b.merges);
  EXPECT_EQ(a.bos_id, b.bos_id);
  EXPECT_EQ(a.eos_id, b.eos_id);
  EXPECT_EQ(a.pad_id, b.pad_id);
  EXPECT_EQ(a.unk_id, b.unk_id);
  EXPECT_EQ(a.add_bos, b.add_bos);
  EXPECT_EQ(a.add_eos, b.add_eos);
  EXPECT_EQ(a.ignore_merges, b.ignore_merges);
  EXPECT_EQ(a.chat_template, b.chat_template);
  // Token types up to what tokenizer.json can say: undefined reads back as normal; control and unknown are
  // one kind there (special added tokens, the unk token named by model.unk_token), and the tokenizer treats
  // them alike (matched only when parsing special tokens, decoded to nothing).
  auto kind = [](std::int32_t type) {
    if (type == kTokenUndefined) return static_cast<std::int32_t>(kTokenNormal);
    if (type == kTokenUnknown) return static_cast<std::int32_t>(kTokenControl);
    return type;
  };
  ASSERT_EQ(a.tokens.size(), b.token_types.size());
  for (std::size_t i = 0; i < a.tokens.size(); ++i) {
    const std::int32_t type = a.token_types.empty() ? kTokenNormal : a.token_types[i];
    EXPECT_EQ(kind(b.token_types[i]), kind(type)) << "token " << i << " " << a.tokens[i];
  }
}

class SmolLmExport : public ::testing::TestWithParam<const char*> {};

TEST_P(SmolLmExport, ReadsBackAsTheSameTokenizer) {
  ASSERT_TRUE(fs::exists(kSmolLmPath))
      << kSmolLmPath << " is missing: scripts/test fetches it first (scripts/fetch-model)";
  TokenizerSpec spec = TokenizerSpecFromGguf(GgufFile::Open(kSmolLmPath));
  spec.pre = GetParam();
  spec.ignore_merges = spec.pre == "llama-bpe";  // as TokenizerSpecFromGguf sets it for a llama-bpe file
  const Tokenizer reloaded = ExportAndReload(spec, GetParam());
  EXPECT_EQ(reloaded.spec().pre, GetParam());
  ExpectSameTokenizer(spec, reloaded.spec());
  testing::ExpectOracleIds(reloaded,
                           ReadJsonFile(TokenizerFixture(std::string("expected-") + GetParam() + ".json")),
                           LoadCorpus());
  testing::ExpectRoundTripAndStreaming(reloaded, LoadCorpus());
}

INSTANTIATE_TEST_SUITE_P(PreTokenizers, SmolLmExport,
                         ::testing::Values("smollm", "llama-bpe", "qwen2", "gpt2"),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           std::erase(name, '-');
                           return name;
                         });

TEST(SmolLmExport, FileAsStatedLongTextExact) {
  ASSERT_TRUE(fs::exists(kSmolLmPath)) << kSmolLmPath << " is missing (scripts/fetch-model)";
  const Tokenizer original = Tokenizer::FromGguf(GgufFile::Open(kSmolLmPath));
  const Tokenizer reloaded = ExportAndReload(original.spec(), "smollm-file");
  ExpectSameTokenizer(original.spec(), reloaded.spec());
  const std::string text = testing::ReadFile(TokenizerFixture("gpl-3.txt"));
  EXPECT_EQ(
      reloaded.Encode(text, false, false),
      ReadJsonFile(TokenizerFixture("expected-smollm.json")).at("gpl3").get<std::vector<std::int32_t>>());
  for (std::int32_t id = 0; id < original.vocab_size(); ++id) {
    ASSERT_EQ(reloaded.IsEndOfGeneration(id), original.IsEndOfGeneration(id)) << id;
  }
}

// The fixtures' own tokenizer.json files, read, exported and read again: the oracle's ids still.
class FixtureExport : public ::testing::TestWithParam<const char*> {};

TEST_P(FixtureExport, EncodesLikeTokenizers) {
  const std::string dir = TokenizerFixture(GetParam());
  const Tokenizer original = Tokenizer::FromTokenizerJson(dir + "/tokenizer.json");
  const Tokenizer reloaded = ExportAndReload(original.spec(), GetParam());
  ExpectSameTokenizer(original.spec(), reloaded.spec());
  EXPECT_EQ(reloaded.spec().pre, original.spec().pre);
  testing::ExpectOracleIds(reloaded, ReadJsonFile(dir + "/expected.json"), LoadCorpus());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureExport,
                         ::testing::Values("bpe-tiny", "bpe-tiny-digits", "bpe-tiny-gpt2"),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           std::erase(name, '-');
                           return name;
                         });

TEST(TokenizerExport, RefusesWhatTokenizerJsonCannotSay) {
  const Tokenizer spm = Tokenizer::FromGguf(GgufFile::Open(TokenizerFixture("spm-tiny.gguf")));
  const std::string message = ErrorOf([&] { ExportTokenizerJson(spm.spec()); });
  EXPECT_NE(message.find("SentencePiece"), std::string::npos) << message;
  EXPECT_NE(message.find("'llama'"), std::string::npos) << message;

  TokenizerSpec spec = Tokenizer::FromTokenizerJson(TokenizerFixture("bpe-tiny/tokenizer.json")).spec();
  spec.token_types[7] = kTokenUnused;
  const std::string unused = ErrorOf([&] { ExportTokenizerJson(spec); });
  EXPECT_NE(unused.find("token 7"), std::string::npos) << unused;
  EXPECT_NE(unused.find("unused"), std::string::npos) << unused;
}

}  // namespace
}  // namespace plumb
