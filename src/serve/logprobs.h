// OpenAI's `logprobs` objects, made from the log-probabilities the Scheduler records (engine/log_probs.h):
// chat's `{"content": [...]}` and the legacy completions' `{tokens, token_logprobs, top_logprobs,
// text_offset}`.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "plumb/engine/log_probs.h"
#include "plumb/tokenizer/tokenizer.h"

namespace plumb::serve {

// A token as OpenAI's logprobs show it. `bytes`: exactly the bytes it stands for, which for a byte-level BPE
// token may be part of a UTF-8 character; `text`: those bytes with U+FFFD for what is not valid UTF-8 (a
// lossy string, as OpenAI's `token`). A control token, which stands for no text (EOS), shows its name in the
// vocabulary ("<|im_end|>") as both.
struct TokenText {
  std::string text;
  std::string bytes;
};
TokenText ShowToken(const Tokenizer& tokenizer, int id);

// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}],
// "refusal": null}, one entry per position.
nlohmann::json ChatLogprobs(const Tokenizer& tokenizer, std::span<const PositionLogprobs> positions);

// Completions, as tokens arrive: each position's token, log-probability, a {token: logprob} object of the top
// ones (and the position's own token, as OpenAI's: up to logprobs + 1 entries) and text_offset, where the
// token's text begins in the response's text, in code points (a Python string's indices). A prompt's first
// token has no log-probability: null, as OpenAI's.
class CompletionLogprobs {
 public:
  explicit CompletionLogprobs(const Tokenizer& tokenizer);

  // The prompt (echo): its first token unscored, prompt[i] scored by scored[i - 1].
  void AddPrompt(std::span<const int> prompt, std::span<const PositionLogprobs> scored);
  void Add(std::span<const PositionLogprobs> positions);
  bool empty() const { return tokens_.empty(); }
  // What was added since the last Take, as one `logprobs` object.
  nlohmann::json Take();

 private:
  void Append(int token, const PositionLogprobs* scored);

  const Tokenizer& tokenizer_;
  StreamingDecoder decoder_;  // the text so far, for text_offset
  std::size_t offset_ = 0;    // its code points
  nlohmann::json tokens_ = nlohmann::json::array(), token_logprobs_ = nlohmann::json::array(),
                 top_logprobs_ = nlohmann::json::array(), text_offset_ = nlohmann::json::array();
};

}  // namespace plumb::serve
