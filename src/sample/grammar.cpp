#include "plumb/sample/grammar.h"

#include <cstdio>

#include "plumb/core/error.h"

namespace plumb {

ByteSet ByteSet::Of(std::uint8_t byte) {
  return ByteSet().Add(byte);
}
ByteSet ByteSet::Range(std::uint8_t first, std::uint8_t last) {
  return ByteSet().AddRange(first, last);
}

ByteSet& ByteSet::Add(std::uint8_t byte) {
  bits_[byte >> 6] |= std::uint64_t{1} << (byte & 63);
  return *this;
}

ByteSet& ByteSet::AddRange(std::uint8_t first, std::uint8_t last) {
  for (int b = first; b <= last; ++b) Add(static_cast<std::uint8_t>(b));
  return *this;
}

ByteSet& ByteSet::Remove(std::uint8_t byte) {
  bits_[byte >> 6] &= ~(std::uint64_t{1} << (byte & 63));
  return *this;
}

ByteSet& ByteSet::Union(const ByteSet& other) {
  for (int i = 0; i < 4; ++i) bits_[i] |= other.bits_[i];
  return *this;
}

ByteSet& ByteSet::Intersect(const ByteSet& other) {
  for (int i = 0; i < 4; ++i) bits_[i] &= other.bits_[i];
  return *this;
}

bool ByteSet::Empty() const {
  return (bits_[0] | bits_[1] | bits_[2] | bits_[3]) == 0;
}

GrammarElement GrammarBuilder::Bytes(const ByteSet& set) {
  // Grammars hold a few hundred distinct sets at most (single bytes and a few classes): a linear search.
  for (std::size_t i = 0; i < grammar_.byte_sets.size(); ++i) {
    if (grammar_.byte_sets[i] == set) return {GrammarElement::Kind::kBytes, static_cast<int>(i)};
  }
  grammar_.byte_sets.push_back(set);
  return {GrammarElement::Kind::kBytes, static_cast<int>(grammar_.byte_sets.size() - 1)};
}

GrammarSequence GrammarBuilder::Literal(std::string_view bytes) {
  GrammarSequence seq;
  for (const char c : bytes) seq.push_back(Bytes(ByteSet::Of(static_cast<std::uint8_t>(c))));
  return seq;
}

int GrammarBuilder::Declare(std::string name) {
  grammar_.rules.push_back({std::move(name), {}});
  return static_cast<int>(grammar_.rules.size() - 1);
}

void GrammarBuilder::Define(int rule, std::vector<GrammarSequence> alternatives) {
  grammar_.rules.at(static_cast<std::size_t>(rule)).alternatives = std::move(alternatives);
}

int GrammarBuilder::Add(std::string name, std::vector<GrammarSequence> alternatives) {
  const int rule = Declare(std::move(name));
  Define(rule, std::move(alternatives));
  return rule;
}

int GrammarBuilder::Repeat(std::string name, const GrammarSequence& item, int min, int max) {
  GrammarSequence body;
  for (int i = 0; i < min; ++i) body.insert(body.end(), item.begin(), item.end());
  if (max < 0) {
    const int star = Declare(name + "*");
    Define(star, {Concat({item, {Ref(star)}}), {}});
    body.push_back(Ref(star));
  } else {
    // optional_k matches 0..k items: item optional_{k-1} | empty.
    int optional = -1;
    for (int k = 1; k <= max - min; ++k) {
      GrammarSequence more = item;
      if (optional >= 0) more.push_back(Ref(optional));
      optional = Add(name + "?" + std::to_string(k), {more, {}});
    }
    if (optional >= 0) body.push_back(Ref(optional));
  }
  return Add(std::move(name), {body});
}

Grammar GrammarBuilder::Build(int root) {
  grammar_.root = root;
  ValidateGrammar(grammar_);
  return grammar_;
}

GrammarSequence Concat(std::initializer_list<GrammarSequence> parts) {
  GrammarSequence seq;
  for (const GrammarSequence& p : parts) seq.insert(seq.end(), p.begin(), p.end());
  return seq;
}

namespace {

// The least set of rules with an alternative all of whose elements are in the set, where a byte element
// counts as in the set iff `bytes_count` (and its set is not empty). With bytes_count = true that is the
// productive rules, with false the rules that match the empty string. A worklist, linear in grammar size:
// repetition chains make grammars of thousands of rules, where a pass-until-nothing-changes would not be.
std::vector<char> LeastFixpoint(const Grammar& g, bool bytes_count) {
  struct Alt {
    int rule;
    int pending;  // elements not yet known to be in the set
  };
  std::vector<Alt> alts;
  std::vector<std::vector<int>> used_by(g.rules.size());  // rule -> alternatives, once per occurrence
  std::vector<char> in(g.rules.size(), 0);
  std::vector<int> ready;  // rules found in the set, whose users are still to be told
  for (std::size_t r = 0; r < g.rules.size(); ++r) {
    for (const GrammarSequence& seq : g.rules[r].alternatives) {
      const int a = static_cast<int>(alts.size());
      alts.push_back({static_cast<int>(r), 0});
      for (const GrammarElement& e : seq) {
        if (e.kind == GrammarElement::Kind::kRule) {
          used_by[static_cast<std::size_t>(e.index)].push_back(a);
          ++alts[static_cast<std::size_t>(a)].pending;
        } else if (!bytes_count || g.byte_sets[static_cast<std::size_t>(e.index)].Empty()) {
          alts[static_cast<std::size_t>(a)].pending = 1 << 30;  // never satisfied
        }
      }
      if (alts[static_cast<std::size_t>(a)].pending == 0 && !in[r]) {
        in[r] = 1;
        ready.push_back(static_cast<int>(r));
      }
    }
  }
  while (!ready.empty()) {
    const int r = ready.back();
    ready.pop_back();
    for (const int a : used_by[static_cast<std::size_t>(r)]) {
      Alt& alt = alts[static_cast<std::size_t>(a)];
      if (--alt.pending == 0 && !in[static_cast<std::size_t>(alt.rule)]) {
        in[static_cast<std::size_t>(alt.rule)] = 1;
        ready.push_back(alt.rule);
      }
    }
  }
  return in;
}

}  // namespace

void ValidateGrammar(const Grammar& g) {
  const int n = static_cast<int>(g.rules.size());
  if (g.root < 0 || g.root >= n) throw MakeError("grammar: root rule ", g.root, " is not one of its ", n);
  for (const GrammarRule& rule : g.rules) {
    for (const GrammarSequence& seq : rule.alternatives) {
      for (const GrammarElement& e : seq) {
        const int limit = e.kind == GrammarElement::Kind::kRule ? n : static_cast<int>(g.byte_sets.size());
        if (e.index < 0 || e.index >= limit)
          throw MakeError("grammar: rule ", rule.name, " refers to element ", e.index, " of ", limit);
      }
    }
  }
  const std::vector<char> productive = LeastFixpoint(g, true);
  std::vector<char> reachable(static_cast<std::size_t>(n), 0);
  std::vector<int> todo{g.root};
  reachable[static_cast<std::size_t>(g.root)] = 1;
  while (!todo.empty()) {
    const int r = todo.back();
    todo.pop_back();
    for (const GrammarSequence& seq : g.rules[static_cast<std::size_t>(r)].alternatives) {
      for (const GrammarElement& e : seq) {
        if (e.kind == GrammarElement::Kind::kRule && !reachable[static_cast<std::size_t>(e.index)]) {
          reachable[static_cast<std::size_t>(e.index)] = 1;
          todo.push_back(e.index);
        }
      }
    }
  }
  for (int r = 0; r < n; ++r) {
    if (reachable[static_cast<std::size_t>(r)] && !productive[static_cast<std::size_t>(r)])
      throw MakeError("grammar: rule ", g.rules[static_cast<std::size_t>(r)].name,
                      " matches no finite text (every way through it is endless or empty of choices)");
  }
  // Left recursion: a cycle in "rule r can begin with rule s" (s after only empty-matching elements).
  const std::vector<char> nullable = LeastFixpoint(g, false);
  std::vector<std::vector<int>> starts_with(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    for (const GrammarSequence& seq : g.rules[static_cast<std::size_t>(r)].alternatives) {
      for (const GrammarElement& e : seq) {
        if (e.kind != GrammarElement::Kind::kRule) break;
        starts_with[static_cast<std::size_t>(r)].push_back(e.index);
        if (!nullable[static_cast<std::size_t>(e.index)]) break;
      }
    }
  }
  // Iterative depth-first search (grammars can be thousands of rules deep): 0 new, 1 on the path, 2 done.
  std::vector<char> color(static_cast<std::size_t>(n), 0);
  for (int start = 0; start < n; ++start) {
    if (color[static_cast<std::size_t>(start)]) continue;
    std::vector<std::pair<int, std::size_t>> path{{start, 0}};
    color[static_cast<std::size_t>(start)] = 1;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      const std::vector<int>& succ = starts_with[static_cast<std::size_t>(r)];
      if (next == succ.size()) {
        color[static_cast<std::size_t>(r)] = 2;
        path.pop_back();
        continue;
      }
      const int s = succ[next++];
      if (color[static_cast<std::size_t>(s)] == 1)
        throw MakeError("grammar: rule ", g.rules[static_cast<std::size_t>(s)].name,
                        " is left-recursive (it can begin with itself)");
      if (color[static_cast<std::size_t>(s)] == 0) {
        color[static_cast<std::size_t>(s)] = 1;
        path.push_back({s, 0});
      }
    }
  }
}

Grammar RestrictBytes(Grammar g, const ByteSet& allowed) {
  for (ByteSet& set : g.byte_sets) set.Intersect(allowed);
  const std::vector<char> productive = LeastFixpoint(g, true);
  if (g.root < 0 || g.root >= static_cast<int>(g.rules.size()) ||
      !productive[static_cast<std::size_t>(g.root)])
    throw MakeError("grammar: nothing it matches can be spelled with the bytes allowed");
  for (GrammarRule& rule : g.rules) {
    std::erase_if(rule.alternatives, [&](const GrammarSequence& seq) {
      for (const GrammarElement& e : seq) {
        if (e.kind == GrammarElement::Kind::kRule ? !productive[static_cast<std::size_t>(e.index)]
                                                  : g.byte_sets[static_cast<std::size_t>(e.index)].Empty())
          return true;
      }
      return false;
    });
  }
  ValidateGrammar(g);
  return g;
}

namespace {

std::string ByteText(int b) {
  if (b >= 0x21 && b < 0x7f && b != '\\' && b != ']' && b != '-' && b != '"') return std::string(1, char(b));
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02X", b);
  return buf;
}

std::string ByteSetText(const ByteSet& set) {
  std::string out = "[";
  for (int b = 0; b < 256;) {
    if (!set.Has(static_cast<std::uint8_t>(b))) {
      ++b;
      continue;
    }
    int e = b;
    while (e + 1 < 256 && set.Has(static_cast<std::uint8_t>(e + 1))) ++e;
    out += ByteText(b);
    if (e > b) {
      out += '-';
      out += ByteText(e);
    }
    b = e + 1;
  }
  return out + "]";
}

}  // namespace

std::string GrammarToString(const Grammar& g) {
  std::string out;
  for (std::size_t r = 0; r < g.rules.size(); ++r) {
    out += (static_cast<int>(r) == g.root ? "root " : "") + g.rules[r].name + " ::=";
    for (std::size_t a = 0; a < g.rules[r].alternatives.size(); ++a) {
      if (a) out += " |";
      for (const GrammarElement& e : g.rules[r].alternatives[a]) {
        out += " " + (e.kind == GrammarElement::Kind::kRule
                          ? g.rules[static_cast<std::size_t>(e.index)].name
                          : ByteSetText(g.byte_sets[static_cast<std::size_t>(e.index)]));
      }
      if (g.rules[r].alternatives[a].empty()) out += " ()";
    }
    out += "\n";
  }
  return out;
}

}  // namespace plumb
