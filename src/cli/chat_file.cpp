#include "plumb/cli/chat_file.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "plumb/cli/prompt_lines.h"
#include "plumb/core/error.h"
#include "plumb/tokenizer/chat_messages.h"

namespace plumb::cli {
namespace {

using nlohmann::json;

// A saved chat holds text a person typed or read; a file far beyond that is not one.
constexpr std::uintmax_t kMaxConversationBytes = 64u << 20;

}  // namespace

std::vector<ChatMessage> ParseConversation(const std::string& text, const std::string& name) {
  json document;
  try {
    document = json::parse(text);
  } catch (const json::parse_error& e) {
    throw MakeError(name, ": not JSON: syntax error at byte ", e.byte);
  } catch (const json::out_of_range& e) {  // a number beyond double's range, e.g. 1e400 (nlohmann's 406)
    throw MakeError(name, ": not JSON: ", e.what());
  }
  const json* messages = &document;
  std::string place;
  if (document.is_object()) {
    const auto it = document.find("messages");
    if (it == document.end()) throw MakeError(name, ": no \"messages\" array");
    messages = &*it;
    place = "messages";
  }
  std::vector<ChatMessage> conversation;
  try {
    for (ReadChatMessage& m :
         ReadChatMessages(*messages, place,
                          {.tools = false,
                          .reader = "a chat",
                          .no_tools_hint = "plumb chat has no tools (plumb serve does)"})) {
      conversation.push_back({std::move(m.role), std::move(m.content)});
    }
  } catch (const ChatMessageError& e) {
    throw MakeError(name, ": ", e.what());
  }
  return conversation;
}

std::vector<ChatMessage> LoadConversation(const std::string& path) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw MakeError(path, ": cannot read the conversation: ", ec.message());
  if (size > kMaxConversationBytes) {
    throw MakeError(path, ": ", size, " bytes is more than a conversation file may hold (",
                    kMaxConversationBytes, ")");
  }
  return ParseConversation(ReadTextFile(path), path);
}

void SaveConversation(const std::string& path, const std::vector<ChatMessage>& messages) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();  // role before content, as people write it
  for (const ChatMessage& m : messages) list.push_back({{"role", m.role}, {"content", m.content}});
  // A reply cut inside a character can end in part of one: written as U+FFFD, as the tokenizer reads it.
  const std::string text = nlohmann::ordered_json{{"messages", list}}.dump(2, ' ', /*ensure_ascii=*/false,
                                                                           json::error_handler_t::replace) +
                           "\n";
  const std::string temporary = path + ".partial";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    if (!file) throw MakeError(path, ": cannot write the conversation (", temporary, ")");
    file << text;
    file.close();
    if (!file) throw MakeError(path, ": write error (", temporary, ")");
  }
  std::error_code ec;
  std::filesystem::rename(temporary, path, ec);
  if (ec) {
    std::filesystem::remove(temporary, ec);
    throw MakeError(path, ": cannot write the conversation: ", ec.message());
  }
}

}  // namespace plumb::cli
