// engine/log_probs.h: the log-softmax of a row in double, and a position's top tokens in order.
#include "plumb/engine/log_probs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace plumb {
namespace {

TEST(LogProbs, AreTheLogSoftmaxInDouble) {
  const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f};
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l));
  const PositionLogprobs p = ScorePosition(logits, 2, 0);
  EXPECT_EQ(p.token, 2);
  EXPECT_NEAR(p.logprob, -2.0 - std::log(sum), 1e-14);
  EXPECT_TRUE(p.top.empty());
}

TEST(LogProbs, TopTokensDescendTiesByLowerIdAndStopAtTheVocabulary) {
  const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f};
  const PositionLogprobs p = ScorePosition(logits, 0, 10);
  ASSERT_EQ(p.top.size(), 4u);
  EXPECT_EQ(p.top[0].token, 1);
  EXPECT_EQ(p.top[1].token, 3);
  EXPECT_EQ(p.top[2].token, 0);
  EXPECT_EQ(p.top[3].token, 2);
  EXPECT_EQ(p.top[2].logprob, p.logprob);
}

TEST(LogProbs, AMaskedTokenIsMinusInfinityAndANanRanksBelowEveryNumber) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {std::nanf(""), 0.0f, -inf};
  const PositionLogprobs p = ScorePosition(std::vector<float>{0.0f, -inf}, 1, 1);
  EXPECT_EQ(p.logprob, -std::numeric_limits<double>::infinity());
  const PositionLogprobs broken = ScorePosition(logits, 1, 3);  // sorted without UB: NaN as -inf
  ASSERT_EQ(broken.top.size(), 3u);
  EXPECT_EQ(broken.top[0].token, 1);
}

}  // namespace
}  // namespace plumb
