// Token masks over a vocabulary: equal to a brute-force check of every token, never empty, and every
// document sampled through them parses and validates. On a small made-up vocabulary, and on SmolLM2's
// 49 152 tokens (read through the tokenizer, so this test links it: scripts/fetch-model).
#include "plumb/sample/token_constraint.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/formats/gguf.h"
#include "plumb/sample/json_schema.h"
#include "plumb/sample/sampler.h"
#include "plumb/tokenizer/tokenizer.h"

namespace plumb {
namespace {

using Json = nlohmann::ordered_json;

const std::string kSmolLm2 = std::string(PLUMB_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

bool Bit(std::span<const std::uint64_t> mask, int id) {
  return (mask[static_cast<std::size_t>(id) / 64] >> (id % 64)) & 1;
}

// The mask by definition: a token is allowed iff its bytes leave the automaton alive; an end id iff the
// output is complete. Compared with the trie walk's.
void ExpectMaskIsExact(TokenMatcher& m, const TokenConstraint& c, GrammarAutomaton& reference,
                       GrammarAutomaton::State state) {
  const std::span<const std::uint64_t> mask = m.Allowed();
  int allowed = 0;
  for (int id = 0; id < c.vocabulary().size(); ++id) {
    const std::string& piece = c.vocabulary().piece(id);
    const bool expected = c.IsEnd(id)
                              ? reference.Accepting(state)
                              : !piece.empty() && reference.Walk(state, piece) != GrammarAutomaton::kDead;
    ASSERT_EQ(Bit(mask, id), expected) << "token " << id << " piece \"" << piece << "\"";
    allowed += expected;
  }
  ASSERT_GT(allowed, 0) << "the mask is empty: a dead end";
}

// A vocabulary of every byte, some JSON-shaped merges, a control token (no text) and an end token.
std::shared_ptr<const TokenVocabulary> SmallVocabulary() {
  std::vector<std::string> pieces;
  for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, static_cast<char>(b)));
  for (const char* p : {"{\"",
                        "\":",
                        "\": ",
                        "\",",
                        "\"}",
                        "\"]",
                        "true",
                        "false",
                        "null",
                        "12",
                        "-0.",
                        "e+",
                        "\\u00",
                        "\\n",
                        "\xC3",
                        "\xA9\"",
                        "\xF0\x9F\x98\x80",
                        " \"",
                        "}}",
                        "]]",
                        "[[",
                        "name",
                        "\",\""})
    pieces.push_back(p);
  pieces.push_back("");  // a control token: never allowed
  pieces.push_back("");  // the end token
  return std::make_shared<const TokenVocabulary>(std::move(pieces));
}

const char* const kSchemas[] = {
    R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
        "n": {"type": "integer"}, "ok": {"type": "boolean"}}, "required": ["name", "n"],
        "additionalProperties": false})",
    R"({"type": "array", "items": {"type": "array", "items": {"type": "number"}, "maxItems": 3},
        "minItems": 1, "maxItems": 3})",
    R"({"anyOf": [{"enum": ["a\"b", "caf\u00e9", 7, null]},
                  {"type": "string", "minLength": 2, "maxLength": 4}]})",
    R"({"$defs": {"p": {"type": "object", "properties": {"x": {"type": ["integer", "null"]}},
        "required": ["x"]}}, "type": "array", "items": {"$ref": "#/$defs/p"}, "maxItems": 2})",
    R"({"type": "object"})",
};

TEST(TokenConstraint, MasksEqualTheBruteForceCheckOnASmallVocabulary) {
  const auto vocab = SmallVocabulary();
  const int end = vocab->size() - 1;
  std::mt19937_64 rng(7);
  for (const char* schema : kSchemas) {
    const auto c =
        std::make_shared<const TokenConstraint>(JsonSchemaGrammar(schema), vocab, std::vector<int>{end});
    for (int walk = 0; walk < 20; ++walk) {
      TokenMatcher m(c);
      GrammarAutomaton reference(c->grammar());
      GrammarAutomaton::State state = reference.Start();
      for (int step = 0; step < 200 && !m.Ended(); ++step) {
        ExpectMaskIsExact(m, *c, reference, state);
        std::vector<int> allowed;
        for (int id = 0; id < vocab->size(); ++id)
          if (m.IsAllowed(id)) allowed.push_back(id);
        // Lean towards ending once allowed, or the walk rarely finishes.
        const int token = m.IsAllowed(end) && rng() % 2 ? end : allowed[rng() % allowed.size()];
        m.Accept(token);
        if (token != end) state = reference.Walk(state, vocab->piece(token));
      }
    }
  }
}

TEST(TokenConstraint, RefusesTokensTheGrammarForbidsAndEndsOnlyWhenComplete) {
  const auto vocab = SmallVocabulary();
  const int end = vocab->size() - 1, control = vocab->size() - 2;
  const auto c = std::make_shared<const TokenConstraint>(
      JsonSchemaGrammar(R"({"type": "object", "properties": {"a": {"const": true}}, "required": ["a"]})"),
      vocab, std::vector<int>{end});
  TokenMatcher m(c);
  EXPECT_FALSE(m.IsAllowed(control));
  EXPECT_FALSE(m.IsAllowed(end));
  EXPECT_FALSE(m.IsAllowed('['));
  EXPECT_THROW(m.Accept(' '), Error);
  for (const char ch : std::string(R"({"a":true})")) m.Accept(static_cast<unsigned char>(ch));
  EXPECT_TRUE(m.Complete());
  // Complete with nothing that can follow: the end id is forced.
  for (int id = 0; id < vocab->size(); ++id) EXPECT_EQ(m.IsAllowed(id), id == end) << id;
  std::vector<float> logits(static_cast<std::size_t>(vocab->size()) + 3, 1.0f);  // padding rows too
  m.Apply(logits);
  for (std::size_t i = 0; i < logits.size(); ++i)
    EXPECT_EQ(std::isinf(logits[i]), i != std::size_t(end)) << i;
  m.Accept(end);
  EXPECT_TRUE(m.Ended());
  EXPECT_THROW(m.Allowed(), Error);

  EXPECT_THROW(TokenConstraint(AnyJsonObjectGrammar(), vocab, {}), Error);
  EXPECT_THROW(TokenConstraint(AnyJsonObjectGrammar(), vocab, {vocab->size()}), Error);
}

// --- SmolLM2's vocabulary ----------------------------------------------------------------------------

// A validator for the subset json_schema.h supports, written apart from the compiler it checks.
bool Validates(const nlohmann::json& v, const Json& s, const Json& root) {
  if (s.is_boolean()) return s.get<bool>();
  if (s.contains("$ref")) {
    const std::string ref = s["$ref"];
    return Validates(v, root.at(Json::json_pointer(ref.substr(1))), root);
  }
  if (s.contains("anyOf")) {
    for (const Json& alt : s["anyOf"])
      if (Validates(v, alt, root)) return true;
    return false;
  }
  if (s.contains("allOf")) {
    for (const Json& alt : s["allOf"])
      if (!Validates(v, alt, root)) return false;
  }
  if (s.contains("const") && nlohmann::json::parse(s["const"].dump()) != v) return false;
  if (s.contains("enum")) {
    bool found = false;
    for (const Json& e : s["enum"]) found = found || nlohmann::json::parse(e.dump()) == v;
    if (!found) return false;
  }
  if (s.contains("type")) {
    bool typed = false;
    for (const Json& t : s["type"].is_array() ? s["type"] : Json::array({s["type"]})) {
      const std::string name = t;
      typed = typed || (name == "object" && v.is_object()) || (name == "array" && v.is_array()) ||
              (name == "string" && v.is_string()) || (name == "number" && v.is_number()) ||
              (name == "integer" && v.is_number_integer()) || (name == "boolean" && v.is_boolean()) ||
              (name == "null" && v.is_null());
    }
    if (!typed) return false;
  }
  if (v.is_object()) {
    for (const auto& [key, value] : v.items()) {
      if (s.contains("properties") && s["properties"].contains(key)) {
        if (!Validates(value, s["properties"][key], root)) return false;
      } else if (s.contains("additionalProperties") && !Validates(value, s["additionalProperties"], root)) {
        return false;
      }
    }
    if (s.contains("required"))
      for (const Json& r : s["required"])
        if (!v.contains(r.get<std::string>())) return false;
  }
  if (v.is_array()) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<std::size_t>()) return false;
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<std::size_t>()) return false;
    if (s.contains("items"))
      for (const auto& item : v)
        if (!Validates(item, s["items"], root)) return false;
  }
  if (v.is_string()) {
    std::size_t chars = 0;  // code points: bytes that do not continue a UTF-8 character
    for (const char ch : v.get<std::string>()) chars += (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
    if (s.contains("minLength") && chars < s["minLength"].get<std::size_t>()) return false;
    if (s.contains("maxLength") && chars > s["maxLength"].get<std::size_t>()) return false;
  }
  return true;
}

// A random schema of the supported subset, `depth` levels of nesting at most; $defs go into `defs`.
Json RandomSchema(std::mt19937_64& rng, int depth, Json& defs) {
  const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  const int kind = depth > 0 ? pick(11) : pick(6);
  switch (kind) {
    case 0:
      return {{"type", "integer"}};
    case 1:
      return {{"type", "number"}};
    case 2:
      return {{"type", pick(2) ? "boolean" : "null"}};
    case 3: {
      Json s = {{"type", "string"}};
      if (pick(2)) s["maxLength"] = pick(6);
      if (pick(2)) s["minLength"] = pick(3);
      if (s.contains("maxLength") && s.contains("minLength") && s["minLength"] > s["maxLength"])
        s.erase("minLength");
      return s;
    }
    case 4:
      return {{"enum", Json::array({"x", "quote\"d", "caf\xC3\xA9", 12, -0.5, false, nullptr})}};
    case 5:
      return {{"type", Json::array({"string", "null"})}, {"maxLength", 5}};
    case 6:
    case 7: {
      Json s = {{"type", "object"}, {"properties", Json::object()}, {"additionalProperties", false}};
      Json required = Json::array();
      const char* names[] = {"a", "b\"q", "longer_name", "\xC3\xA9t\xC3\xA9", "n"};
      for (int i = 0, n = 1 + pick(3); i < n; ++i) {
        const std::string name = names[(static_cast<std::size_t>(i) * 2 + rng()) % 5];
        if (s["properties"].contains(name)) continue;
        s["properties"][name] = RandomSchema(rng, depth - 1, defs);
        if (pick(2)) required.push_back(name);
      }
      s["required"] = required;
      return s;
    }
    case 8: {
      Json s = {{"type", "array"}, {"items", RandomSchema(rng, depth - 1, defs)}};
      if (pick(2)) s["maxItems"] = 1 + pick(3);
      if (pick(2)) s["minItems"] = pick(2);
      return s;
    }
    case 9:
      return {
          {"anyOf", Json::array({RandomSchema(rng, depth - 1, defs), RandomSchema(rng, depth - 1, defs)})}};
    default: {
      const std::string name = "d" + std::to_string(defs.size());
      defs[name] = RandomSchema(rng, depth - 1, defs);
      return {{"$ref", "#/$defs/" + name}};
    }
  }
}

class SmolLm2Vocabulary : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(kSmolLm2)) return;
    const Tokenizer tokenizer = Tokenizer::FromGguf(GgufFile::Open(kSmolLm2));
    std::vector<std::string> pieces;
    for (int id = 0; id < tokenizer.vocab_size(); ++id) pieces.push_back(tokenizer.TokenToPiece(id));
    vocab_ = std::make_shared<const TokenVocabulary>(std::move(pieces));
    end_ = tokenizer.eos_id();
  }
  void SetUp() override {
    if (!vocab_) GTEST_SKIP() << kSmolLm2 << " not fetched (scripts/fetch-model)";
  }
  static std::shared_ptr<const TokenVocabulary> vocab_;
  static int end_;
};
std::shared_ptr<const TokenVocabulary> SmolLm2Vocabulary::vocab_;
int SmolLm2Vocabulary::end_ = -1;

// Random logits, with a push towards closing strings, arrays and objects and towards ending, so that most
// walks finish within the step limit.
std::vector<float> RandomLogits(const TokenVocabulary& vocab, int end, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(static_cast<std::size_t>(vocab.size()));
  for (int id = 0; id < vocab.size(); ++id) {
    const std::string& p = vocab.piece(id);
    logits[static_cast<std::size_t>(id)] = normal(rng) +
                                           (p.find_first_of("\"]}") != std::string::npos ? 5.0f : 0.0f) +
                                           (id == end ? 10.0f : 0.0f);
  }
  return logits;
}

TEST_F(SmolLm2Vocabulary, MasksAreExactAndNeverEmptyOnRandomWalks) {
  std::mt19937_64 rng(11);
  for (const char* schema : kSchemas) {
    const auto c =
        std::make_shared<const TokenConstraint>(JsonSchemaGrammar(schema), vocab_, std::vector<int>{end_});
    TokenMatcher m(c);
    GrammarAutomaton reference(c->grammar());
    GrammarAutomaton::State state = reference.Start();
    Sampler sampler(SamplingParams{1.0f, 0, 1.0f, 0.0f, rng()});
    for (int step = 0; step < 120 && !m.Ended(); ++step) {
      if (step % 8 == 0) ExpectMaskIsExact(m, *c, reference, state);  // 49 152 walks each: not every step
      std::vector<float> logits = RandomLogits(*vocab_, end_, rng);
      m.Apply(logits);
      const int token = sampler.Sample(logits);
      ASSERT_TRUE(m.IsAllowed(token));
      m.Accept(token);
      if (token != end_) state = reference.Walk(state, vocab_->piece(token));
    }
  }
}

TEST_F(SmolLm2Vocabulary, RandomSchemasTimesRandomPathsGiveDocumentsThatValidate) {
  std::mt19937_64 rng(2024);
  int finished = 0, runs = 0;
  double mask_seconds = 0;
  int masks = 0;
  for (int schema_index = 0; schema_index < 30; ++schema_index) {
    Json defs = Json::object();
    Json schema = RandomSchema(rng, 3, defs);
    if (!defs.empty()) schema = {{"$defs", defs}, {"allOf", Json::array({schema})}};
    const auto c = std::make_shared<const TokenConstraint>(JsonSchemaGrammar(schema.dump()), vocab_,
                                                           std::vector<int>{end_});
    for (int path = 0; path < 3; ++path, ++runs) {
      TokenMatcher m(c);
      // Greedy on the random logits for one path, sampling for the others.
      Sampler sampler(SamplingParams{path == 0 ? 0.0f : 1.0f, 0, path == 2 ? 0.9f : 1.0f, 0.0f, rng()});
      std::string text;
      for (int step = 0; step < 150 && !m.Ended(); ++step) {
        std::vector<float> logits = RandomLogits(*vocab_, end_, rng);
        const auto start = std::chrono::steady_clock::now();
        m.Apply(logits);
        mask_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        ++masks;
        const int token = sampler.Sample(logits);
        m.Accept(token);
        if (token != end_) text += vocab_->piece(token);
      }
      if (!m.Ended())
        continue;  // the step limit came first: a prefix, which the automaton already vouched for
      ++finished;
      nlohmann::json document;
      ASSERT_NO_THROW(document = nlohmann::json::parse(text)) << schema.dump() << "\n" << text;
      EXPECT_TRUE(Validates(document, schema, schema)) << schema.dump() << "\n" << text;
    }
  }
  EXPECT_GT(finished, runs / 2) << "too few walks finished to test much";
  std::printf("%d of %d random walks finished; masks %.3f ms on average over %d\n", finished, runs,
              mask_seconds * 1e3 / masks, masks);
}

TEST_F(SmolLm2Vocabulary, MaskCostPerStep) {
  // Not a pass/fail bound (machines differ): the numbers docs/serve.md quotes, printed.
  const auto c = std::make_shared<const TokenConstraint>(
      JsonSchemaGrammar(
          R"({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]})"),
      vocab_, std::vector<int>{end_});
  TokenMatcher m(c);
  const auto time = [&] {
    const auto start = std::chrono::steady_clock::now();
    m.Allowed();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() * 1e3;
  };
  const double cold_start = time();
  for (const char ch : std::string(R"({"name":")"))
    m.Accept(vocab_->ByteToken(static_cast<unsigned char>(ch)));
  const double cold_string = time();  // nearly every token is allowed in a string: the whole trie is walked
  m.Accept(vocab_->ByteToken('a'));   // the same automaton state: the mask is cached
  const double warm_string = time();
  std::vector<float> logits(static_cast<std::size_t>(vocab_->size()));
  const auto start = std::chrono::steady_clock::now();
  m.Apply(logits);
  const double apply = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() * 1e3;
  std::printf(
      "mask: %.3f ms at the start, %.3f ms first inside a string, %.4f ms there again (cached), %.3f ms to "
      "apply to the logits; %zu automaton states, %zu trie nodes\n",
      cold_start, cold_string, warm_string, apply, m.automaton().num_states(), vocab_->nodes().size());
}

}  // namespace
}  // namespace plumb
