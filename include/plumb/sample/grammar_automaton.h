// GrammarAutomaton: a byte-at-a-time pushdown matcher for a Grammar, determinised lazily.
//
// A configuration is a stack of grammar positions still to be matched (top: a byte-set element; below it,
// where each enclosing rule continues). The bytes read so far leave a set of configurations, one per way
// the grammar can have derived them (several where alternatives share a prefix); reading a byte keeps the
// configurations whose top set holds it, pops that position and expands rule references at the top
// until every top is a byte set again. A configuration whose stack empties means the bytes so far are a
// whole sentence of the grammar ("accepting"). A reference in the last place of its alternative replaces
// its caller's frame instead of adding one, so right recursion (repetition) runs in constant depth.
//
// Exact by construction: a state is exactly the set of configurations consistent with the bytes read, so a
// byte is allowed iff some sentence continues the bytes with it; and since every rule is productive
// (ValidateGrammar), any live state (a configuration left, or accepting) has a completion to a sentence.
//
// States (sets of configurations) are interned and numbered, stacks are hash-consed (shared tails), and
// each state's transition on each byte is computed once and kept: after the first few tokens a walk over
// the vocabulary trie is one table look-up per trie node. Not thread-safe (its tables grow as it runs).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "plumb/sample/grammar.h"

namespace plumb {

struct StackSetHash {
  std::size_t operator()(const std::vector<std::int32_t>& v) const;
};

class GrammarAutomaton {
 public:
  using State = std::int32_t;
  static constexpr State kDead = -1;  // no configuration left and not accepting: the bytes are no prefix

  // `grammar` must pass ValidateGrammar (GrammarBuilder::Build checks it).
  explicit GrammarAutomaton(std::shared_ptr<const Grammar> grammar);

  State Start() const { return 0; }
  // The state after `byte`; kDead from kDead.
  State Next(State state, std::uint8_t byte);
  // Next over each byte in turn.
  State Walk(State state, std::string_view bytes);
  // The bytes read so far are a whole sentence of the grammar.
  bool Accepting(State state) const;
  // Some byte may still follow.
  bool CanContinue(State state) const;

  std::size_t num_states() const { return states_.size(); }
  std::size_t num_stacks() const { return stacks_.size(); }

 private:
  struct Stack {
    std::int32_t position;  // index into positions_: the element to match next
    std::int32_t below;     // the stack under it; kEmpty at the bottom
  };
  struct Position {
    GrammarElement element;
    bool last;  // the last element of its alternative
  };
  struct StateInfo {
    std::vector<std::int32_t> stacks;  // sorted; every top is a byte-set element
    bool accepting = false;
    std::vector<State> next;  // 256 entries (kUnknown until computed), allocated at first use
  };
  struct Expansion {
    std::vector<std::int32_t> stacks;
    bool accepting = false;
    std::vector<std::int32_t> seen;  // stacks expanded already in this step
  };
  static constexpr std::int32_t kEmpty = -1;
  static constexpr State kUnknown = -2;

  std::int32_t Push(std::int32_t below, std::int32_t position);
  std::int32_t PopTop(std::int32_t stack);  // the stack after its top element is matched
  void Expand(std::int32_t stack, Expansion& out);
  void ExpandRule(int rule, std::int32_t continuation, Expansion& out);
  State Intern(Expansion& e);
  State Compute(State state, std::uint8_t byte);

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Position> positions_;
  std::vector<std::vector<std::int32_t>> first_positions_;  // per rule, per alternative; -1: empty one
  std::vector<Stack> stacks_;
  std::unordered_map<std::uint64_t, std::int32_t> stack_ids_;
  std::vector<StateInfo> states_;
  // A state's key: its sorted stacks, then kEmpty if it is accepting.
  std::unordered_map<std::vector<std::int32_t>, State, StackSetHash> state_ids_;
  std::size_t transition_tables_ = 0;
};

}  // namespace plumb
