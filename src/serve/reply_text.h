// The text of a reply as its tokens arrive, and the finish_reason OpenAI's clients expect.
#pragma once

#include <string>
#include <vector>

#include "plumb/engine/stop_reason.h"
#include "plumb/tokenizer/tokenizer.h"

namespace plumb::serve {

// Whole UTF-8 characters, cut at the first stop string, holding back a tail that could still become the
// start of one, so a stream never sends text it must take back.
class ReplyText {
 public:
  ReplyText(const Tokenizer& tokenizer, std::vector<std::string> stops);

  // Adds a token's text; true once a stop string has matched (the text ends before it).
  bool Push(int token);
  // Adds what the decoder still holds (the generation has ended); true once a stop string has matched.
  bool Finish();
  bool stopped() const { return stopped_; }
  const std::string& text() const { return text_; }

  // The text that is now safe to send and was not sent before.
  std::string TakeReady();

 private:
  bool CheckStops();
  std::size_t HeldBack() const;

  StreamingDecoder decoder_;
  std::vector<std::string> stops_;
  std::string text_;
  std::size_t sent_ = 0;
  bool stopped_ = false;
  bool finished_ = false;
};

// "stop" for a stop string or a stop token (EOS), "length" for max_tokens or the context, "abort" for a
// request the server ended itself (shutting down past --drain-seconds).
const char* FinishReason(StopReason reason, bool stop_string);

}  // namespace plumb::serve
