// The tokenizer oracle fixtures (fixtures/tokenizer/, written by tools/reference/make_tokenizer_fixtures.py)
// and the checks every tokenizer configuration goes through.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/tokenizer/tokenizer.h"
#include "plumb/tokenizer/unicode.h"
#include "support/errors.h"

namespace plumb::testing {

inline std::string TokenizerFixture(const std::string& name) {
  return std::string(PLUMB_SOURCE_DIR) + "/fixtures/tokenizer/" + name;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw MakeError(path, ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline nlohmann::json ReadJsonFile(const std::string& path) {
  return nlohmann::json::parse(ReadFile(path));
}

// corpus.json: strings, and {"bytes": [...]} for entries that are not valid UTF-8.
inline std::vector<std::string> LoadCorpus() {
  std::vector<std::string> corpus;
  for (const nlohmann::json& entry : ReadJsonFile(TokenizerFixture("corpus.json"))) {
    if (entry.is_string()) {
      corpus.push_back(entry.get<std::string>());
    } else {
      std::string bytes;
      for (int b : entry.at("bytes")) bytes += static_cast<char>(b);
      corpus.push_back(bytes);
    }
  }
  return corpus;
}

inline std::vector<std::vector<std::int32_t>> IdLists(const nlohmann::json& expected, const char* key) {
  return expected.at(key).get<std::vector<std::vector<std::int32_t>>>();
}

inline std::string Printable(const std::string& text) {
  return nlohmann::json(unicode::ToValidUtf8(text)).dump();
}

// Every corpus entry encodes to the oracle's ids, with special-token texts as text ("plain") and, where the
// expected file has them, parsed as special tokens ("special").
inline void ExpectOracleIds(const Tokenizer& tokenizer, const nlohmann::json& expected,
                            const std::vector<std::string>& corpus) {
  for (const char* key : {"plain", "special"}) {
    if (!expected.contains(key)) continue;
    const auto lists = IdLists(expected, key);
    ASSERT_EQ(lists.size(), corpus.size()) << key;
    const bool parse_special = std::string(key) == "special";
    for (std::size_t i = 0; i < corpus.size(); ++i) {
      EXPECT_EQ(tokenizer.Encode(corpus[i], /*add_special=*/false, parse_special), lists[i])
          << key << " entry " << i << ": " << Printable(corpus[i]);
    }
  }
}

// What Decode(Encode(text)) should give back: the text as valid UTF-8, except that a Metaspace tokenizer that
// found a space already in front drops it on decoding (as HF's Metaspace decoder does).
inline std::string ExpectedRoundTrip(const Tokenizer& tokenizer, const std::string& text) {
  std::string valid = unicode::ToValidUtf8(text);
  if (tokenizer.spec().space_prefix_unless_space && !valid.empty() && valid[0] == ' ') valid.erase(0, 1);
  return valid;
}

// Decode(Encode(text)) gives the text back, and streaming the ids one at a time gives the same bytes as
// Decode without ever emitting part of a character.
inline void ExpectRoundTripAndStreaming(const Tokenizer& tokenizer, const std::vector<std::string>& corpus) {
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    const std::vector<std::int32_t> ids = tokenizer.Encode(corpus[i], false, false);
    const std::string decoded = tokenizer.Decode(ids);
    EXPECT_EQ(decoded, ExpectedRoundTrip(tokenizer, corpus[i]))
        << "entry " << i << ": " << Printable(corpus[i]);
    StreamingDecoder stream(tokenizer);
    std::string streamed;
    for (std::int32_t id : ids) {
      const std::string chunk = stream.Push(id);
      EXPECT_EQ(unicode::ToValidUtf8(chunk), chunk) << "entry " << i << ": a chunk is not whole characters";
      streamed += chunk;
    }
    const std::string rest = stream.Flush();
    EXPECT_EQ(unicode::ToValidUtf8(rest), rest);
    EXPECT_EQ(streamed + rest, decoded) << "entry " << i;
  }
}

}  // namespace plumb::testing
