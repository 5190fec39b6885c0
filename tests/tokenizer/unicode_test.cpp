// UTF-8 handling and the pre-tokenizer regexes, against Python (errors="replace") and HF tokenizers' own
// pre-tokenizers (piece lengths in fixtures/tokenizer/expected-<pre>.json).
#include "plumb/tokenizer/unicode.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "plumb/tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer_fixtures.h"

namespace plumb {
namespace {

using testing::LoadCorpus;
using testing::Printable;
using testing::ReadJsonFile;
using testing::TokenizerFixture;

TEST(Utf8, LossyDecodingMatchesPython) {
  const std::vector<std::string> corpus = LoadCorpus();
  const nlohmann::json replaced = ReadJsonFile(TokenizerFixture("expected-utf8.json")).at("replaced");
  ASSERT_EQ(replaced.size(), corpus.size());
  int invalid_entries = 0;
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    if (replaced[i].is_null()) {
      EXPECT_EQ(unicode::ToValidUtf8(corpus[i]), corpus[i]) << "valid text must pass unchanged, entry " << i;
    } else {
      ++invalid_entries;
      EXPECT_NE(corpus[i], replaced[i].get<std::string>()) << "entry " << i << " should be invalid UTF-8";
      EXPECT_EQ(unicode::ToValidUtf8(corpus[i]), replaced[i].get<std::string>()) << "entry " << i;
    }
  }
  EXPECT_GE(invalid_entries, 10);
}

// Fed in every split into two chunks, the incremental decoder gives the same text as the one-shot one.
TEST(Utf8, IncrementalDecodingEqualsOneShot) {
  for (const std::string& text : LoadCorpus()) {
    for (std::size_t cut = 0; cut <= text.size(); ++cut) {
      std::string out;
      std::string pending(text.substr(0, cut));
      pending.erase(0, unicode::AppendLossy(pending, /*final=*/false, out));
      const std::string first_chunk = out;
      EXPECT_EQ(unicode::ToValidUtf8(first_chunk), first_chunk) << "emitted part of a character";
      EXPECT_LT(pending.size(), 4u);
      pending += text.substr(cut);
      unicode::AppendLossy(pending, /*final=*/true, out);
      EXPECT_EQ(out, unicode::ToValidUtf8(text)) << Printable(text) << " cut at " << cut;
    }
  }
}

TEST(Utf8, EncodeDecodeEveryScalarValue) {
  for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string s;
    unicode::AppendUtf8(cp, s);
    ASSERT_EQ(unicode::WellFormedLength(s), s.size()) << static_cast<std::uint32_t>(cp);
    const auto decoded = unicode::DecodeUtf8(s);
    ASSERT_EQ(decoded.size(), 1u);
    ASSERT_EQ(static_cast<std::uint32_t>(decoded[0].value), static_cast<std::uint32_t>(cp));
  }
}

TEST(Utf8, SurrogatesAndOverlongFormsAreIllFormed) {
  for (const std::string s :
       {"\xED\xA0\x80", "\xC0\xAF", "\xE0\x80\xAF", "\xF4\x90\x80\x80", "\xF8\x88\x80\x80"}) {
    EXPECT_EQ(unicode::WellFormedLength(s), 0u) << Printable(s);
  }
}

TEST(ByteLevel, AlphabetIsABijectionOntoPrintableCodePoints) {
  std::set<char32_t> seen;
  for (int b = 0; b < 256; ++b) {
    const char32_t cp = unicode::ByteToUnicode(static_cast<std::uint8_t>(b));
    EXPECT_TRUE(seen.insert(cp).second) << b;
    EXPECT_EQ(unicode::UnicodeToByte(cp), b);
    EXPECT_NE(unicode::ClassOf(cp), unicode::CodePointClass::kSpace)
        << "byte " << b << " maps to white space";
  }
  EXPECT_EQ(unicode::UnicodeToByte(0x144), -1);
  EXPECT_EQ(unicode::UnicodeToByte(0x20), -1);  // space is not printable: it maps elsewhere
}

// The pieces of every corpus entry are exactly those HF's pre-tokenizer produces.
class PreTokenizerOracle : public ::testing::TestWithParam<std::pair<const char*, PreTokenizer>> {};

TEST_P(PreTokenizerOracle, PieceLengthsMatchTokenizers) {
  const auto [name, kind] = GetParam();
  const std::vector<std::string> corpus = LoadCorpus();
  const auto expected = ReadJsonFile(TokenizerFixture(std::string("expected-") + name + ".json"))
                            .at("piece_lengths")
                            .get<std::vector<std::vector<std::size_t>>>();
  ASSERT_EQ(expected.size(), corpus.size());
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    const std::string text = unicode::ToValidUtf8(corpus[i]);
    std::vector<std::size_t> lengths;
    std::size_t covered = 0;
    for (std::string_view piece : PreTokenize(kind, text)) {
      EXPECT_EQ(piece.data(), text.data() + covered) << "pieces must be consecutive";
      lengths.push_back(piece.size());
      covered += piece.size();
    }
    EXPECT_EQ(lengths, expected[i]) << name << " entry " << i << ": " << Printable(text);
  }
}

INSTANTIATE_TEST_SUITE_P(All, PreTokenizerOracle,
                         ::testing::Values(std::pair{"smollm", PreTokenizer::kSmolLm},
                                           std::pair{"llama-bpe", PreTokenizer::kLlama3},
                                           std::pair{"qwen2", PreTokenizer::kQwen2},
                                           std::pair{"gpt2", PreTokenizer::kGpt2}),
                         [](const auto& param_info) {
                           std::string name = param_info.param.first;
                           std::erase(name, '-');
                           return name;
                         });

}  // namespace
}  // namespace plumb
