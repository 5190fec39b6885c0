// Tokenizers read from GGUF: SmolLM2's vocabulary (models/, fetched by the test command) under the four
// byte-level pre-tokenizers against HF tokenizers, spm-tiny.gguf against sentencepiece, the SentencePiece
// merge loop against its definition, and one malformed-metadata case per check of TokenizerSpecFromGguf.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "plumb/formats/gguf.h"
#include "plumb/tokenizer/tokenizer.h"
#include "plumb/tokenizer/unicode.h"
#include "support/gguf_builder.h"
#include "tokenizer/tokenizer_fixtures.h"

namespace plumb {
namespace {

using testing::ErrorOf;
using testing::LoadCorpus;
using testing::ReadFile;
using testing::ReadJsonFile;
using testing::TokenizerFixture;

const std::string kSmolLmPath = std::string(PLUMB_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

// The model is fetched by the test command; its absence is a failure, never a skip.
#define ASSERT_SMOLLM_PRESENT()                                                                \
  ASSERT_TRUE(std::filesystem::exists(kSmolLmPath))                                            \
      << kSmolLmPath                                                                           \
      << " is missing: the tokenizer tests need the SmolLM2 vocabulary (scripts/test fetches " \
         "the model first)"

class SmolLmOracle : public ::testing::TestWithParam<const char*> {};

// The same vocabulary and merges under each pre-tokenizer, as the fixture script built them for HF.
Tokenizer SmolLmWith(const std::string& pre) {
  TokenizerSpec spec = TokenizerSpecFromGguf(GgufFile::Open(kSmolLmPath));
  spec.pre = pre;
  spec.ignore_merges = pre == "llama-bpe";  // as TokenizerSpecFromGguf sets it for a llama-bpe file
  return Tokenizer(std::move(spec));
}

TEST_P(SmolLmOracle, EncodesLikeTokenizers) {
  ASSERT_SMOLLM_PRESENT();
  const Tokenizer t = SmolLmWith(GetParam());
  testing::ExpectOracleIds(t, ReadJsonFile(TokenizerFixture(std::string("expected-") + GetParam() + ".json")),
                           LoadCorpus());
}

TEST_P(SmolLmOracle, DecodesAndStreamsBackToTheText) {
  ASSERT_SMOLLM_PRESENT();
  testing::ExpectRoundTripAndStreaming(SmolLmWith(GetParam()), LoadCorpus());
}

INSTANTIATE_TEST_SUITE_P(PreTokenizers, SmolLmOracle,
                         ::testing::Values("smollm", "llama-bpe", "qwen2", "gpt2"),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           std::erase(name, '-');
                           return name;
                         });

TEST(SmolLm, MetadataAsTheFileStatesIt) {
  ASSERT_SMOLLM_PRESENT();
  const GgufFile file = GgufFile::Open(kSmolLmPath);
  const Tokenizer t = Tokenizer::FromGguf(file);
  EXPECT_EQ(t.spec().model, file.GetString("tokenizer.ggml.model"));
  EXPECT_EQ(t.spec().pre, file.GetString("tokenizer.ggml.pre"));
  EXPECT_EQ(static_cast<std::size_t>(t.vocab_size()), file.GetStringArray("tokenizer.ggml.tokens").size());
  EXPECT_EQ(t.spec().merges.size(), file.GetStringArray("tokenizer.ggml.merges").size());
  EXPECT_EQ(static_cast<std::uint64_t>(t.bos_id()), file.GetUint("tokenizer.ggml.bos_token_id"));
  EXPECT_EQ(static_cast<std::uint64_t>(t.eos_id()), file.GetUint("tokenizer.ggml.eos_token_id"));
  EXPECT_EQ(t.add_bos(), file.GetBool("tokenizer.ggml.add_bos_token"));
  EXPECT_EQ(t.chat_template(), file.GetString("tokenizer.chat_template"));
  EXPECT_FALSE(t.spec().ignore_merges);
  // ChatML: <|im_end|> ends a turn; <|im_start|> does not.
  EXPECT_TRUE(t.IsEndOfGeneration(*t.FindToken("<|im_end|>")));
  EXPECT_TRUE(t.IsEndOfGeneration(*t.FindToken("<|endoftext|>")));
  EXPECT_FALSE(t.IsEndOfGeneration(*t.FindToken("<|im_start|>")));
  EXPECT_EQ(t.TokenToPiece(*t.FindToken("<|im_start|>")), "");  // control tokens decode to nothing
}

// ~35 KB of English (GPL-3): exactly the oracle's ids, and back. Its speed is measured in
// bench/tokenizer_bench.cpp, not here.
TEST(SmolLm, LongEnglishTextExact) {
  ASSERT_SMOLLM_PRESENT();
  const Tokenizer t = Tokenizer::FromGguf(GgufFile::Open(kSmolLmPath));
  const std::string text = ReadFile(TokenizerFixture("gpl-3.txt"));
  const std::vector<std::int32_t> ids = t.Encode(text, false, false);
  EXPECT_EQ(
      ids,
      ReadJsonFile(TokenizerFixture("expected-smollm.json")).at("gpl3").get<std::vector<std::int32_t>>());
  EXPECT_EQ(t.Decode(ids), text);
}

// ---------------------------------------------------------------------------------------------------------
// SentencePiece

Tokenizer SpmTiny() {
  return Tokenizer::FromGguf(GgufFile::Open(TokenizerFixture("spm-tiny.gguf")));
}

TEST(SpmTiny, EncodesLikeSentencePiece) {
  testing::ExpectOracleIds(SpmTiny(), ReadJsonFile(TokenizerFixture("expected-spm.json")), LoadCorpus());
}

TEST(SpmTiny, DecodesAndStreamsBackToTheText) {
  testing::ExpectRoundTripAndStreaming(SpmTiny(), LoadCorpus());
}

TEST(SpmTiny, LlamaDefaultsAndSpecialTokens) {
  const Tokenizer t = SpmTiny();
  EXPECT_EQ(t.spec().model, "llama");
  EXPECT_TRUE(t.add_bos());
  EXPECT_TRUE(t.spec().add_space_prefix);
  const auto ids = t.Encode("Hello", true, false);
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids.front(), t.bos_id());
  EXPECT_EQ(std::vector<std::int32_t>(ids.begin() + 1, ids.end()), t.Encode("Hello", false, false));
  // Parsed, "</s>" is the EOS token; as text it is not.
  const auto parsed = t.Encode("a</s>", false, true);
  EXPECT_EQ(parsed.back(), t.eos_id());
  const auto plain = t.Encode("a</s>", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), t.eos_id()), 0);
  EXPECT_TRUE(t.IsEndOfGeneration(t.eos_id()));
}

// The definition of SentencePiece BPE: repeatedly merge the adjacent pair whose concatenation is the
// highest-scored token, the leftmost among equal scores; what is left and is no token becomes bytes.
std::vector<std::int32_t> NaiveSpmEncode(const Tokenizer& t, const std::string& text) {
  const TokenizerSpec& spec = t.spec();
  auto normal = [&](const std::string& s) -> std::int32_t {
    const auto id = t.FindToken(s);
    return id && spec.token_types[*id] == kTokenNormal ? *id : -1;
  };
  std::string escaped(1, ' ');  // the space prefix
  escaped += unicode::ToValidUtf8(text);
  std::vector<std::string> symbols;
  for (const unicode::CodePoint& cp : unicode::DecodeUtf8(escaped)) {
    std::string s;
    unicode::AppendUtf8(cp.value == ' ' ? U'\u2581' : cp.value, s);
    symbols.push_back(s);
  }
  for (;;) {
    int best = -1;
    float best_score = 0;
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
      const std::int32_t id = normal(symbols[i] + symbols[i + 1]);
      if (id >= 0 && (best < 0 || spec.scores[id] > best_score))
        best = static_cast<int>(i), best_score = spec.scores[id];
    }
    if (best < 0) break;
    symbols[best] += symbols[best + 1];
    symbols.erase(symbols.begin() + best + 1);
  }
  std::vector<std::int32_t> ids;
  for (const std::string& s : symbols) {
    if (const std::int32_t id = normal(s); id >= 0) {
      ids.push_back(id);
      continue;
    }
    char name[8];
    for (unsigned char c : s) {
      std::snprintf(name, sizeof name, "<0x%02X>", c);
      ids.push_back(*t.FindToken(name));
    }
  }
  return ids;
}

TEST(SpmTiny, MatchesTheNaiveDefinition) {
  const Tokenizer t = SpmTiny();
  std::string pool = ReadFile(TokenizerFixture("gpl-3.txt"));
  for (const std::string& entry : LoadCorpus()) pool += entry;
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    const std::size_t length = 1 + rng() % 300;
    const std::string text = pool.substr(rng() % (pool.size() - length), length);
    ASSERT_EQ(t.Encode(text, false, false), NaiveSpmEncode(t, text)) << testing::Printable(text);
  }
}

// ---------------------------------------------------------------------------------------------------------
// Malformed metadata: every error names the file and the key.

using testing::GgufBuilder;
using testing::GgufFloat32Array;
using testing::GgufIntArray;
using testing::GgufString;
using testing::GgufStringArray;
using testing::GgufUint32;

GgufBuilder ByteLevelMetadata() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) {
    std::string s;
    unicode::AppendUtf8(unicode::ByteToUnicode(static_cast<std::uint8_t>(b)), s);
    tokens.push_back(s);
  }
  tokens.push_back("ab");
  GgufBuilder builder;
  builder.Add("general.architecture", GgufString("llama"))
      .Add("tokenizer.ggml.model", GgufString("gpt2"))
      .Add("tokenizer.ggml.pre", GgufString("smollm"))
      .Add("tokenizer.ggml.tokens", GgufStringArray(tokens))
      .Add("tokenizer.ggml.merges", GgufStringArray({"a b"}));
  return builder;
}

std::string GgufError(GgufBuilder builder) {
  const testing::GgufImage image = builder.Build();
  const std::string message =
      ErrorOf([&] { Tokenizer::FromGguf(GgufFile::FromBytes(image.bytes, "tok.gguf")); });
  EXPECT_NE(message.find("tok.gguf"), std::string::npos) << message;
  return message;
}

TEST(TokenizerGguf, ValidMetadataLoads) {
  const testing::GgufImage image = ByteLevelMetadata().Build();
  const Tokenizer t = Tokenizer::FromGguf(GgufFile::FromBytes(image.bytes, "tok.gguf"));
  EXPECT_EQ(t.Encode("ab", false, false), (std::vector<std::int32_t>{256}));
  EXPECT_EQ(t.bos_id(), -1);
  EXPECT_FALSE(t.add_bos());
}

TEST(TokenizerGguf, MalformedMetadataNamesTheKey) {
  EXPECT_NE(GgufError(GgufBuilder().Add("general.architecture", GgufString("llama")))
                .find("'tokenizer.ggml.model' is missing"),
            std::string::npos);
  EXPECT_NE(GgufError(ByteLevelMetadata().Add("tokenizer.ggml.model", GgufString("bert")))
                .find("tokenizer.ggml.model"),
            std::string::npos);
  GgufBuilder no_merges;
  no_merges.Add("tokenizer.ggml.model", GgufString("gpt2"))
      .Add("tokenizer.ggml.tokens", GgufStringArray({"a"}));
  EXPECT_NE(GgufError(no_merges).find("'tokenizer.ggml.merges' is missing"), std::string::npos);
  GgufBuilder bad_tokens;
  bad_tokens.Add("tokenizer.ggml.model", GgufString("gpt2")).Add("tokenizer.ggml.tokens", GgufString("a"));
  EXPECT_NE(GgufError(bad_tokens).find("'tokenizer.ggml.tokens' has type"), std::string::npos);
  EXPECT_NE(GgufError(ByteLevelMetadata().Add("tokenizer.ggml.bos_token_id", GgufUint32(257)))
                .find("'tokenizer.ggml.bos_token_id' = 257 is out of range"),
            std::string::npos);
  EXPECT_NE(GgufError(ByteLevelMetadata().Add("tokenizer.ggml.scores", GgufFloat32Array({1.0f, 2.0f})))
                .find("'tokenizer.ggml.scores' has 2 values for 257 tokens"),
            std::string::npos);
  std::vector<std::int64_t> types(257, 1);
  types[9] = 7;
  EXPECT_NE(GgufError(ByteLevelMetadata().Add("tokenizer.ggml.token_type",
                                              GgufIntArray(GgufValueType::INT32, types)))
                .find("'tokenizer.ggml.token_type' [9] = 7"),
            std::string::npos);
  EXPECT_NE(GgufError(ByteLevelMetadata().Add("tokenizer.ggml.add_bos_token", testing::GgufBool(true)))
                .find("'tokenizer.ggml.bos_token_id' is missing"),
            std::string::npos);
  GgufBuilder bad_merge;
  bad_merge.Add("tokenizer.ggml.model", GgufString("gpt2"))
      .Add("tokenizer.ggml.tokens", GgufStringArray({"a", "b"}))
      .Add("tokenizer.ggml.merges", GgufStringArray({"a b"}));
  EXPECT_NE(GgufError(bad_merge).find("merge 0 ('a b'): 'ab' is not a token"), std::string::npos);
  GgufBuilder llama_without_scores;
  llama_without_scores.Add("tokenizer.ggml.model", GgufString("llama"))
      .Add("tokenizer.ggml.tokens", GgufStringArray({"<unk>", "<s>", "</s>"}));
  EXPECT_NE(GgufError(llama_without_scores).find("'tokenizer.ggml.scores' is missing"), std::string::npos);
}

}  // namespace
}  // namespace plumb
