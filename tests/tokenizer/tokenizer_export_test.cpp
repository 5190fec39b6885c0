// ExportTokenizerJson: a byte-level tokenizer written as tokenizer.json + tokenizer_config.json and read back
// by Tokenizer::FromTokenizerJson must encode the committed corpus exactly as the oracle (HF tokenizers)
// does, and describe the same tokenizer: SmolLM2's GGUF vocabulary (models/, as tokenizer_gguf_test uses it)
// under each of the four pre-tokenizers, and the small HF fixtures exported again. SentencePiece is refused
// there, and exported instead as a vocab-only tokenizer.gguf that must encode the corpus as sentencepiece.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "plumb/formats/gguf.h"
#include "plumb/tokenizer/tokenizer.h"
#include "plumb/tokenizer/tokenizer_export.h"
#include "support/gguf_builder.h"
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
  // A SentencePiece spec has no exact tokenizer.json (merge ranks cannot say merge-by-score): refused, and
  // the message points at the file that can hold it.
  const Tokenizer spm = Tokenizer::FromGguf(GgufFile::Open(TokenizerFixture("spm-tiny.gguf")));
  const std::string message = ErrorOf([&] { ExportTokenizerJson(spm.spec()); });
  EXPECT_NE(message.find("SentencePiece"), std::string::npos) << message;
  EXPECT_NE(message.find("'llama'"), std::string::npos) << message;
  EXPECT_NE(message.find("ExportTokenizerGguf"), std::string::npos) << message;

  TokenizerSpec spec = Tokenizer::FromTokenizerJson(TokenizerFixture("bpe-tiny/tokenizer.json")).spec();
  spec.token_types[7] = kTokenUnused;
  const std::string unused = ErrorOf([&] { ExportTokenizerJson(spec); });
  EXPECT_NE(unused.find("token 7"), std::string::npos) << unused;
  EXPECT_NE(unused.find("unused"), std::string::npos) << unused;
}

// ---------------------------------------------------------------------------------------------------------
// tokenizer.gguf: a SentencePiece tokenizer travels as its GGUF keys

// Every key ExportTokenizerGguf copies, with the value the source holds.
void ExpectTokenizerKeysCopied(const GgufFile& source, const GgufFile& copy) {
  EXPECT_TRUE(copy.tensors().empty());
  std::size_t copied = 0;
  for (const auto& [key, value] : source.metadata()) {
    if (!key.starts_with("tokenizer.") && key != "general.architecture" && key != "general.name") continue;
    ++copied;
    ASSERT_TRUE(copy.Has(key)) << key;
    testing::ExpectSameGgufValue(*copy.FindValue(key), value, key);
  }
  EXPECT_EQ(copy.metadata().size(), copied);  // nothing else
}

TEST(TokenizerGgufExport, SentencePieceBecomesTokenizerGgufThatEncodesLikeSentencePiece) {
  const GgufFile source = GgufFile::Open(TokenizerFixture("spm-tiny.gguf"));
  const std::vector<TokenizerFile> files = ExportGgufTokenizer(source);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].name, "tokenizer.gguf");
  EXPECT_EQ(files[1].name, "tokenizer_config.json");
  const std::vector<std::uint8_t> bytes(files[0].contents.begin(), files[0].contents.end());
  const GgufFile copy = GgufFile::FromBytes(bytes, "tokenizer.gguf");
  EXPECT_EQ(copy.GetString("general.architecture"), "llama");
  ExpectTokenizerKeysCopied(source, copy);

  const Tokenizer original = Tokenizer::FromGguf(source);
  const Tokenizer reloaded = Tokenizer::FromGguf(copy);
  ExpectSameTokenizer(original.spec(), reloaded.spec());
  EXPECT_EQ(reloaded.spec().scores, original.spec().scores);
  EXPECT_EQ(reloaded.spec().add_space_prefix, original.spec().add_space_prefix);
  testing::ExpectOracleIds(reloaded, ReadJsonFile(TokenizerFixture("expected-spm.json")), LoadCorpus());
  testing::ExpectRoundTripAndStreaming(reloaded, LoadCorpus());

  const nlohmann::json config = nlohmann::json::parse(files[1].contents);
  EXPECT_EQ(config.at("bos_token"), original.spec().tokens[original.bos_id()]);
  EXPECT_EQ(config.at("eos_token"), original.spec().tokens[original.eos_id()]);
  EXPECT_EQ(config.at("add_bos_token"), original.add_bos());
  EXPECT_FALSE(config.contains("tokenizer_class"));  // no Hugging Face class reads tokenizer.gguf
}

// ExportTokenizerGguf copies whatever tokenizer it is given: SmolLM2's byte-level one (49152 tokens, 48900
// merges, a chat template) reads back identically too, although plumb pack writes tokenizer.json for it.
TEST(TokenizerGgufExport, AnyTokenizerModelCopiesExactly) {
  ASSERT_TRUE(fs::exists(kSmolLmPath)) << kSmolLmPath << " is missing (scripts/fetch-model)";
  const GgufFile source = GgufFile::Open(kSmolLmPath);
  const std::vector<std::uint8_t> bytes = ExportTokenizerGguf(source);
  const GgufFile copy = GgufFile::FromBytes(bytes, "tokenizer.gguf");
  ExpectTokenizerKeysCopied(source, copy);
  const Tokenizer original = Tokenizer::FromGguf(source);
  ExpectSameTokenizer(original.spec(), Tokenizer::FromGguf(copy).spec());
  EXPECT_FALSE(original.chat_template().empty());

  const std::vector<TokenizerFile> files = ExportGgufTokenizer(source);  // byte-level: tokenizer.json
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].name, "tokenizer.json");
  EXPECT_EQ(files[1].name, "tokenizer_config.json");
}

TEST(TokenizerGgufExport, ASourceWithoutATokenizerIsAnError) {
  const GgufFile model =
      GgufFile::Open(std::string(PLUMB_SOURCE_DIR) + "/fixtures/tiny-llama/model.f32.gguf");
  const std::string message = ErrorOf([&] { ExportTokenizerGguf(model); });
  EXPECT_NE(message.find("model.f32.gguf"), std::string::npos) << message;
  EXPECT_NE(message.find("tokenizer.ggml.model"), std::string::npos) << message;
}

}  // namespace
}  // namespace plumb
