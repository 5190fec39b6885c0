#include "plumb/sample/token_vocabulary.h"

#include <algorithm>
#include <numeric>

namespace plumb {

TokenVocabulary::TokenVocabulary(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {
  std::fill(std::begin(byte_token_), std::end(byte_token_), -1);
  std::vector<std::int32_t> order(pieces_.size());
  std::iota(order.begin(), order.end(), 0);
  std::erase_if(order, [&](std::int32_t id) { return pieces_[static_cast<std::size_t>(id)].empty(); });
  // Sorted, a prefix comes right before the pieces that extend it and equal pieces sit together: the
  // preorder of the trie. Ties by id so that the build does not depend on the sort's stability.
  std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    const std::string& pa = pieces_[static_cast<std::size_t>(a)];
    const std::string& pb = pieces_[static_cast<std::size_t>(b)];
    return pa != pb ? pa < pb : a < b;
  });
  std::vector<std::int32_t> path;  // path[d]: the node of the current prefix of length d + 1
  const std::string* previous = nullptr;
  for (const std::int32_t id : order) {
    const std::string& p = pieces_[static_cast<std::size_t>(id)];
    std::size_t common = 0;
    if (previous) {
      const std::size_t limit = std::min(previous->size(), p.size());
      while (common < limit && (*previous)[common] == p[common]) ++common;
    }
    for (; path.size() > common; path.pop_back())
      nodes_[static_cast<std::size_t>(path.back())].subtree_end = static_cast<std::int32_t>(nodes_.size());
    for (std::size_t d = common; d < p.size(); ++d) {
      path.push_back(static_cast<std::int32_t>(nodes_.size()));
      const auto at = static_cast<std::int32_t>(node_tokens_.size());
      nodes_.push_back({static_cast<std::uint8_t>(p[d]), static_cast<std::int32_t>(d + 1), 0, at, at});
    }
    // Equal pieces are adjacent in `order`, so a node's tokens are contiguous in node_tokens_.
    node_tokens_.push_back(id);
    nodes_[static_cast<std::size_t>(path.back())].tokens_end = static_cast<std::int32_t>(node_tokens_.size());
    if (p.size() == 1 && byte_token_[static_cast<std::uint8_t>(p[0])] < 0)
      byte_token_[static_cast<std::uint8_t>(p[0])] = id;
    max_depth_ = std::max(max_depth_, static_cast<int>(p.size()));
    previous = &p;
  }
  for (const std::int32_t n : path)
    nodes_[static_cast<std::size_t>(n)].subtree_end = static_cast<std::int32_t>(nodes_.size());
}

}  // namespace plumb
