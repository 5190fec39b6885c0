#include "plumb/cli/chat_file.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "plumb/cli/prompt_lines.h"
#include "plumb/core/error.h"

namespace plumb::cli {
namespace {

using nlohmann::json;

// A saved chat holds text a person typed or read; a file far beyond that is not one.
constexpr std::uintmax_t kMaxConversationBytes = 64u << 20;

std::string Content(const json& message, const std::string& role, const std::string& where) {
  const auto it = message.find("content");
  if (it == message.end() || (it->is_null() && role == "assistant")) return "";
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) throw MakeError(where, "/content: expected a string or an array of text parts");
  std::string text;
  for (std::size_t i = 0; i < it->size(); ++i) {
    const json& part = (*it)[i];
    const std::string at = where + "/content/" + std::to_string(i);
    if (!part.is_object() || part.value("type", json()) != "text") {
      throw MakeError(at, ": only parts of type \"text\" are supported");
    }
    const auto part_text = part.find("text");
    if (part_text == part.end() || !part_text->is_string()) throw MakeError(at, "/text: expected a string");
    text += part_text->get<std::string>();
  }
  return text;
}

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
  std::string pointer;
  if (document.is_object()) {
    const auto it = document.find("messages");
    if (it == document.end()) throw MakeError(name, ": no \"messages\" array");
    messages = &*it;
    pointer = "/messages";
  }
  if (!messages->is_array())
    throw MakeError(name, ": ", pointer.empty() ? "the document" : pointer, " is not an array");
  std::vector<ChatMessage> conversation;
  for (std::size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string where = name + ": " + pointer + "/" + std::to_string(i);
    if (!m.is_object()) throw MakeError(where, ": expected an object with a role and content");
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string()) throw MakeError(where, "/role: expected a string");
    ChatMessage message{role->get<std::string>(), ""};
    if (message.role == "developer") message.role = "system";  // OpenAI's newer name for the system role
    if (message.role != "system" && message.role != "user" && message.role != "assistant") {
      throw MakeError(where, "/role: \"", message.role,
                      "\"; a chat takes system, user and assistant messages");
    }
    if (m.contains("tool_calls") && !m["tool_calls"].is_null() && !m["tool_calls"].empty()) {
      throw MakeError(where, "/tool_calls: plumb chat has no tools (plumb serve does)");
    }
    message.content = Content(m, message.role, where);
    conversation.push_back(std::move(message));
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
