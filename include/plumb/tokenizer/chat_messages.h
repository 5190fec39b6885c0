// The messages of a chat: OpenAI's chat-completions "messages" array, read once for both readers of it,
// plumb chat's /load (cli/chat_file.h) and plumb serve's /v1/chat/completions (serve/request.cpp). Each
// message: "role" system, developer (read as system), user, assistant and, where tools are taken, tool;
// "content" a string or an array of {"type": "text", "text": ...} parts (joined), absent or, for an
// assistant, null for none. A place in the array is spelled as the API's clients spell it:
// messages[1].content[0].text.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "plumb/core/error.h"

namespace plumb {

// What is wrong with a message, and whether it is a value of the wrong JSON type (serve's "invalid_type")
// or a value plumb does not take (its "invalid_value"). The message starts with the place.
class ChatMessageError : public Error {
 public:
  ChatMessageError(bool wrong_type, const std::string& message) : Error(message), wrong_type_(wrong_type) {}
  bool wrong_type() const { return wrong_type_; }

 private:
  bool wrong_type_;
};

struct ReadChatMessage {
  std::string role;                      // system, user, assistant or tool
  std::string content;                   // the text parts joined
  std::string place;                     // "messages[2]": for the caller's own checks of `json`
  const nlohmann::json* json = nullptr;  // the message object, for the fields only one reader takes
};

struct ChatMessageRules {
  // plumb serve: tool messages (with tool_call_id) and assistant tool_calls are the caller's to read.
  // plumb chat: neither; an assistant's tool_calls are refused naming `no_tools_hint`.
  bool tools = false;
  const char* reader = "plumb chat";  // for "...; plumb chat takes system, user and assistant"
  const char* no_tools_hint = "";
};

// Reads `messages`, which must be an array (`place` names it: "messages", or "" for a bare array). Throws
// ChatMessageError naming the place of what is wrong.
std::vector<ReadChatMessage> ReadChatMessages(const nlohmann::json& messages, const std::string& place,
                                              const ChatMessageRules& rules);

}  // namespace plumb
