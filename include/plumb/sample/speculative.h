// Speculative decoding's verification step (Leviathan et al. 2023, "Fast Inference from Transformers via
// Speculative Decoding"; Chen et al. 2023): a draft proposes k tokens, the target scores all of them in one
// step, and the rule below decides how many to keep. The random numbers are inputs, so every decision is
// exactly reproducible, and the emitted tokens are distributed exactly as the target's alone would be.
//
// The rule, which is the definition the fixture op `speculative_verify` (docs/fixtures.md) follows:
//
//   Inputs: target distributions p_0..p_k (p_i is the target's next-token distribution after the prefix and
//   draft tokens x_0..x_{i-1}), draft distributions q_0..q_{k-1}, draft tokens x_0..x_{k-1} (x_i drawn from
//   q_i), uniforms u_0..u_k in [0, 1). A token absent from a candidate list has probability 0; probabilities
//   are read as double.
//   1. For i = 0, 1, ..., k-1: accept x_i iff u_i · q_i(x_i) < p_i(x_i), computed in double. That is
//      acceptance with probability min(1, p_i(x_i) / q_i(x_i)); q_i(x_i) = 0 (a draft token its own draft
//      could not have drawn) accepts iff p_i(x_i) > 0, the limit of that ratio. Stop at the first rejection;
//      n is the number accepted.
//   2. The last token's distribution: on rejection at n < k, the residual
//      r(x) = max(0, p_n(x) − q_n(x)) / Σ_y max(0, p_n(y) − q_n(y)), in double, each value then rounded to
//      float; when all k are accepted, p_k itself (the bonus token). If the residual's total is 0, which only
//      float rounding of p_n and q_n can cause (p_n ≤ q_n everywhere means p_n = q_n as distributions, and
//      then rejection had probability 0), p_n is used instead.
//   3. That distribution, zero-probability tokens dropped and sorted as CandidateDistribution sorts
//      (descending probability, ties by ascending token id), gives the last token by
//      Sampler::SampleWithUniform(distribution, u_k): always u_k, whatever n (given a rejection at n, u_n is
//      no longer uniform). Emitted: x_0..x_{n-1}, then that token: n + 1 tokens. u_{n+1}..u_{k-1} are unused.
//
// Greedy verification is the special case where every p_i is a point mass at the target's argmax
// (CandidateDistribution at temperature 0): x_i is accepted iff it is that argmax (u·q < 1 always, u·q < 0
// never), and on rejection the residual is the argmax alone, so the output is exactly the target's greedy
// output, whatever the draft and the uniforms.
//
// Why it samples from p (the standard argument): P(emit x at position n) = q(x)·min(1, p(x)/q(x)) +
// (1 − Σ_y min(p(y), q(y)))·r(x) = min(p(x), q(x)) + max(0, p(x) − q(x)) = p(x).
#pragma once

#include <span>
#include <vector>

#include "plumb/sample/sampler.h"

namespace plumb {

struct DraftVerdict {
  int accepted = 0;         // n in [0, k]: how many draft tokens were accepted
  std::vector<int> tokens;  // n + 1 tokens: the n accepted drafts, then the target's own token (the
                            // correction drawn from the residual on rejection, the bonus drawn from p_k when
                            // all k accepted)
  std::vector<Candidate> last_distribution;  // what the last token was drawn from: normalise(max(0, p_n −
                                             // q_n)) on rejection at n, p_k when all accepted; sorted as
                                             // CandidateDistribution sorts, zero-probability tokens dropped
};

// The rule above. target: k + 1 distributions p_0..p_k (CandidateDistribution of the target's logits at each
// verified position); draft: the k distributions q_0..q_{k-1} the draft tokens were drawn from (an n-gram or
// other deterministic drafter passes point masses {{token, 1.0f}}); draft_tokens: k ids; uniforms: k + 1
// values in [0, 1). A list need not be sorted. Throws plumb::Error on inconsistent sizes, a uniform outside
// [0, 1), an empty distribution, a negative token id, a token listed twice in one distribution, a
// probability that is negative or not finite, or a last distribution with no token of positive probability.
DraftVerdict VerifyDraft(std::span<const std::vector<Candidate>> target,
                         std::span<const std::vector<Candidate>> draft, std::span<const int> draft_tokens,
                         std::span<const double> uniforms);

// Expected tokens emitted per target step with per-token acceptance rate alpha in [0, 1] and k drafts
// (Leviathan et al. eq. 1, with the acceptances independent): Σ_{i=0..k} α^i = (1 − α^(k+1)) / (1 − α),
// and k + 1 at α = 1. Computed as the sum, which has no 0/0 as α → 1. Throws plumb::Error for alpha outside
// [0, 1] or k < 0.
double ExpectedTokensPerStep(double alpha, int k);

// Expected speedup over the target alone when one draft token costs `draft_cost` target decode steps (c)
// and verifying k + 1 tokens costs `verify_cost` target steps (about 1 while decode is bandwidth-bound):
// ExpectedTokensPerStep(alpha, k) / (k·c + verify_cost) (Leviathan et al. theorem 3.8, the walltime
// improvement, with verify_cost = 1). Throws plumb::Error for draft_cost < 0 or verify_cost <= 0 (or
// either not finite), and as ExpectedTokensPerStep.
double ExpectedSpeedup(double alpha, int k, double draft_cost, double verify_cost = 1.0);

}  // namespace plumb
