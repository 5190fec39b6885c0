// Feeds the input to ChatTemplate::FromJinja as a model's Jinja chat template (tokenizer.chat_template),
// and, for a template it recognises, renders small conversations with it (with and without a system message
// and the generation prompt). A plumb::Error is the expected answer to a template plumb cannot apply or a
// conversation its style rejects; a finding is anything else: a crash, a sanitizer report, another
// exception or a hang.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace plumb;
  const std::string_view jinja(reinterpret_cast<const char*>(data), size);
  try {
    const ChatTemplate chat = ChatTemplate::FromJinja(jinja, "<s>", "</s>");
    const std::vector<std::vector<ChatMessage>> conversations = {
        {{"user", "Hi"}},
        {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}},
    };
    for (const auto& messages : conversations) {
      for (const bool generation_prompt : {false, true}) {
        try {
          (void)chat.Render(messages, generation_prompt);
        } catch (const Error&) {
        }
      }
    }
  } catch (const Error&) {
  }
  return 0;
}
