// Constrained decoding: which tokens may come next so that the output stays in a grammar's language
// (docs/serve.md, "Structured output").
//
// TokenConstraint is what a request carries: the grammar, the vocabulary and the end-of-generation ids;
// immutable and shared. TokenMatcher is one sequence's progress through it. Before each sample,
// Apply() sets the logit of every token the grammar does not allow to -inf, so greedy and temperature
// sampling alike (and top-k, top-p, min-p after it) pick only allowed tokens; after it, Accept() moves on
// by the token's bytes.
//
// The contract (exact, not heuristic):
//   - a token is allowed iff its bytes continue the output to a prefix of some sentence of the grammar;
//     tokens that stand for no bytes (control tokens) never are;
//   - an end id is allowed iff the output is a whole sentence; when nothing else can follow, the end ids
//     are the only tokens allowed (the sampler is forced to end);
//   - the allowed set is never empty before an end id is accepted: every rule is productive, and every
//     byte the grammar uses has a one-byte token (the constructor cuts the grammar to those bytes), so any
//     allowed token leaves a completion that tokens can spell.
// The output can still stop short, at the token limit: a caller reports that as its "length" stop.
//
// Cost of one step: a walk over the vocabulary trie that advances the automaton once per distinct prefix
// that is still alive and skips dead subtrees; transitions are memoised per automaton state and whole masks
// per state (JSON revisits the same few states: every character of a string leaves it where it was).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "plumb/sample/grammar.h"
#include "plumb/sample/grammar_automaton.h"
#include "plumb/sample/token_vocabulary.h"

namespace plumb {

class TokenConstraint {
 public:
  // Cuts the grammar to the bytes that have one-byte tokens (RestrictBytes: in a byte-level BPE vocabulary
  // no token holds any other byte either; SmolLM2's lacks 0x04, 0xC0, 0xF1, 0xF5-0xFF, ...). Throws
  // plumb::Error when end_ids is empty or holds an id outside the vocabulary, or when the cut grammar
  // matches nothing.
  TokenConstraint(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocabulary,
                  std::vector<int> end_ids);

  const std::shared_ptr<const Grammar>& grammar() const { return grammar_; }
  const TokenVocabulary& vocabulary() const { return *vocabulary_; }
  const std::vector<int>& end_ids() const { return end_ids_; }
  bool IsEnd(int token) const;

 private:
  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenVocabulary> vocabulary_;
  std::vector<int> end_ids_;
};

// One sequence's position in a TokenConstraint. Not thread-safe; cheap to create (its caches fill as it
// runs).
class TokenMatcher {
 public:
  explicit TokenMatcher(std::shared_ptr<const TokenConstraint> constraint);

  // The allowed tokens as a bitset over the vocabulary: bit (id & 63) of word id / 64. Throws plumb::Error
  // after an end id was accepted (nothing may follow).
  std::span<const std::uint64_t> Allowed();
  bool IsAllowed(int token);
  // Sets every logit whose token is not allowed to -inf, ids past the vocabulary included (a model's
  // embedding may have padding rows beyond its tokenizer's ids).
  void Apply(std::span<float> logits);
  // Moves past `token`; throws plumb::Error, changing nothing, if it is not allowed.
  void Accept(int token);

  // The output so far is a whole sentence of the grammar (an end id is allowed).
  bool Complete() const;
  // An end id has been accepted.
  bool Ended() const { return ended_; }

  const GrammarAutomaton& automaton() const { return automaton_; }

 private:
  std::shared_ptr<const TokenConstraint> constraint_;
  GrammarAutomaton automaton_;
  GrammarAutomaton::State state_;
  bool ended_ = false;
  std::unordered_map<GrammarAutomaton::State, std::vector<std::uint64_t>> masks_;  // per state
  std::vector<GrammarAutomaton::State> walk_;                                      // per trie depth
};

}  // namespace plumb
