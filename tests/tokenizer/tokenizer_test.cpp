// Tokenizer behaviour that needs no model file: spec validation, special tokens, BOS/EOS, the space prefix,
// streaming, and the BPE merge loop against its definition (a naive quadratic merge) on the small trained
// BPE.
#include "plumb/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "plumb/tokenizer/pre_tokenizer.h"
#include "plumb/tokenizer/unicode.h"
#include "tokenizer/tokenizer_fixtures.h"

namespace plumb {
namespace {

using testing::ErrorOf;
using testing::LoadCorpus;
using testing::ReadFile;
using testing::TokenizerFixture;

std::string ByteSymbol(int b) {
  std::string s;
  unicode::AppendUtf8(unicode::ByteToUnicode(static_cast<std::uint8_t>(b)), s);
  return s;
}

// A byte-level spec: the 256 byte symbols, "ab" and "abc" by merges, two control tokens, one user-defined.
TokenizerSpec ByteLevelSpec() {
  TokenizerSpec spec;
  spec.model = "gpt2";
  spec.pre = "gpt2";
  for (int b = 0; b < 256; ++b) spec.tokens.push_back(ByteSymbol(b));
  spec.token_types.assign(256, kTokenNormal);
  for (auto [text, type] : {std::pair{"ab", kTokenNormal}, std::pair{"abc", kTokenNormal},
                            std::pair{"<|x|>", kTokenControl}, std::pair{"<|x|>y", kTokenControl},
                            std::pair{"<tool>", kTokenUserDefined}, std::pair{"<|im_end|>", kTokenControl}}) {
    spec.tokens.push_back(text);
    spec.token_types.push_back(type);
  }
  spec.merges = {"a b", "ab c"};
  spec.bos_id = 258;
  spec.eos_id = 259;
  return spec;
}

std::int32_t Id(const Tokenizer& t, const std::string& text) {
  const auto id = t.FindToken(text);
  EXPECT_TRUE(id.has_value()) << text;
  return id.value_or(-1);
}

// A SentencePiece-style spec: <unk> <s> </s>, the 256 byte tokens, and a few pieces with scores.
TokenizerSpec LlamaSpec() {
  TokenizerSpec spec;
  spec.model = "llama";
  spec.tokens = {"<unk>", "<s>", "</s>"};
  spec.token_types = {kTokenUnknown, kTokenControl, kTokenControl};
  char name[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    spec.tokens.push_back(name);
    spec.token_types.push_back(kTokenByte);
  }
  for (const char* piece : {"\xE2\x96\x81", "a", "b",
                            "\xE2\x96\x81"
                            "a",
                            "ab",
                            "\xE2\x96\x81"
                            "ab"}) {
    spec.tokens.push_back(piece);
    spec.token_types.push_back(kTokenNormal);
  }
  spec.scores.assign(spec.tokens.size(), 0.0f);
  for (std::size_t i = 259; i < spec.tokens.size(); ++i) spec.scores[i] = -static_cast<float>(i);
  spec.bos_id = 1;
  spec.eos_id = 2;
  spec.unk_id = 0;
  spec.add_bos = true;
  spec.add_space_prefix = true;
  return spec;
}

template <typename Mutate>
std::string SpecError(TokenizerSpec spec, Mutate mutate) {
  mutate(spec);
  return ErrorOf([&] { Tokenizer tokenizer(spec); });
}

TEST(TokenizerSpec, ValidSpecsBuild) {
  EXPECT_NO_THROW(Tokenizer{ByteLevelSpec()});
  EXPECT_NO_THROW(Tokenizer{LlamaSpec()});
}

TEST(TokenizerSpec, MalformedSpecsAreNamedErrors) {
  using S = TokenizerSpec&;
  EXPECT_NE(SpecError(ByteLevelSpec(), [](S s) { s.model = "unigram"; }).find("'unigram'"),
            std::string::npos);
  EXPECT_NE(SpecError(ByteLevelSpec(), [](S s) { s.pre = "falcon"; }).find("'falcon'"), std::string::npos);
  EXPECT_NE(SpecError(ByteLevelSpec(), [](S s) { s.tokens.clear(), s.token_types.clear(), s.merges.clear(); })
                .find("empty"),
            std::string::npos);
  EXPECT_NE(SpecError(ByteLevelSpec(), [](S s) { s.tokens[257] = "ab"; })
                .find("duplicate token 'ab' (ids 256 and 257)"),
            std::string::npos);
  EXPECT_NE(SpecError(ByteLevelSpec(), [](S s) { s.merges.push_back("abc"); }).find("merge 2 ('abc')"),
            std::string::npos);
  EXPECT_NE(
      SpecError(ByteLevelSpec(), [](S s) { s.merges.push_back("q zz"); }).find("merge 2 ('q zz'): 'zz'"),
      std::string::npos);
  EXPECT_NE(SpecError(ByteLevelSpec(), [](S s) { s.merges.push_back("b c"); }).find("'bc' is not a token"),
            std::string::npos);
  EXPECT_NE(SpecError(ByteLevelSpec(), [](S s) { s.merges.clear(); }).find("needs merges"),
            std::string::npos);
  EXPECT_NE(
      SpecError(ByteLevelSpec(), [](S s) { s.bos_id = 100000; }).find("bos_id = 100000 is out of range"),
      std::string::npos);
  EXPECT_NE(SpecError(ByteLevelSpec(), [](S s) { s.eot_id = -7; }).find("eot_id = -7"), std::string::npos);
  EXPECT_NE(SpecError(ByteLevelSpec(), [](S s) { s.add_eos = true, s.eos_id = -1; }).find("add_eos"),
            std::string::npos);
  EXPECT_NE(SpecError(ByteLevelSpec(), [](S s) { s.token_types[5] = 9; }).find("token 5"), std::string::npos);
  EXPECT_NE(SpecError(ByteLevelSpec(), [](S s) { s.token_types.pop_back(); }).find("token types for"),
            std::string::npos);
  EXPECT_NE(SpecError(LlamaSpec(), [](S s) { s.scores.pop_back(); }).find("scores for"), std::string::npos);
  EXPECT_NE(SpecError(LlamaSpec(), [](S s) { s.scores[3] = std::nanf(""); }).find("NaN"), std::string::npos);
  EXPECT_NE(SpecError(LlamaSpec(), [](S s) { s.scores.clear(); }).find("needs token scores"),
            std::string::npos);
  EXPECT_NE(SpecError(LlamaSpec(), [](S s) { s.tokens[3] = "<0xZZ>"; }).find("byte token 3 is '<0xZZ>'"),
            std::string::npos);
  EXPECT_NE(
      SpecError(LlamaSpec(), [](S s) { s.unk_id = -1, s.token_types[3] = kTokenNormal; }).find("byte tokens"),
      std::string::npos);
}

TEST(Tokenizer, TokenToPieceRejectsIdsOutOfRange) {
  const Tokenizer t(ByteLevelSpec());
  EXPECT_NE(ErrorOf([&] { t.TokenToPiece(t.vocab_size()); }).find("out of range"), std::string::npos);
  EXPECT_NE(ErrorOf([&] { t.TokenToPiece(-1); }).find("out of range"), std::string::npos);
  EXPECT_NE(ErrorOf([&] { StreamingDecoder(t).Push(1 << 30); }).find("out of range"), std::string::npos);
}

TEST(Tokenizer, SpecialTokensLeftmostLongestAndOnlyWhenAsked) {
  const Tokenizer t(ByteLevelSpec());
  const std::int32_t x = Id(t, "<|x|>"), xy = Id(t, "<|x|>y"), tool = Id(t, "<tool>");
  // Longest at a position wins; the text between special tokens is tokenized normally.
  EXPECT_EQ(t.Encode("<|x|>y<|x|>z", false, true), (std::vector<std::int32_t>{xy, x, Id(t, "z")}));
  // Not parsed: the control texts are text, but a user-defined token still is itself.
  const auto plain = t.Encode("<|x|><tool>", false, false);
  EXPECT_EQ(plain.back(), tool);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), x), 0);
  EXPECT_EQ(t.Decode(plain), "<|x|><tool>");
  // Control tokens decode to nothing.
  EXPECT_EQ(t.Decode(t.Encode("ab<|x|>c", false, true)), "abc");
}

TEST(Tokenizer, PlainRangesKeepControlTokensOutOfAMessage) {
  // "<|x|>a<|x|>b<|x|>" with bytes 5..12 ("a<|x|>b") a message's content: the control text inside it is
  // text, the template's two around it are tokens; a user-defined token is itself anywhere.
  const Tokenizer t(ByteLevelSpec());
  const std::int32_t x = Id(t, "<|x|>"), tool = Id(t, "<tool>");
  const std::string text = "<|x|>a<|x|>b<|x|>";
  const std::pair<std::size_t, std::size_t> content[] = {{5, 12}};
  const std::vector<std::int32_t> ids = t.EncodeTemplated(text, false, content);
  EXPECT_EQ(ids.front(), x);
  EXPECT_EQ(ids.back(), x);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), x), 2);
  EXPECT_EQ(t.Decode(ids), "a<|x|>b");
  // A special text that only starts before a range but reaches into it is not a token either.
  const std::pair<std::size_t, std::size_t> tail[] = {{3, 5}};
  const std::vector<std::int32_t> reaching = t.EncodeTemplated("<|x|>", false, tail);
  EXPECT_EQ(std::count(reaching.begin(), reaching.end(), x), 0);
  // Without ranges it is Encode with parse_special; user-defined tokens stay tokens inside a range.
  EXPECT_EQ(t.EncodeTemplated(text, false, {}), t.Encode(text, false, true));
  const std::pair<std::size_t, std::size_t> all[] = {{0, 6}};
  EXPECT_EQ(t.EncodeTemplated("<tool>", false, all), (std::vector<std::int32_t>{tool}));
  // Ranges must be sorted, disjoint and inside the text, and the text valid UTF-8 (its offsets are bytes).
  const std::pair<std::size_t, std::size_t> unsorted[] = {{4, 6}, {1, 2}};
  EXPECT_NE(ErrorOf([&] { t.EncodeTemplated(text, false, unsorted); }).find("plain range 1"),
            std::string::npos);
  const std::pair<std::size_t, std::size_t> beyond[] = {{0, 99}};
  EXPECT_NE(ErrorOf([&] { t.EncodeTemplated(text, false, beyond); }).find("within the text"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] {
              t.EncodeTemplated(
                  "a\xff"
                  "b",
                  false, content);
            }).find("valid UTF-8"),
            std::string::npos);
}

TEST(Tokenizer, BosAndEosOnlyWithAddSpecial) {
  TokenizerSpec spec = ByteLevelSpec();
  spec.add_bos = spec.add_eos = true;
  const Tokenizer t(spec);
  const auto with = t.Encode("abc", true, false);
  const auto without = t.Encode("abc", false, false);
  ASSERT_EQ(with.size(), without.size() + 2);
  EXPECT_EQ(with.front(), spec.bos_id);
  EXPECT_EQ(with.back(), spec.eos_id);
  EXPECT_EQ(std::vector<std::int32_t>(with.begin() + 1, with.end() - 1), without);
  EXPECT_EQ(t.Encode("", true, false), (std::vector<std::int32_t>{spec.bos_id, spec.eos_id}));
  EXPECT_TRUE(t.Encode("", false, false).empty());
}

TEST(Tokenizer, EndOfGeneration) {
  TokenizerSpec spec = ByteLevelSpec();
  spec.eot_id = Tokenizer(spec).FindToken("<tool>").value();
  const Tokenizer t(spec);
  EXPECT_TRUE(t.IsEndOfGeneration(t.eos_id()));
  EXPECT_TRUE(t.IsEndOfGeneration(spec.eot_id));
  EXPECT_TRUE(t.IsEndOfGeneration(Id(t, "<|im_end|>")));  // by its text, as llama.cpp does
  EXPECT_FALSE(t.IsEndOfGeneration(t.bos_id()));
  EXPECT_FALSE(t.IsEndOfGeneration(Id(t, "abc")));
  EXPECT_FALSE(t.IsEndOfGeneration(-1));
  EXPECT_FALSE(t.IsEndOfGeneration(t.vocab_size()));
}

// An end-of-generation text that is a user-defined token is text (Gemma 3's </s> closes an HTML <s>).
TEST(Tokenizer, EndOfGenerationTextsThatAreUserDefinedAreText) {
  TokenizerSpec spec = ByteLevelSpec();
  spec.tokens.push_back("</s>");
  spec.token_types.push_back(kTokenUserDefined);
  spec.tokens.push_back("<end_of_turn>");
  spec.token_types.push_back(kTokenControl);
  const Tokenizer t(spec);
  EXPECT_FALSE(t.IsEndOfGeneration(Id(t, "</s>")));
  EXPECT_TRUE(t.IsEndOfGeneration(Id(t, "<end_of_turn>")));
  spec.token_types[spec.tokens.size() - 2] = kTokenControl;
  EXPECT_TRUE(Tokenizer(spec).IsEndOfGeneration(Id(t, "</s>")));
}

TEST(Tokenizer, SpacePrefixRules) {
  const std::string s = "\xE2\x96\x81";  // U+2581
  TokenizerSpec spec = LlamaSpec();
  const Tokenizer every(spec);
  const std::int32_t bos = every.bos_id(), sa = Id(every, s + "a"), a = Id(every, "a"), sp = Id(every, s);
  EXPECT_EQ(every.Encode("a", true, false), (std::vector<std::int32_t>{bos, sa}));
  EXPECT_EQ(every.Encode("a<s>a", false, true), (std::vector<std::int32_t>{sa, bos, sa}));
  EXPECT_EQ(every.Encode(" a", false, false), (std::vector<std::int32_t>{sp, sa}));
  EXPECT_EQ(every.Decode(every.Encode(" a", true, false)), " a");
  spec.space_prefix_first_only = true;
  const Tokenizer first(spec);
  EXPECT_EQ(first.Encode("a<s>a", false, true), (std::vector<std::int32_t>{sa, bos, a}));
  EXPECT_EQ(first.Encode("<s>a", false, true), (std::vector<std::int32_t>{bos, a}));
  spec.space_prefix_unless_space = true;
  const Tokenizer unless(spec);
  EXPECT_EQ(unless.Encode(" a", false, false), (std::vector<std::int32_t>{sa}));
  spec.add_space_prefix = false;
  const Tokenizer none(spec);
  EXPECT_EQ(none.Encode("a", false, false), (std::vector<std::int32_t>{a}));
}

TEST(Tokenizer, ByteFallbackAndScoreOrder) {
  const Tokenizer t(LlamaSpec());
  // "ab" outscores nothing else here: ▁ab is the highest-scored piece covering the text... and unknown
  // characters fall back to their UTF-8 bytes.
  const std::string euro = "\xE2\x82\xAC";
  const auto ids = t.Encode(euro, false, false);
  std::vector<std::int32_t> expected = {Id(t, "\xE2\x96\x81")};
  for (const char* byte : {"<0xE2>", "<0x82>", "<0xAC>"}) expected.push_back(Id(t, byte));
  EXPECT_EQ(ids, expected);
  EXPECT_EQ(t.Decode(ids), euro);
}

TEST(StreamingDecoder, HoldsBytesUntilTheCharacterIsComplete) {
  const Tokenizer t(LlamaSpec());
  StreamingDecoder stream(t);
  EXPECT_EQ(stream.Push(Id(t, "<0xF0>")), "");
  EXPECT_EQ(stream.Push(Id(t, "<0x9F>")), "");
  EXPECT_EQ(stream.Push(Id(t, "<0x98>")), "");
  EXPECT_EQ(stream.Push(Id(t, "<0x80>")), "\xF0\x9F\x98\x80");
  EXPECT_EQ(stream.Flush(), "");
}

TEST(StreamingDecoder, IllFormedBytesBecomeReplacementCharacters) {
  const Tokenizer t(LlamaSpec());
  const std::string replacement = "\xEF\xBF\xBD";
  std::vector<std::int32_t> ids = {Id(t, "<0xFF>"), Id(t, "a"), Id(t, "<0xE2>"), Id(t, "<0x82>")};
  StreamingDecoder stream(t);
  EXPECT_EQ(stream.Push(ids[0]), replacement);  // can never start a character: emitted at once
  EXPECT_EQ(stream.Push(ids[1]), "a");
  EXPECT_EQ(stream.Push(ids[2]), "");
  EXPECT_EQ(stream.Push(ids[3]), "");
  EXPECT_EQ(stream.Flush(), replacement);  // an incomplete character at the end: one U+FFFD
  EXPECT_EQ(t.Decode(ids), replacement + "a" + replacement);
  // A lead byte followed by something that cannot continue it: U+FFFD for the lead, the rest as it is.
  StreamingDecoder again(t);
  EXPECT_EQ(again.Push(Id(t, "<0xE2>")), "");
  EXPECT_EQ(again.Push(Id(t, "a")), replacement + "a");
}

// ---------------------------------------------------------------------------------------------------------
// The merge loop against the definition of BPE: repeatedly merge the adjacent pair with the lowest rank,
// the leftmost among equal ranks, until no adjacent pair has a rank.

std::vector<std::int32_t> NaiveByteLevelEncode(const Tokenizer& t, const std::string& text) {
  const TokenizerSpec& spec = t.spec();
  std::map<std::pair<std::string, std::string>, int> ranks;
  for (std::size_t r = 0; r < spec.merges.size(); ++r) {
    const std::size_t space = spec.merges[r].find(' ', 1);
    ranks.emplace(std::pair{spec.merges[r].substr(0, space), spec.merges[r].substr(space + 1)},
                  static_cast<int>(r));
  }
  const PreTokenizer kind = spec.pre == "smollm"      ? PreTokenizer::kSmolLm
                            : spec.pre == "llama-bpe" ? PreTokenizer::kLlama3
                            : spec.pre == "qwen2"     ? PreTokenizer::kQwen2
                                                      : PreTokenizer::kGpt2;
  std::vector<std::int32_t> ids;
  const std::string valid = unicode::ToValidUtf8(text);
  for (std::string_view piece : PreTokenize(kind, valid)) {
    std::vector<std::string> symbols;
    for (char c : piece) symbols.push_back(ByteSymbol(static_cast<std::uint8_t>(c)));
    std::string whole;
    for (const auto& s : symbols) whole += s;
    if (spec.ignore_merges && t.FindToken(whole)) {
      ids.push_back(*t.FindToken(whole));
      continue;
    }
    for (;;) {
      int best = -1, best_rank = INT_MAX;
      for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
        auto it = ranks.find({symbols[i], symbols[i + 1]});
        if (it != ranks.end() && it->second < best_rank) best = static_cast<int>(i), best_rank = it->second;
      }
      if (best < 0) break;
      symbols[best] += symbols[best + 1];
      symbols.erase(symbols.begin() + best + 1);
    }
    for (const auto& s : symbols) ids.push_back(Id(t, s));
  }
  return ids;
}

// Random stretches of English and of the corpus, cut at random byte positions (so also mid-character).
std::vector<std::string> RandomTexts() {
  std::string pool = ReadFile(TokenizerFixture("gpl-3.txt"));
  for (const std::string& entry : LoadCorpus()) pool += entry;
  std::mt19937 rng(20240131);
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i) {
    const std::size_t length = 1 + rng() % 300;
    const std::size_t start = rng() % (pool.size() - length);
    std::string text = pool.substr(start, length);
    if (text.find('<') == std::string::npos) texts.push_back(text);  // no special-token texts
  }
  return texts;
}

TEST(BytePairEncoding, MatchesTheNaiveDefinition) {
  for (const char* dir : {"bpe-tiny", "bpe-tiny-digits", "bpe-tiny-gpt2"}) {
    for (bool ignore_merges : {false, true}) {
      TokenizerSpec spec =
          Tokenizer::FromTokenizerJson(TokenizerFixture(std::string(dir) + "/tokenizer.json")).spec();
      spec.ignore_merges = ignore_merges;
      const Tokenizer t(spec);
      for (const std::string& text : RandomTexts()) {
        ASSERT_EQ(t.Encode(text, false, false), NaiveByteLevelEncode(t, text))
            << dir << " ignore_merges=" << ignore_merges << ": " << testing::Printable(text);
      }
    }
  }
}

}  // namespace
}  // namespace plumb
