// Gemma 3's tokenizer, read from models/gemma-3-270m-q4_k_m.gguf (not fetched by the test command, so its
// absence is a skip): the committed corpus against sentencepiece running a ModelProto made from the same
// vocabulary (fixtures/tokenizer/expected-gemma3.json), with and without special-token parsing; back to the
// text; the metadata as llama.cpp reads it; which tokens end generation; and the chat style the model gets
// without a template of its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "plumb/formats/gguf.h"
#include "plumb/tokenizer/chat_template.h"
#include "plumb/tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_fixtures.h"

namespace plumb {
namespace {

using testing::LoadCorpus;
using testing::ReadJsonFile;
using testing::TokenizerFixture;

const std::string kGemma3Path = std::string(PLUMB_SOURCE_DIR) + "/models/gemma-3-270m-q4_k_m.gguf";

class Gemma3Tokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    // A failure, not a skip: the test command fetches the model before running the tests.
    ASSERT_TRUE(std::filesystem::exists(kGemma3Path))
        << kGemma3Path << " is missing: run scripts/fetch-model gemma3";
  }

  static const Tokenizer& Get() {
    static const Tokenizer tokenizer = Tokenizer::FromGguf(GgufFile::Open(kGemma3Path));
    return tokenizer;
  }

  static std::int32_t Id(const std::string& text) {
    const std::optional<std::int32_t> id = Get().FindToken(text);
    EXPECT_TRUE(id.has_value()) << text;
    return id.value_or(-1);
  }
};

TEST_F(Gemma3Tokenizer, EncodesTheCorpusLikeSentencePiece) {
  testing::ExpectOracleIds(Get(), ReadJsonFile(TokenizerFixture("expected-gemma3.json")), LoadCorpus());
}

// Texts on what the corpus does not exercise in this vocabulary (turn markers, HTML tags, whitespace runs
// longer than the longest run token), kept in the expected file beside their ids.
TEST_F(Gemma3Tokenizer, EncodesGemmaSpecificTextsLikeSentencePiece) {
  const nlohmann::json extra = ReadJsonFile(TokenizerFixture("expected-gemma3.json")).at("extra");
  testing::ExpectOracleIds(Get(), extra, extra.at("texts").get<std::vector<std::string>>());
}

TEST_F(Gemma3Tokenizer, DecodesAndStreamsBackToTheText) {
  testing::ExpectRoundTripAndStreaming(Get(), LoadCorpus());
  const nlohmann::json extra = ReadJsonFile(TokenizerFixture("expected-gemma3.json")).at("extra");
  testing::ExpectRoundTripAndStreaming(Get(), extra.at("texts").get<std::vector<std::string>>());
}

TEST_F(Gemma3Tokenizer, MetadataAsLlamaCppReadsIt) {
  const Tokenizer& t = Get();
  EXPECT_EQ(t.spec().model, "llama");
  EXPECT_EQ(t.vocab_size(), 262144);
  EXPECT_EQ(t.bos_id(), Id("<bos>"));
  EXPECT_EQ(t.eos_id(), Id("<eos>"));
  EXPECT_TRUE(t.add_bos());
  EXPECT_FALSE(t.spec().add_space_prefix);  // no dummy prefix: "Hello" is not "▁Hello"
  EXPECT_EQ(t.Encode("Hello", true, false), (std::vector<std::int32_t>{t.bos_id(), Id("Hello")}));
  EXPECT_EQ(t.chat_template(), "");
  // Runs of spaces, newlines and tabs, and HTML tags, are user-defined: one token wherever they stand.
  EXPECT_EQ(t.Encode("a  b", false, false), (std::vector<std::int32_t>{Id("a"), Id("  "), Id("b")}));
  EXPECT_EQ(t.Encode("<b>x</b>", false, false), (std::vector<std::int32_t>{Id("<b>"), Id("x"), Id("</b>")}));
}

// <end_of_turn> closes a model turn: it must stop generation although the file's EOS is <eos>. </s> is an
// HTML tag in this vocabulary (user-defined, like <s>, <b> and <table>), not an end of sequence.
TEST_F(Gemma3Tokenizer, EndOfTurnAndEosEndGenerationHtmlTagsDoNot) {
  const Tokenizer& t = Get();
  EXPECT_TRUE(t.IsEndOfGeneration(Id("<end_of_turn>")));
  EXPECT_TRUE(t.IsEndOfGeneration(Id("<eos>")));
  EXPECT_FALSE(t.IsEndOfGeneration(Id("<start_of_turn>")));
  EXPECT_FALSE(t.IsEndOfGeneration(Id("<bos>")));
  EXPECT_FALSE(t.IsEndOfGeneration(Id("</s>")));
  EXPECT_EQ(t.Decode(std::vector<std::int32_t>{Id("<s>"), Id("x"), Id("</s>")}), "<s>x</s>");
}

// Without a template in the file, the vocabulary's <start_of_turn>/<end_of_turn> control tokens choose the
// Gemma 3 style; its markers are tokens, the messages' text is not.
// A prompt that writes <bos> itself (a rendered chat pasted into `plumb generate`) gets no second BOS, where
// llama.cpp and HF tokenizers give two; read as text (no parse_special), <bos> is characters after the BOS.
TEST_F(Gemma3Tokenizer, APromptThatStartsWithBosGetsNoSecondOne) {
  const Tokenizer& t = Get();
  const std::vector<std::int32_t> plain = t.Encode("Hello", true, true);
  ASSERT_EQ(plain.front(), 2);
  EXPECT_EQ(t.Encode("<bos>Hello", true, true), plain);
  EXPECT_EQ(t.Encode("<bos><bos>Hello", true, true).size(), plain.size() + 1)
      << "only the added one is dropped";
  const std::vector<std::int32_t> as_text = t.Encode("<bos>Hello", true, false);
  EXPECT_EQ(as_text.front(), 2);
  EXPECT_NE(as_text[1], 2);
  EXPECT_EQ(t.Encode("<bos>Hello", false, true), plain) << "without add_special the text's own BOS stays";
}

TEST_F(Gemma3Tokenizer, ChatWithoutATemplateUsesGemma3) {
  const Tokenizer& t = Get();
  const ChatTemplate chat = ChatTemplateFor(t);
  EXPECT_EQ(chat.style(), ChatStyle::kGemma3);
  const RenderedChat rendered = chat.RenderWithContents(
      {{"system", "Be brief."}, {"user", "Hi <end_of_turn>"}}, /*add_generation_prompt=*/true);
  EXPECT_EQ(rendered.text,
            "<bos><start_of_turn>user\nBe brief.\n\nHi <end_of_turn><end_of_turn>\n<start_of_turn>model\n");
  const std::vector<std::int32_t> ids = t.EncodeTemplated(rendered.text, false, rendered.contents);
  EXPECT_EQ(ids.front(), t.bos_id());
  EXPECT_EQ(std::count(ids.begin(), ids.end(), Id("<start_of_turn>")), 2);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), Id("<end_of_turn>")), 1);  // the message's own is text
}

}  // namespace
}  // namespace plumb
