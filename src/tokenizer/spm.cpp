// SentencePiece BPE as llama.cpp's llm_tokenizer_spm runs it: start from the text's characters and repeatedly
// merge the adjacent pair whose concatenation is the token with the highest score (the leftmost pair among
// equal scores). Characters no token covers become byte tokens.
#include <queue>
#include <vector>

#include "plumb/tokenizer/unicode.h"
#include "tokenizer_impl.h"

namespace plumb {
namespace {

struct Symbol {
  std::size_t start;
  std::size_t length;  // 0 once merged into its left neighbour
  std::int32_t prev;
  std::int32_t next;
};

struct Bigram {
  float score;
  std::int32_t left;
  std::int32_t right;
  std::size_t length;  // of the merged text, to recognize a stale bigram
  bool operator<(const Bigram& o) const { return score != o.score ? score < o.score : left > o.left; }
};

}  // namespace

void Tokenizer::Impl::EncodeCharsByScore(std::string_view text, std::vector<std::int32_t>& out) const {
  std::vector<Symbol> symbols;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = std::max<std::size_t>(1, unicode::WellFormedLength(text.substr(i)));
    const auto index = static_cast<std::int32_t>(symbols.size());
    symbols.push_back({i, n, index - 1, i + n < text.size() ? index + 1 : -1});
    i += n;
  }
  std::priority_queue<Bigram> queue;
  auto consider = [&](std::int32_t left, std::int32_t right) {
    if (left < 0 || right < 0) return;
    const std::size_t length = symbols[left].length + symbols[right].length;
    const std::int32_t id = FindText(text.substr(symbols[left].start, length));
    if (id >= 0) queue.push({spec.scores[id], left, right, length});
  };
  for (std::int32_t i = 1; i < static_cast<std::int32_t>(symbols.size()); ++i) consider(i - 1, i);
  while (!queue.empty()) {
    const Bigram top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.left];
    Symbol& right = symbols[top.right];
    if (left.length == 0 || right.length == 0 || left.next != top.right ||
        left.length + right.length != top.length) {
      continue;  // one side was merged with something else since
    }
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;
    consider(left.prev, top.left);
    consider(top.left, left.next);
  }
  for (std::int32_t i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].start, symbols[i].length);
    if (std::int32_t id = FindText(piece); id >= 0) {
      out.push_back(id);
    } else {
      AppendBytes(piece, out);  // only single characters can be missing: merges always make tokens
    }
  }
}

}  // namespace plumb
