// plumb chat's /save and /load: a conversation as the JSON body plumb serve's /v1/chat/completions takes,
//   {"messages": [{"role": "system", "content": "..."}, {"role": "user", ...}, {"role": "assistant", ...}]}
// so a saved chat can be posted to the server as it is, and a request body can be loaded into a chat.
#pragma once

#include <string>
#include <vector>

#include "plumb/tokenizer/chat_template.h"

namespace plumb::cli {

// Writes the messages to `path` (replacing it only once the whole file is written). Throws plumb::Error
// naming the path if it cannot.
void SaveConversation(const std::string& path, const std::vector<ChatMessage>& messages);

// Reads what SaveConversation writes, or any chat request body (other keys are ignored) or a bare array of
// messages, through the reader plumb serve uses too (tokenizer/chat_messages.h): roles system, developer
// (read as system), user and assistant; no tool calls. Throws plumb::Error naming the path and the place of
// what is wrong (messages[0].content, as serve spells it), or the byte offset of a syntax error.
std::vector<ChatMessage> LoadConversation(const std::string& path);

// The same from text (`name` stands for the file in errors): what LoadConversation and the fuzz target run.
std::vector<ChatMessage> ParseConversation(const std::string& text, const std::string& name);

}  // namespace plumb::cli
