#include "plumb/sample/token_constraint.h"

#include <algorithm>
#include <limits>

#include "plumb/core/error.h"

namespace plumb {
namespace {

// Masks are vocabulary/8 bytes each (6 KiB for 49 152 tokens); past this many states the cache starts over.
constexpr std::size_t kMaxCachedMasks = 1024;

}  // namespace

namespace {

// The bytes the vocabulary has a one-byte token for.
ByteSet SpellableBytes(const TokenVocabulary& vocabulary) {
  ByteSet bytes;
  for (int b = 0; b < 256; ++b) {
    if (vocabulary.HasByteToken(static_cast<std::uint8_t>(b))) bytes.Add(static_cast<std::uint8_t>(b));
  }
  return bytes;
}

}  // namespace

TokenConstraint::TokenConstraint(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocabulary,
                                 std::vector<int> end_ids)
    : vocabulary_(std::move(vocabulary)), end_ids_(std::move(end_ids)) {
  if (end_ids_.empty())
    throw MakeError("constrained decoding needs an end-of-generation token to end the document with");
  for (const int id : end_ids_) {
    if (id < 0 || id >= vocabulary_->size())
      throw MakeError("constrained decoding: end id ", id, " is outside the vocabulary of ",
                      vocabulary_->size());
  }
  // Completion by tokens rests on this: every byte the grammar may want next is a token of its own. So the
  // grammar is cut to the bytes that are; in a byte-level BPE vocabulary no token holds the others either
  // (merges are made of single bytes), so the model could not have written them anyway.
  try {
    grammar_ =
        std::make_shared<const Grammar>(RestrictBytes(std::move(grammar), SpellableBytes(*vocabulary_)));
  } catch (const Error& e) {
    throw MakeError("constrained decoding: this vocabulary cannot spell any document of the grammar (",
                    e.what(), ")");
  }
}

bool TokenConstraint::IsEnd(int token) const {
  return std::find(end_ids_.begin(), end_ids_.end(), token) != end_ids_.end();
}

TokenMatcher::TokenMatcher(std::shared_ptr<const TokenConstraint> constraint)
    : constraint_(std::move(constraint)), automaton_(constraint_->grammar()), state_(automaton_.Start()) {}

std::span<const std::uint64_t> TokenMatcher::Allowed() {
  if (ended_) throw MakeError("constrained decoding: nothing may follow the end of the document");
  if (const auto it = masks_.find(state_); it != masks_.end()) return it->second;
  if (masks_.size() == kMaxCachedMasks) masks_.clear();

  const TokenVocabulary& vocab = constraint_->vocabulary();
  std::vector<std::uint64_t> mask((static_cast<std::size_t>(vocab.size()) + 63) / 64, 0);
  const std::span<const TokenVocabulary::Node> nodes = vocab.nodes();
  const std::span<const std::int32_t> tokens = vocab.tokens();
  walk_.assign(static_cast<std::size_t>(vocab.max_depth()) + 1, GrammarAutomaton::kDead);
  walk_[0] = state_;
  // Preorder: a node's parent is the last node visited one level up, whose state walk_ holds.
  for (std::size_t i = 0; i < nodes.size();) {
    const TokenVocabulary::Node& node = nodes[i];
    const GrammarAutomaton::State s =
        automaton_.Next(walk_[static_cast<std::size_t>(node.depth - 1)], node.byte);
    if (s == GrammarAutomaton::kDead) {
      i = static_cast<std::size_t>(node.subtree_end);
      continue;
    }
    walk_[static_cast<std::size_t>(node.depth)] = s;
    for (std::int32_t t = node.tokens_begin; t < node.tokens_end; ++t) {
      const auto id = static_cast<std::size_t>(tokens[static_cast<std::size_t>(t)]);
      mask[id / 64] |= std::uint64_t{1} << (id % 64);
    }
    ++i;
  }
  // End ids mean "the document is over", whatever text their pieces have.
  const bool complete = automaton_.Accepting(state_);
  for (const int id : constraint_->end_ids()) {
    const auto u = static_cast<std::size_t>(id);
    mask[u / 64] = complete ? mask[u / 64] | (std::uint64_t{1} << (u % 64))
                            : mask[u / 64] & ~(std::uint64_t{1} << (u % 64));
  }
  // When nothing can follow (complete, no configuration left) no trie node is alive: the end ids are all
  // that is allowed, and the sampler is forced to end.
  return masks_.emplace(state_, std::move(mask)).first->second;
}

bool TokenMatcher::IsAllowed(int token) {
  if (token < 0 || token >= constraint_->vocabulary().size()) return false;
  const std::span<const std::uint64_t> mask = Allowed();
  const auto u = static_cast<std::size_t>(token);
  return (mask[u / 64] >> (u % 64)) & 1;
}

void TokenMatcher::Apply(std::span<float> logits) {
  const std::span<const std::uint64_t> mask = Allowed();
  const std::size_t vocab = static_cast<std::size_t>(constraint_->vocabulary().size());
  const float minus_inf = -std::numeric_limits<float>::infinity();
  for (std::size_t i = 0; i < logits.size(); ++i) {
    if (i >= vocab || !((mask[i / 64] >> (i % 64)) & 1)) logits[i] = minus_inf;
  }
}

void TokenMatcher::Accept(int token) {
  if (!IsAllowed(token))
    throw MakeError("constrained decoding: token ", token, " is not allowed here by the grammar");
  if (constraint_->IsEnd(token)) {
    ended_ = true;
    return;
  }
  state_ = automaton_.Walk(state_, constraint_->vocabulary().piece(token));
}

bool TokenMatcher::Complete() const {
  return automaton_.Accepting(state_);
}

}  // namespace plumb
