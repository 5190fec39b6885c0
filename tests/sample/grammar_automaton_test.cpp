// The byte-level pushdown matcher on hand-written JSON: which prefixes a schema's grammar accepts, which it
// rejects, and which are whole documents; and the grammar checks it relies on.
#include "plumb/sample/grammar_automaton.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "plumb/core/error.h"
#include "plumb/sample/grammar.h"
#include "plumb/sample/json_schema.h"

namespace plumb {
namespace {

class Matcher {
 public:
  explicit Matcher(const std::string& schema)
      : automaton_(std::make_shared<const Grammar>(JsonSchemaGrammar(schema))) {}
  // The bytes are a prefix of some document.
  bool Prefix(const std::string& text) {
    return automaton_.Walk(automaton_.Start(), text) != GrammarAutomaton::kDead;
  }
  // The bytes are a whole document.
  bool Document(const std::string& text) {
    return automaton_.Accepting(automaton_.Walk(automaton_.Start(), text));
  }

 private:
  GrammarAutomaton automaton_;
};

TEST(GrammarAutomaton, NumbersFollowJsonSyntaxExactly) {
  Matcher number(R"({"type": "number"})");
  for (const char* ok : {"0", "-0", "-0.5e+3", "12.25", "1E9", "3e-07", "-12", "0.0"})
    EXPECT_TRUE(number.Document(ok)) << ok;
  for (const char* bad : {"01", "+1", ".5", "1.", "1e", "-", "1.5e+", "--1", "0x10", "1 "})
    EXPECT_FALSE(number.Document(bad)) << bad;
  EXPECT_TRUE(number.Prefix("-0.5e+"));
  EXPECT_FALSE(number.Prefix("00"));
  EXPECT_FALSE(number.Prefix("-."));
  // At most 16 digits before the point (json_schema.h).
  EXPECT_TRUE(number.Document("1234567890123456"));
  EXPECT_FALSE(number.Prefix("12345678901234567"));

  Matcher integer(R"({"type": "integer"})");
  EXPECT_TRUE(integer.Document("-42"));
  EXPECT_TRUE(integer.Document("0"));
  EXPECT_FALSE(integer.Prefix("1."));
  EXPECT_FALSE(integer.Prefix("1e"));
  EXPECT_FALSE(
      integer.Prefix("-0"
                     "1"));
}

TEST(GrammarAutomaton, StringsTakeJsonEscapesAndWellFormedUtf8Only) {
  Matcher s(R"({"type": "string"})");
  for (const char* ok : {R"("")", R"("a\"b")", R"("\\\/\b\f\n\r\t")", R"("\u00e9\uFFFF\u0000")",
                         "\"caf\xC3\xA9\"", "\"\xF0\x9F\x98\x80\"", "\"\xE2\x82\xAC\""})
    EXPECT_TRUE(s.Document(ok)) << ok;
  EXPECT_FALSE(s.Prefix("\"\n"));            // a raw control character
  EXPECT_FALSE(s.Prefix(R"("\x)"));          // not a JSON escape
  EXPECT_FALSE(s.Prefix(R"("\u12G)"));       // not hex
  EXPECT_FALSE(s.Prefix(R"("\uD83D)"));      // surrogates are refused: one escape is one character
  EXPECT_FALSE(s.Prefix("\"\xC0\x80"));      // overlong
  EXPECT_FALSE(s.Prefix("\"\xED\xA0"));      // a surrogate in UTF-8
  EXPECT_FALSE(s.Prefix("\"\xF4\x90"));      // past U+10FFFF
  EXPECT_FALSE(s.Prefix("\"\x80"));          // a continuation byte first
  EXPECT_TRUE(s.Prefix("\"\xF0\x9F"));       // half a character is a prefix...
  EXPECT_FALSE(s.Document("\"\xF0\x9F\""));  // ...but cannot be closed
  EXPECT_FALSE(s.Prefix(R"("a"")"));         // nothing after the document

  Matcher bounded(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  EXPECT_FALSE(bounded.Document(R"("a")"));
  EXPECT_TRUE(bounded.Document(R"("a\n")"));                      // an escape is one character
  EXPECT_TRUE(bounded.Document("\"\xC3\xA9\xC3\xA9\xC3\xA9\""));  // three characters, six bytes
  EXPECT_FALSE(bounded.Prefix(R"("abcd)"));
}

TEST(GrammarAutomaton, ObjectsKeepTheDeclaredOrderAndOneOptionalSpace) {
  Matcher m(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"},
               "c": {"type": "null"}}, "required": ["b"], "additionalProperties": false})");
  for (const char* ok : {R"({"b":true})", R"({"a":1,"b":false})", R"({"a": 1, "b": false, "c": null})",
                         R"({"b":true,"c":null})"})
    EXPECT_TRUE(m.Document(ok)) << ok;
  for (const char* bad :
       {R"({})", R"({"a":1})", R"({"b":true,"a":1})", R"({"b":true,"d":1})", R"({ "b":true})",
        R"({"b" :true})", R"({"b":  true})", "{\"b\":\ntrue}", R"({"b":true,})", R"({"b":true} )"})
    EXPECT_FALSE(m.Document(bad)) << bad;
}

TEST(GrammarAutomaton, NestedArraysHonourTheirBounds) {
  Matcher m(R"({"type": "array", "items": {"type": "array", "items": {"type": "integer"}, "maxItems": 2},
               "minItems": 1, "maxItems": 3})");
  for (const char* ok : {"[[]]", "[[1,2],[3]]", "[[1], [2], []]", "[[-1, 0]]"})
    EXPECT_TRUE(m.Document(ok)) << ok;
  for (const char* bad : {"[]", "[[1,2,3]]", "[[],[],[],[]]", "[[1],]", "[1]"})
    EXPECT_FALSE(m.Document(bad)) << bad;
  EXPECT_TRUE(m.Prefix("[[1,2],[3"));
  EXPECT_FALSE(m.Prefix("[[1,2,"));
}

TEST(GrammarAutomaton, EnumsConstsAnyOfAndRefs) {
  Matcher e(R"({"enum": ["red", "green", 3, null, {"k": [1, 2]}]})");
  for (const char* ok : {R"("red")", R"("green")", "3", "null", R"({"k":[1,2]})"})
    EXPECT_TRUE(e.Document(ok)) << ok;
  EXPECT_FALSE(e.Document(R"("blue")"));
  EXPECT_FALSE(e.Prefix(R"("re")"
                        "d"));                               // "re" is not a value
  Matcher typed(R"({"type": "string", "enum": ["a", 1]})");  // 1 has the wrong type: never generated
  EXPECT_FALSE(typed.Document("1"));
  EXPECT_TRUE(typed.Document(R"("a")"));

  Matcher any_of(
      R"({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}], "description": "x"})");
  EXPECT_TRUE(any_of.Document("12"));
  EXPECT_TRUE(any_of.Document(R"("z")"));
  EXPECT_FALSE(any_of.Document(R"("zz")"));

  Matcher nullable(R"({"type": ["string", "null"]})");
  EXPECT_TRUE(nullable.Document("null"));
  EXPECT_TRUE(nullable.Document(R"("x")"));

  Matcher ref(R"({"$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}},
                 "required": ["x"]}}, "type": "array", "items": {"$ref": "#/$defs/point"}})");
  EXPECT_TRUE(ref.Document(R"([{"x":1.5},{"x":-2}])"));
  EXPECT_FALSE(ref.Document(R"([{}])"));

  // Recursion through $ref: a tree whose children are trees.
  Matcher tree(R"({"type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array",
                  "items": {"$ref": "#"}}}, "required": ["v", "kids"]})");
  EXPECT_TRUE(tree.Document(R"({"v":1,"kids":[{"v":2,"kids":[]},{"v":3,"kids":[{"v":4,"kids":[]}]}]})"));
  EXPECT_FALSE(tree.Document(R"({"v":1,"kids":[{"v":2}]})"));
}

TEST(GrammarAutomaton, AnyJsonObjectTakesEveryShapeOfObject) {
  GrammarAutomaton a(std::make_shared<const Grammar>(AnyJsonObjectGrammar()));
  const auto document = [&](const std::string& t) { return a.Accepting(a.Walk(a.Start(), t)); };
  EXPECT_TRUE(document("{}"));
  EXPECT_TRUE(document(R"({"a": [1, {"b": null}, "c", true], "d": {"e": -1.5e3}})"));
  EXPECT_FALSE(document("[]"));
  EXPECT_FALSE(document(R"({"a"})"));
  EXPECT_FALSE(document(R"({1: 2})"));
}

TEST(Grammar, ValidateRefusesLeftRecursionAndEndlessRules) {
  GrammarBuilder left;
  const int a = left.Declare("a");
  left.Define(a, {{GrammarBuilder::Ref(a), left.Bytes(ByteSet::Of('x'))}, left.Literal("y")});
  EXPECT_THROW(left.Build(a), Error);

  GrammarBuilder endless;
  const int b = endless.Declare("b");
  endless.Define(b, {Concat({endless.Literal("x"), {GrammarBuilder::Ref(b)}})});  // no way out
  EXPECT_THROW(endless.Build(b), Error);

  // A recursive schema with no finite document is refused when compiled.
  EXPECT_THROW(JsonSchemaGrammar(R"({"type": "object", "properties": {"next": {"$ref": "#"}},
                                    "required": ["next"]})"),
               Error);
  EXPECT_THROW(JsonSchemaGrammar(R"({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}]}},
                                    "$ref": "#/$defs/a"})"),
               Error);
}

TEST(Grammar, RestrictBytesDropsWhatCanNoLongerMatch) {
  GrammarBuilder b;
  const int root = b.Add("root", {b.Literal("ab"), b.Literal("cd")});
  Grammar g = RestrictBytes(b.Build(root), ByteSet::Range('a', 'b'));
  GrammarAutomaton m(std::make_shared<const Grammar>(g));
  EXPECT_TRUE(m.Accepting(m.Walk(m.Start(), "ab")));
  EXPECT_EQ(m.Walk(m.Start(), "c"), GrammarAutomaton::kDead);
  EXPECT_THROW(RestrictBytes(g, ByteSet::Of('z')), Error);
}

}  // namespace
}  // namespace plumb
