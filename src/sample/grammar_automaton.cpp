#include "plumb/sample/grammar_automaton.h"

#include <algorithm>

#include "plumb/core/error.h"

namespace plumb {
namespace {

// Transition tables are 1 KiB each; a grammar with deep recursion (nested JSON of any shape) keeps making
// new states, so past this many tables they are all dropped and recomputed as needed (the states stay).
constexpr std::size_t kMaxTransitionTables = 16384;

}  // namespace

std::size_t StackSetHash::operator()(const std::vector<std::int32_t>& v) const {
  std::uint64_t h = 0x9E3779B97F4A7C15ull ^ v.size();
  for (const std::int32_t x : v) h = (h ^ static_cast<std::uint32_t>(x)) * 0x100000001B3ull;
  return static_cast<std::size_t>(h ^ (h >> 29));
}

GrammarAutomaton::GrammarAutomaton(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  ValidateGrammar(*grammar_);
  first_positions_.resize(grammar_->rules.size());
  for (std::size_t r = 0; r < grammar_->rules.size(); ++r) {
    for (const GrammarSequence& seq : grammar_->rules[r].alternatives) {
      first_positions_[r].push_back(seq.empty() ? -1 : static_cast<std::int32_t>(positions_.size()));
      for (std::size_t i = 0; i < seq.size(); ++i) positions_.push_back({seq[i], i + 1 == seq.size()});
    }
  }
  Expansion start;
  ExpandRule(grammar_->root, kEmpty, start);
  Intern(start);  // state 0, even if dead (a grammar has at least one finite sentence, so it is not)
}

std::int32_t GrammarAutomaton::Push(std::int32_t below, std::int32_t position) {
  const std::uint64_t key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(below)) << 32) |
                            static_cast<std::uint32_t>(position);
  const auto [it, inserted] = stack_ids_.try_emplace(key, static_cast<std::int32_t>(stacks_.size()));
  if (inserted) stacks_.push_back({position, below});
  return it->second;
}

std::int32_t GrammarAutomaton::PopTop(std::int32_t stack) {
  const Stack s = stacks_[static_cast<std::size_t>(stack)];
  // The next element of the same alternative, or (it was the last) whatever is below.
  return positions_[static_cast<std::size_t>(s.position)].last ? s.below : Push(s.below, s.position + 1);
}

void GrammarAutomaton::ExpandRule(int rule, std::int32_t continuation, Expansion& out) {
  for (const std::int32_t first : first_positions_[static_cast<std::size_t>(rule)])
    Expand(first < 0 ? continuation : Push(continuation, first), out);
}

void GrammarAutomaton::Expand(std::int32_t stack, Expansion& out) {
  if (stack == kEmpty) {
    out.accepting = true;
    return;
  }
  // Nullable rules can reach one configuration along several paths; expanding it twice only costs time.
  if (std::find(out.seen.begin(), out.seen.end(), stack) != out.seen.end()) return;
  out.seen.push_back(stack);
  const Position& top =
      positions_[static_cast<std::size_t>(stacks_[static_cast<std::size_t>(stack)].position)];
  if (top.element.kind == GrammarElement::Kind::kBytes) {
    out.stacks.push_back(stack);
    return;
  }
  // A reference: the rule's alternatives go on top of what follows the reference (tail call if it was last).
  ExpandRule(top.element.index, PopTop(stack), out);
}

GrammarAutomaton::State GrammarAutomaton::Intern(Expansion& e) {
  if (e.stacks.empty() && !e.accepting) return kDead;
  std::sort(e.stacks.begin(), e.stacks.end());
  e.stacks.erase(std::unique(e.stacks.begin(), e.stacks.end()), e.stacks.end());
  std::vector<std::int32_t> key = e.stacks;
  if (e.accepting) key.push_back(kEmpty);
  const auto [it, inserted] = state_ids_.try_emplace(std::move(key), static_cast<State>(states_.size()));
  if (inserted) states_.push_back({std::move(e.stacks), e.accepting, {}});
  return it->second;
}

GrammarAutomaton::State GrammarAutomaton::Compute(State state, std::uint8_t byte) {
  Expansion out;
  // A copy: interning below may grow states_ and move the vector this would otherwise point into.
  const std::vector<std::int32_t> stacks = states_[static_cast<std::size_t>(state)].stacks;
  for (const std::int32_t stack : stacks) {
    const Position& top =
        positions_[static_cast<std::size_t>(stacks_[static_cast<std::size_t>(stack)].position)];
    if (grammar_->byte_sets[static_cast<std::size_t>(top.element.index)].Has(byte))
      Expand(PopTop(stack), out);
  }
  return Intern(out);
}

GrammarAutomaton::State GrammarAutomaton::Next(State state, std::uint8_t byte) {
  if (state == kDead) return kDead;
  std::vector<State>* next = &states_[static_cast<std::size_t>(state)].next;
  if (next->empty()) {
    if (transition_tables_ == kMaxTransitionTables) {
      for (StateInfo& s : states_) std::vector<State>().swap(s.next);
      transition_tables_ = 0;
    }
    next->assign(256, kUnknown);
    ++transition_tables_;
  }
  State known = (*next)[byte];
  if (known != kUnknown) return known;
  known = Compute(state, byte);
  // Compute may have grown states_ (and moved this state's table with it): look it up again.
  states_[static_cast<std::size_t>(state)].next[byte] = known;
  return known;
}

GrammarAutomaton::State GrammarAutomaton::Walk(State state, std::string_view bytes) {
  for (const char c : bytes) {
    if (state == kDead) break;
    state = Next(state, static_cast<std::uint8_t>(c));
  }
  return state;
}

bool GrammarAutomaton::Accepting(State state) const {
  return state != kDead && states_.at(static_cast<std::size_t>(state)).accepting;
}

bool GrammarAutomaton::CanContinue(State state) const {
  return state != kDead && !states_.at(static_cast<std::size_t>(state)).stacks.empty();
}

}  // namespace plumb
