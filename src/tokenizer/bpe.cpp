// BPE by merge rank, as HF tokenizers' Word::merge_all and llama.cpp's llm_tokenizer_bpe do it: repeatedly
// merge the adjacent pair with the lowest rank, the leftmost one among equals.
#include <queue>
#include <vector>

#include "plumb/tokenizer/unicode.h"
#include "tokenizer_impl.h"

namespace plumb {
namespace {

struct Candidate {
  std::int32_t rank;
  std::int32_t left;  // index of the left symbol
  std::int32_t left_id;
  std::int32_t right_id;
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
};

std::uint64_t PairKey(std::int32_t left, std::int32_t right) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) |
         static_cast<std::uint32_t>(right);
}

}  // namespace

void Tokenizer::Impl::MergeByRank(std::vector<std::int32_t>& symbols) const {
  const auto n = static_cast<std::int32_t>(symbols.size());
  if (n < 2) return;
  // A doubly linked list over the symbols; a merged-away symbol gets id -1.
  std::vector<std::int32_t> prev(n), next(n);
  for (std::int32_t i = 0; i < n; ++i) prev[i] = i - 1, next[i] = i + 1 < n ? i + 1 : -1;
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto consider = [&](std::int32_t left) {
    if (left < 0 || next[left] < 0) return;
    const std::int32_t right = next[left];
    auto it = merges.find(PairKey(symbols[left], symbols[right]));
    if (it != merges.end()) queue.push({it->second.rank, left, symbols[left], symbols[right]});
  };
  for (std::int32_t i = 0; i + 1 < n; ++i) consider(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    // Stale when either symbol has changed since the candidate was found.
    const std::int32_t right = next[top.left];
    if (symbols[top.left] != top.left_id || right < 0 || symbols[right] != top.right_id) continue;
    symbols[top.left] = merges.at(PairKey(top.left_id, top.right_id)).result;
    symbols[right] = -1;
    next[top.left] = next[right];
    if (next[right] >= 0) prev[next[right]] = top.left;
    consider(prev[top.left]);
    consider(top.left);
  }
  std::erase(symbols, -1);
}

void Tokenizer::Impl::EncodeByteLevelPiece(std::string_view piece, std::vector<std::int32_t>& out) const {
  if (spec.ignore_merges) {
    std::string mapped;
    for (char c : piece) mapped += byte_symbols[static_cast<std::uint8_t>(c)];
    if (std::int32_t id = Find(mapped); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<std::int32_t> symbols;
  symbols.reserve(piece.size());
  for (char c : piece) {
    const std::int32_t id = byte_tokens[static_cast<std::uint8_t>(c)];
    if (id >= 0) {
      symbols.push_back(id);
    } else if (spec.unk_id >= 0) {
      symbols.push_back(spec.unk_id);  // a vocabulary without this byte's symbol
    }
  }
  MergeByRank(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
}

void Tokenizer::Impl::EncodeCharsByRank(std::string_view text, std::vector<std::int32_t>& out) const {
  // HF's BPE with byte_fallback: each character is its token, or its bytes' <0xAB> tokens.
  std::vector<std::int32_t> symbols;
  symbols.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = std::max<std::size_t>(1, unicode::WellFormedLength(text.substr(i)));
    const std::string_view ch = text.substr(i, n);
    if (std::int32_t id = FindText(ch); id >= 0) {
      symbols.push_back(id);
    } else {
      AppendBytes(ch, symbols);
    }
    i += n;
  }
  MergeByRank(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
}

}  // namespace plumb
