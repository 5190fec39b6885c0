// TokenVocabulary: the bytes each token stands for, as a trie, for computing a grammar's token mask.
//
// Tokens that share a prefix share its trie nodes, so a walk that advances a GrammarAutomaton byte by byte
// down the trie advances it once per distinct prefix, not once per token byte, and skips a whole subtree
// the moment its prefix is dead. The nodes are stored in preorder with each node's subtree end, so the walk
// is a loop over an array (no recursion, no pointers).
//
// Built once per model (a few tens of milliseconds for 49 152 tokens) and shared, immutable, by every
// constraint over that model.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace plumb {

class TokenVocabulary {
 public:
  struct Node {
    std::uint8_t byte;          // the byte this node adds to its parent's prefix
    std::int32_t depth;         // its prefix's length (1 for children of the root)
    std::int32_t subtree_end;   // the index after its last descendant: where the walk goes when it is dead
    std::int32_t tokens_begin;  // [tokens_begin, tokens_end) in tokens(): the tokens spelled by this prefix
    std::int32_t tokens_end;
  };

  // pieces[id]: the bytes token `id` stands for (Tokenizer::TokenToPiece); "" for a token that stands for no
  // text (control tokens), which the trie leaves out: a grammar can never allow it.
  explicit TokenVocabulary(std::vector<std::string> pieces);

  int size() const { return static_cast<int>(pieces_.size()); }
  const std::string& piece(int id) const { return pieces_.at(static_cast<std::size_t>(id)); }
  // Some token is exactly this one byte: any byte string can be spelled with such tokens where all of its
  // bytes have one.
  bool HasByteToken(std::uint8_t byte) const { return byte_token_[byte] >= 0; }
  int ByteToken(std::uint8_t byte) const { return byte_token_[byte]; }

  std::span<const Node> nodes() const { return nodes_; }
  std::span<const std::int32_t> tokens() const { return node_tokens_; }
  int max_depth() const { return max_depth_; }

 private:
  std::vector<std::string> pieces_;
  std::vector<Node> nodes_;
  std::vector<std::int32_t> node_tokens_;
  int byte_token_[256];
  int max_depth_ = 0;
};

}  // namespace plumb
