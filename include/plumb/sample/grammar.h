// A context-free grammar over bytes, the language constrained decoding keeps the output in
// (docs/serve.md, "Structured output").
//
// A grammar is a list of rules; a rule is a list of alternatives; an alternative is a sequence of elements,
// each either a set of bytes (matches one byte of the set) or a reference to a rule. An empty alternative
// matches the empty string. The terminals are bytes, not characters, so that a token that ends inside a
// UTF-8 character (byte-level BPE has many) is matched like any other: a grammar that wants valid UTF-8
// spells the multi-byte forms out (json_schema.cpp does).
//
// Validate() makes a grammar fit for GrammarAutomaton, whose exactness rests on two properties:
//   - every rule is productive (derives at least one finite byte string), so any prefix the automaton
//     accepts has a completion: the mask never leads into a dead end;
//   - no rule is left-recursive (directly, or through rules that can match the empty string), so expanding
//     a rule to the bytes it can start with terminates.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace plumb {

// A set of byte values, 256 bits.
class ByteSet {
 public:
  ByteSet() = default;
  static ByteSet Of(std::uint8_t byte);
  static ByteSet Range(std::uint8_t first, std::uint8_t last);  // [first, last], inclusive

  ByteSet& Add(std::uint8_t byte);
  ByteSet& AddRange(std::uint8_t first, std::uint8_t last);
  ByteSet& Remove(std::uint8_t byte);
  ByteSet& Union(const ByteSet& other);
  ByteSet& Intersect(const ByteSet& other);
  bool Has(std::uint8_t byte) const { return (bits_[byte >> 6] >> (byte & 63)) & 1; }
  bool Empty() const;
  bool operator==(const ByteSet&) const = default;

 private:
  std::array<std::uint64_t, 4> bits_{};
};

struct GrammarElement {
  enum class Kind : std::uint8_t { kBytes, kRule };
  Kind kind;
  int index;  // into Grammar::byte_sets (kBytes) or Grammar::rules (kRule)
};

using GrammarSequence = std::vector<GrammarElement>;

struct GrammarRule {
  std::string name;  // for messages and debugging: the schema path it came from
  std::vector<GrammarSequence> alternatives;
};

struct Grammar {
  std::vector<ByteSet> byte_sets;
  std::vector<GrammarRule> rules;
  int root = -1;
};

// Builds a Grammar. Sequences are built by concatenating the pieces below; rules are added whole or declared
// first (for recursion) and defined later.
class GrammarBuilder {
 public:
  GrammarElement Bytes(const ByteSet& set);  // one byte of `set`
  GrammarSequence Literal(std::string_view bytes);
  static GrammarElement Ref(int rule) { return {GrammarElement::Kind::kRule, rule}; }

  int Declare(std::string name);  // a rule with no alternatives yet
  void Define(int rule, std::vector<GrammarSequence> alternatives);
  int Add(std::string name, std::vector<GrammarSequence> alternatives);

  // A rule matching `item` repeated min..max times (max < 0: unbounded). Bounded repetition is spelled out
  // as nested optional rules ("x x (x (x)?)?"), so the automaton needs no counters; unbounded as a
  // right-recursive rule, which the automaton runs in constant stack depth (a reference in last place
  // replaces its caller's frame).
  int Repeat(std::string name, const GrammarSequence& item, int min, int max);

  // Checks Validate() and returns the grammar with `root` as its start rule.
  Grammar Build(int root);

 private:
  Grammar grammar_;
};

// Concatenation: Concat({a, b, c}) matches a, then b, then c.
GrammarSequence Concat(std::initializer_list<GrammarSequence> parts);

// Throws plumb::Error naming the rule when: a reference or byte set index is out of range, the root is not a
// rule, a rule the root can reach is not productive, or a rule is left-recursive.
void ValidateGrammar(const Grammar& grammar);

// The grammar cut down to the bytes in `allowed`: every byte set intersected with it, then every alternative
// that can no longer match anything removed. Throws plumb::Error if the root then matches nothing.
Grammar RestrictBytes(Grammar grammar, const ByteSet& allowed);

// The grammar in a readable EBNF-like form (one rule per line), for tests and debugging.
std::string GrammarToString(const Grammar& grammar);

}  // namespace plumb
