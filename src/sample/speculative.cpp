// Speculative decoding's verification rule; the definition is documented in
// include/plumb/sample/speculative.h.
#include "plumb/sample/speculative.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <ostream>

#include "plumb/core/error.h"

namespace plumb {
namespace {

// How errors name a list: "target distribution 2".
struct ListName {
  const char* kind;
  std::size_t index;
};
std::ostream& operator<<(std::ostream& out, const ListName& name) {
  return out << name.kind << " distribution " << name.index;
}

// Checks one candidate list: non-empty, ids >= 0, probabilities finite and >= 0. Returns its largest id.
int CheckedMaxToken(std::span<const Candidate> list, const ListName& what) {
  if (list.empty()) throw MakeError("VerifyDraft: ", what, " is empty");
  int max_token = 0;
  for (const Candidate& c : list) {
    if (c.token < 0) throw MakeError("VerifyDraft: ", what, " has a negative token id ", c.token);
    if (!std::isfinite(c.prob) || c.prob < 0.0f)
      throw MakeError("VerifyDraft: ", what, " gives token ", c.token, " probability ", c.prob,
                      " (must be finite and >= 0)");
    max_token = std::max(max_token, c.token);
  }
  return max_token;
}

// A token listed twice in one list has no single probability: an error. `last_list[t]` is the index of the
// last list that held token t (-1 for none), shared by all lists so that the check costs one pass each.
void CheckNoDuplicates(std::span<const Candidate> list, const ListName& what, std::vector<int>& last_list) {
  const int index = static_cast<int>(what.index);
  for (const Candidate& c : list) {
    int& last = last_list[static_cast<std::size_t>(c.token)];
    if (last == index) throw MakeError("VerifyDraft: ", what, " lists token ", c.token, " twice");
    last = index;
  }
}

// The probability of `token` in `list`, 0 if it is absent.
double ProbabilityOf(std::span<const Candidate> list, int token) {
  for (const Candidate& c : list)
    if (c.token == token) return c.prob;
  return 0.0;
}

// Zero-probability candidates dropped, then CandidateDistribution's order: descending probability, ties by
// ascending id (on the float values the list holds, so the list is sorted as it is read).
std::vector<Candidate> Sorted(std::vector<Candidate> list) {
  std::erase_if(list, [](const Candidate& c) { return c.prob == 0.0f; });
  std::sort(list.begin(), list.end(), [](const Candidate& a, const Candidate& b) {
    return a.prob > b.prob || (a.prob == b.prob && a.token < b.token);
  });
  return list;
}

// normalise(max(0, p − q)) over p's support (where p = 0 the residual is 0), in double, or no candidates
// when its total is 0. `tokens` bounds the ids (the largest + 1).
std::vector<Candidate> Residual(std::span<const Candidate> p, std::span<const Candidate> q, int tokens) {
  std::vector<double> dense_q(static_cast<std::size_t>(tokens), 0.0);
  for (const Candidate& c : q) dense_q[static_cast<std::size_t>(c.token)] = c.prob;
  std::vector<double> mass(p.size());
  double total = 0.0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    mass[i] = std::max(0.0, static_cast<double>(p[i].prob) - dense_q[static_cast<std::size_t>(p[i].token)]);
    total += mass[i];
  }
  std::vector<Candidate> residual;
  if (total <= 0.0) return residual;
  residual.reserve(p.size());
  for (std::size_t i = 0; i < p.size(); ++i)
    if (mass[i] > 0.0) residual.push_back({p[i].token, static_cast<float>(mass[i] / total)});
  return residual;
}

}  // namespace

DraftVerdict VerifyDraft(std::span<const std::vector<Candidate>> target,
                         std::span<const std::vector<Candidate>> draft, std::span<const int> draft_tokens,
                         std::span<const double> uniforms) {
  const std::size_t k = draft_tokens.size();
  if (draft.size() != k)
    throw MakeError("VerifyDraft: ", draft.size(), " draft distributions for ", k,
                    " draft tokens (one per draft token)");
  if (target.size() != k + 1)
    throw MakeError("VerifyDraft: ", target.size(), " target distributions for ", k,
                    " draft tokens (k + 1 = ", k + 1, " needed: one per draft token and one for the bonus)");
  if (uniforms.size() != k + 1)
    throw MakeError("VerifyDraft: ", uniforms.size(), " uniforms for ", k, " draft tokens (k + 1 = ", k + 1,
                    " needed)");
  for (std::size_t i = 0; i <= k; ++i) {
    if (!(uniforms[i] >= 0.0 && uniforms[i] < 1.0))  // also rejects NaN
      throw MakeError("VerifyDraft: uniform ", i, " must be in [0, 1), got ", uniforms[i]);
  }
  for (std::size_t i = 0; i < k; ++i) {
    if (draft_tokens[i] < 0) throw MakeError("VerifyDraft: draft token ", i, " is ", draft_tokens[i]);
  }
  // Every list is checked, also those past the first rejection: bad input is an error wherever it is, not
  // only when the uniforms happen to reach it.
  int max_token = 0;
  for (std::size_t i = 0; i <= k; ++i)
    max_token = std::max(max_token, CheckedMaxToken(target[i], {"target", i}));
  for (std::size_t i = 0; i < k; ++i)
    max_token = std::max(max_token, CheckedMaxToken(draft[i], {"draft", i}));
  std::vector<int> last_list(static_cast<std::size_t>(max_token) + 1, -1);
  for (std::size_t i = 0; i <= k; ++i) CheckNoDuplicates(target[i], {"target", i}, last_list);
  std::fill(last_list.begin(), last_list.end(), -1);
  for (std::size_t i = 0; i < k; ++i) CheckNoDuplicates(draft[i], {"draft", i}, last_list);

  DraftVerdict verdict;
  std::size_t n = 0;
  while (n < k) {
    const int x = draft_tokens[n];
    if (!(uniforms[n] * ProbabilityOf(draft[n], x) < ProbabilityOf(target[n], x))) break;
    verdict.tokens.push_back(x);
    ++n;
  }
  verdict.accepted = static_cast<int>(n);
  if (n < k) verdict.last_distribution = Residual(target[n], draft[n], max_token + 1);
  // All accepted: the bonus token from p_k. A residual of total 0 (rounding only, see the header): p_n.
  if (verdict.last_distribution.empty())
    verdict.last_distribution = std::vector<Candidate>(target[n].begin(), target[n].end());
  verdict.last_distribution = Sorted(std::move(verdict.last_distribution));
  if (verdict.last_distribution.empty())
    throw MakeError("VerifyDraft: target distribution ", n, " has no token of positive probability");
  // u_k, never u_n: given a rejection at n, u_n is no longer uniform (it lies in [p/q, 1)).
  verdict.tokens.push_back(Sampler::SampleWithUniform(verdict.last_distribution, uniforms[k]));
  return verdict;
}

double ExpectedTokensPerStep(double alpha, int k) {
  if (!(alpha >= 0.0 && alpha <= 1.0))
    throw MakeError("acceptance rate alpha must be in [0, 1], got ", alpha);
  if (k < 0) throw MakeError("number of draft tokens k must be >= 0, got ", k);
  // Horner's Σ_{i=0..k} α^i: equal to (1 − α^(k+1)) / (1 − α) without its cancellation near α = 1.
  double tokens = 1.0;
  for (int i = 0; i < k; ++i) tokens = 1.0 + alpha * tokens;
  return tokens;
}

double ExpectedSpeedup(double alpha, int k, double draft_cost, double verify_cost) {
  const double tokens = ExpectedTokensPerStep(alpha, k);
  if (!(std::isfinite(draft_cost) && draft_cost >= 0.0))
    throw MakeError("draft cost must be a finite number >= 0 (target decode steps per draft token), got ",
                    draft_cost);
  if (!(std::isfinite(verify_cost) && verify_cost > 0.0))
    throw MakeError("verify cost must be a finite number > 0 (target decode steps), got ", verify_cost);
  return tokens / (k * draft_cost + verify_cost);
}

}  // namespace plumb
