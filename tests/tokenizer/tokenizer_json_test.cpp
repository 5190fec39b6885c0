// Tokenizer::FromTokenizerJson against HF tokenizers' own encodings of the corpus: small BPEs trained by the
// fixture script in three pre-tokenizer forms, and the SentencePiece model as a Llama-2 style tokenizer.json
// (Prepend/Replace normalizer, and Metaspace). Then one malformed or unsupported file per check.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "plumb/tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_fixtures.h"

namespace plumb {
namespace {

using nlohmann::json;
using testing::ErrorOf;
using testing::LoadCorpus;
using testing::ReadJsonFile;
using testing::TokenizerFixture;

class TokenizerJsonOracle : public ::testing::TestWithParam<const char*> {};

TEST_P(TokenizerJsonOracle, EncodesLikeTokenizers) {
  const std::string dir = TokenizerFixture(GetParam());
  const Tokenizer t = Tokenizer::FromTokenizerJson(dir + "/tokenizer.json");
  testing::ExpectOracleIds(t, ReadJsonFile(dir + "/expected.json"), LoadCorpus());
}

TEST_P(TokenizerJsonOracle, DecodesAndStreamsBackToTheText) {
  const Tokenizer t = Tokenizer::FromTokenizerJson(TokenizerFixture(GetParam()) + "/tokenizer.json");
  testing::ExpectRoundTripAndStreaming(t, LoadCorpus());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TokenizerJsonOracle,
                         ::testing::Values("bpe-tiny", "bpe-tiny-digits", "bpe-tiny-gpt2", "spm-tiny",
                                           "spm-tiny-metaspace"),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           std::erase(name, '-');
                           return name;
                         });

TEST(TokenizerJson, ReadsTheConfigurationItDescribes) {
  const Tokenizer bpe = Tokenizer::FromTokenizerJson(TokenizerFixture("bpe-tiny/tokenizer.json"));
  const json config = ReadJsonFile(TokenizerFixture("bpe-tiny/tokenizer_config.json"));
  EXPECT_EQ(bpe.spec().model, "gpt2");
  EXPECT_EQ(bpe.spec().pre, "llama-bpe");
  EXPECT_EQ(bpe.add_bos(), config["add_bos_token"].get<bool>());
  EXPECT_EQ(bpe.bos_id(), bpe.FindToken(config["bos_token"].get<std::string>()));
  EXPECT_EQ(bpe.eos_id(), bpe.FindToken(config["eos_token"].get<std::string>()));
  EXPECT_EQ(bpe.chat_template(), config["chat_template"].get<std::string>());
  EXPECT_TRUE(bpe.IsEndOfGeneration(bpe.eos_id()));
  const auto with_bos = bpe.Encode("Hello", true, false);
  ASSERT_FALSE(with_bos.empty());
  EXPECT_EQ(with_bos.front(), bpe.bos_id());

  // No tokenizer_config.json beside it: no BOS, no template.
  const Tokenizer digits = Tokenizer::FromTokenizerJson(TokenizerFixture("bpe-tiny-digits/tokenizer.json"));
  EXPECT_EQ(digits.spec().pre, "smollm");
  EXPECT_FALSE(digits.add_bos());
  EXPECT_EQ(digits.chat_template(), "");
  EXPECT_EQ(Tokenizer::FromTokenizerJson(TokenizerFixture("bpe-tiny-gpt2/tokenizer.json")).spec().pre,
            "gpt2");

  const Tokenizer spm = Tokenizer::FromTokenizerJson(TokenizerFixture("spm-tiny/tokenizer.json"));
  EXPECT_EQ(spm.spec().model, "llama");
  EXPECT_TRUE(spm.spec().add_space_prefix);
  EXPECT_FALSE(spm.spec().space_prefix_first_only);
  EXPECT_EQ(spm.spec().token_types[*spm.FindToken("<0x41>")], kTokenByte);
  EXPECT_EQ(spm.spec().token_types[*spm.FindToken("<unk>")], kTokenUnknown);
  EXPECT_EQ(spm.spec().unk_id, *spm.FindToken("<unk>"));
  const Tokenizer meta = Tokenizer::FromTokenizerJson(TokenizerFixture("spm-tiny-metaspace/tokenizer.json"));
  EXPECT_TRUE(meta.spec().space_prefix_first_only);
  EXPECT_TRUE(meta.spec().space_prefix_unless_space);
}

// Writes `root` (changed by `edit`) to a temporary tokenizer.json and returns the loader's error message.
class TokenizerJsonErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("plumb-tokjson-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Path() const { return (dir_ / "tokenizer.json").string(); }
  void Write(const std::string& text) const { std::ofstream(Path(), std::ios::binary) << text; }

  std::string ErrorAfter(const char* fixture, const std::function<void(json&)>& edit) const {
    json root = ReadJsonFile(TokenizerFixture(std::string(fixture) + "/tokenizer.json"));
    edit(root);
    Write(root.dump());
    const std::string message = ErrorOf([&] { Tokenizer::FromTokenizerJson(Path()); });
    EXPECT_NE(message.find(Path()), std::string::npos) << "the message must name the file: " << message;
    return message;
  }

  std::filesystem::path dir_;
};

TEST_F(TokenizerJsonErrors, UnsupportedModelsAndPreTokenizers) {
  EXPECT_NE(
      ErrorAfter("bpe-tiny", [](json& j) { j["model"]["type"] = "Unigram"; }).find("model.type: 'Unigram'"),
      std::string::npos);
  EXPECT_NE(ErrorAfter("bpe-tiny", [](json& j) { j["model"]["type"] = "WordPiece"; }).find("'WordPiece'"),
            std::string::npos);
  EXPECT_NE(ErrorAfter("bpe-tiny",
                       [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+"; })
                .find("pre_tokenizer.pretokenizers[0].pattern.Regex: unknown pattern"),
            std::string::npos);
  EXPECT_NE(ErrorAfter("bpe-tiny",
                       [](json& j) {
                         j["normalizer"] = {{"type", "NFC"}};
                       })
                .find("normalizer"),
            std::string::npos);
  EXPECT_NE(ErrorAfter("bpe-tiny-gpt2", [](json& j) { j["pre_tokenizer"]["add_prefix_space"] = true; })
                .find("pre_tokenizer.add_prefix_space"),
            std::string::npos);
  EXPECT_NE(ErrorAfter("bpe-tiny-gpt2",
                       [](json& j) {
                         j["pre_tokenizer"] = {{"type", "Whitespace"}};
                       })
                .find("pre_tokenizer.type: 'Whitespace'"),
            std::string::npos);
  EXPECT_NE(ErrorAfter("bpe-tiny-digits",
                       [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["individual_digits"] = false; })
                .find("individual_digits"),
            std::string::npos);
  EXPECT_NE(ErrorAfter("bpe-tiny",
                       [](json& j) {
                         j["decoder"] = {{"type", "WordPiece"}};
                       })
                .find("decoder"),
            std::string::npos);
  EXPECT_NE(ErrorAfter("bpe-tiny", [](json& j) { j["model"]["dropout"] = 0.1; }).find("model.dropout"),
            std::string::npos);
  EXPECT_NE(ErrorAfter("spm-tiny", [](json& j) { j["normalizer"]["normalizers"][0]["prepend"] = "_"; })
                .find("normalizer.normalizers[0]"),
            std::string::npos);
  EXPECT_NE(ErrorAfter("spm-tiny-metaspace", [](json& j) { j["pre_tokenizer"]["split"] = true; })
                .find("pre_tokenizer.split"),
            std::string::npos);
}

TEST_F(TokenizerJsonErrors, InconsistentVocabularies) {
  EXPECT_NE(ErrorAfter("bpe-tiny", [](json& j) { j["model"]["vocab"].erase("the"); }).find("no token has id"),
            std::string::npos);
  EXPECT_NE(ErrorAfter("bpe-tiny",
                       [](json& j) {
                         j["model"]["merges"][0] = {"Ġ", "zzz"};
                       })
                .find("'zzz' is not a token"),
            std::string::npos);
  EXPECT_NE(ErrorAfter("bpe-tiny", [](json& j) { j["model"]["merges"][3] = 7; }).find("model.merges[3]"),
            std::string::npos);
  EXPECT_NE(
      ErrorAfter("bpe-tiny", [](json& j) { j["added_tokens"][0]["content"] = "!"; }).find("added_tokens[0]"),
      std::string::npos);
  EXPECT_NE(ErrorAfter("bpe-tiny", [](json& j) { j["added_tokens"][0]["lstrip"] = true; })
                .find("added_tokens[0].lstrip"),
            std::string::npos);
  EXPECT_NE(
      ErrorAfter("spm-tiny", [](json& j) { j["model"]["unk_token"] = "<nope>"; }).find("model.unk_token"),
      std::string::npos);
}

// Values of the wrong JSON type where the reader asked nlohmann for a string with value(): its type_error
// escaped the reader instead of an error naming the field (found by fuzz/tokenizer_json_fuzz.cpp's target on
// hand-made inputs while it was written; the campaign's seeds now include a TemplateProcessing
// post-processor).
TEST_F(TokenizerJsonErrors, WrongJsonTypesNameTheField) {
  const auto expect = [&](const char* fixture, const std::function<void(json&)>& edit,
                          const std::string& needle) {
    const std::string message = ErrorAfter(fixture, edit);
    EXPECT_NE(message.find(needle), std::string::npos) << message;
  };
  expect(
      "bpe-tiny-gpt2", [](json& j) { j["model"]["type"] = 5; }, "model.type: expected a string, got 5");
  expect(
      "bpe-tiny-gpt2", [](json& j) { j["decoder"] = "ByteLevel"; },
      "decoder: \"ByteLevel\" is not supported");
  expect(
      "bpe-tiny-gpt2",
      [](json& j) {
        j["decoder"] = {{"type", 5}};
      },
      "decoder: {\"type\":5} is not supported");
  expect(
      "bpe-tiny-gpt2",
      [](json& j) {
        j["post_processor"] = {{"type", "TemplateProcessing"}, {"single", {{{"SpecialToken", "x"}}}}};
      },
      "post_processor.single[].SpecialToken: expected an object, got \"x\"");
  expect(
      "bpe-tiny-gpt2",
      [](json& j) {
        j["post_processor"] = {{"type", "TemplateProcessing"}, {"single", {{{"SpecialToken", {{"id", 1}}}}}}};
      },
      "post_processor.single[].SpecialToken.id: expected a string");
  expect(
      "spm-tiny-metaspace", [](json& j) { j["pre_tokenizer"]["prepend_scheme"] = 5; },
      "pre_tokenizer.prepend_scheme: expected a string, got 5");
  expect(
      "spm-tiny", [](json& j) { j["normalizer"]["normalizers"][1]["pattern"]["String"] = 5; },
      "normalizer.normalizers[1].pattern.String: expected a string, got 5");
  // A post-processor that is not TemplateProcessing (or not an object) adds no BOS or EOS, as before.
  Write([] {
    json j = ReadJsonFile(TokenizerFixture("bpe-tiny-gpt2/tokenizer.json"));
    j["post_processor"] = "x";
    return j.dump();
  }());
  EXPECT_FALSE(Tokenizer::FromTokenizerJson(Path()).add_bos());
}

TEST_F(TokenizerJsonErrors, FromTextIsTheFileWithoutItsConfig) {
  std::ifstream in(TokenizerFixture("bpe-tiny-gpt2/tokenizer.json"), std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Write(text);
  const Tokenizer from_file = Tokenizer::FromTokenizerJson(Path());
  const Tokenizer from_text = Tokenizer::FromTokenizerJsonText(text, "named.json");
  EXPECT_EQ(from_text.Encode("Hello, world 123", true, true),
            from_file.Encode("Hello, world 123", true, true));
  EXPECT_EQ(from_text.vocab_size(), from_file.vocab_size());
  const std::string message =
      ErrorOf([&] { Tokenizer::FromTokenizerJsonText("{\"model\": 1e400}", "t.json"); });
  EXPECT_EQ(message.rfind("t.json: invalid JSON", 0), 0u) << message;
}

TEST_F(TokenizerJsonErrors, UnreadableFiles) {
  Write("{\"model\": [1, 2");
  const std::string message = ErrorOf([&] { Tokenizer::FromTokenizerJson(Path()); });
  EXPECT_NE(message.find("invalid JSON at byte"), std::string::npos) << message;
  // A number beyond double's range: nlohmann's out_of_range.406, which escaped the reader (the gap
  // fuzz/safetensors_fuzz.cpp found in the safetensors reader).
  Write("{\"model\": {\"dropout\": 1e400}}");
  const std::string overflow = ErrorOf([&] { Tokenizer::FromTokenizerJson(Path()); });
  EXPECT_NE(overflow.find(Path() + ": invalid JSON"), std::string::npos) << overflow;
  EXPECT_NE(overflow.find("number overflow"), std::string::npos) << overflow;
  const std::string missing = (dir_ / "absent.json").string();
  EXPECT_NE(ErrorOf([&] { Tokenizer::FromTokenizerJson(missing); }).find(missing + ": cannot open"),
            std::string::npos);
  // A config that names a token the vocabulary lacks.
  json root = ReadJsonFile(TokenizerFixture("bpe-tiny/tokenizer.json"));
  Write(root.dump());
  std::ofstream(dir_ / "tokenizer_config.json") << R"({"bos_token": "<nope>"})";
  EXPECT_NE(ErrorOf([&] { Tokenizer::FromTokenizerJson(Path()); }).find("tokenizer_config.json: bos_token"),
            std::string::npos);
}

}  // namespace
}  // namespace plumb
