#include "reply_text.h"

#include <algorithm>
#include <string_view>

namespace plumb::serve {

ReplyText::ReplyText(const Tokenizer& tokenizer, std::vector<std::string> stops)
    : decoder_(tokenizer), stops_(std::move(stops)) {}

bool ReplyText::Push(int token) {
  text_ += decoder_.Push(token);
  return CheckStops();
}

bool ReplyText::Finish() {
  text_ += decoder_.Flush();
  finished_ = true;
  return CheckStops();
}

std::string ReplyText::TakeReady() {
  std::size_t ready = text_.size();
  if (!stopped_ && !finished_) ready -= HeldBack();
  if (ready <= sent_) return "";
  std::string piece = text_.substr(sent_, ready - sent_);
  sent_ = ready;
  return piece;
}

bool ReplyText::CheckStops() {
  if (stopped_) return true;
  for (const std::string& stop : stops_) {
    const std::size_t from = sent_ > stop.size() ? sent_ - stop.size() : 0;
    const std::size_t at = text_.find(stop, from);
    if (at != std::string::npos) {
      text_.resize(at);
      stopped_ = true;
    }
  }
  return stopped_;
}

// The longest tail of the unsent text that is a proper prefix of a stop string. It starts at a character
// boundary, because a stop string does.
std::size_t ReplyText::HeldBack() const {
  std::size_t held = 0;
  for (const std::string& stop : stops_) {
    for (std::size_t k = std::min(stop.size() - 1, text_.size() - sent_); k > held; --k) {
      if (std::string_view(text_).ends_with(std::string_view(stop).substr(0, k))) {
        held = k;
        break;
      }
    }
  }
  return held;
}

const char* FinishReason(StopReason reason, bool stop_string) {
  if (stop_string || reason == StopReason::kStopToken) return "stop";
  if (reason == StopReason::kMaxTokens || reason == StopReason::kContextFull) return "length";
  return "abort";  // the server shut down while it ran
}

}  // namespace plumb::serve
