// Feeds the input to ParseConversation (cli/chat_file.h) as the text of a file plumb chat's /load reads: a
// saved chat, a chat request body or a bare array of messages. For a conversation it accepts, every message
// must have a role a chat takes (system, user or assistant: developer read as system) and valid UTF-8
// content (what the session's tokenizer ranges rely on), and SaveConversation's file of it, to a per-process
// temporary path, must load back as the same messages. A plumb::Error is the expected answer to a file plumb
// refuses; a finding is anything else: a crash, a sanitizer report, another exception (an nlohmann
// type_error or out_of_range escaping the reader included), a hang, or a conversation that breaks the above.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "plumb/cli/chat_file.h"
#include "plumb/core/error.h"
#include "plumb/tokenizer/unicode.h"

namespace {

bool Same(const std::vector<plumb::ChatMessage>& a, const std::vector<plumb::ChatMessage>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].role != b[i].role || a[i].content != b[i].content || !b[i].tool_calls.empty()) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace plumb;
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<ChatMessage> messages;
  try {
    messages = cli::ParseConversation(text, "fuzz/chat.json");
  } catch (const Error&) {
    return 0;
  }
  for (const ChatMessage& m : messages) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant") __builtin_trap();
    if (!m.tool_calls.empty() || unicode::ToValidUtf8(m.content) != m.content) __builtin_trap();
  }
  // One file per process (parallel -jobs each have their own), removed when the process exits.
  static const struct Temporary {
    std::string path = (std::filesystem::temp_directory_path() /
                        ("plumb_chat_file_fuzz." + std::to_string(getpid()) + ".json"))
                           .string();
    ~Temporary() {
      std::error_code ignored;
      std::filesystem::remove(path, ignored);
    }
  } file;
  const std::string& path = file.path;
  // Not in the try: an Error here (the temporary directory unwritable) is a finding too.
  cli::SaveConversation(path, messages);
  if (!Same(messages, cli::LoadConversation(path))) __builtin_trap();
  return 0;
}
