// ChatTemplate's public functions: a template from a Jinja text, a name or a model, and rendering; the
// work is in chat_template_recognize.cpp and chat_template_render.cpp (docs/chat-templates.md).
#include "plumb/tokenizer/chat_template.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat_template_internal.h"
#include "plumb/core/error.h"
#include "plumb/tokenizer/tokenizer.h"

namespace plumb {
namespace {

using namespace chat_template_detail;

constexpr std::array<ChatStyle, 10> kStyles = {
    ChatStyle::kChatMl,  ChatStyle::kLlama3, ChatStyle::kLlama2,   ChatStyle::kGemma, ChatStyle::kGemma3,
    ChatStyle::kMistral, ChatStyle::kPhi3,   ChatStyle::kPhi4Mini, ChatStyle::kOlmo2, ChatStyle::kQwen3};

std::string StyleNames() {
  std::string names;
  for (ChatStyle style : kStyles) names += (names.empty() ? "" : ", ") + std::string(ChatStyleName(style));
  return names;
}

}  // namespace

std::string_view ChatStyleName(ChatStyle style) {
  switch (style) {
    case ChatStyle::kChatMl:
      return "chatml";
    case ChatStyle::kLlama3:
      return "llama3";
    case ChatStyle::kLlama2:
      return "llama2";
    case ChatStyle::kGemma:
      return "gemma";
    case ChatStyle::kGemma3:
      return "gemma3";
    case ChatStyle::kMistral:
      return "mistral";
    case ChatStyle::kPhi3:
      return "phi3";
    case ChatStyle::kPhi4Mini:
      return "phi4-mini";
    case ChatStyle::kOlmo2:
      return "olmo2";
    case ChatStyle::kQwen3:
      return "qwen3";
  }
  return "unknown";
}

ChatTemplate ChatTemplate::FromJinja(std::string_view jinja, std::string bos_text, std::string eos_text) {
  if (PythonStrip(jinja).empty()) {
    throw MakeError("chat template is empty (the model has none); ", kKnownStyles);
  }
  ChatTemplate result(DetectStyle(jinja), std::move(bos_text), std::move(eos_text));
  if (result.style_ == ChatStyle::kChatMl) {
    if (std::optional<std::string> prompt = ChatMlDefaultSystemPrompt(jinja)) {
      result.has_default_system_prompt_ = true;
      result.default_system_prompt_ = std::move(*prompt);
      if (IsQwen25ToolTemplate(jinja, result.default_system_prompt_))
        result.tool_format_ = ToolFormat::kQwen25;
    }
  }
  if (result.style_ == ChatStyle::kQwen3 && HasQwen3ToolLines(jinja))
    result.tool_format_ = ToolFormat::kQwen3;
  return result;
}

ChatTemplate ChatTemplate::FromName(std::string_view name, std::string bos_text, std::string eos_text) {
  for (const ChatStyle style : kStyles) {
    if (ChatStyleName(style) != name) continue;
    ChatTemplate result(style, std::move(bos_text), std::move(eos_text));
    // Every Qwen3 template plumb recognises has the tool lines; a bare "chatml" is not Qwen2.5's.
    if (style == ChatStyle::kQwen3) result.tool_format_ = ToolFormat::kQwen3;
    return result;
  }
  throw MakeError("unknown chat template name '", name, "': plumb knows ", StyleNames());
}

std::string ChatTemplate::Render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  return RenderWithContents(messages, add_generation_prompt).text;
}

RenderedChat ChatTemplate::RenderWithContents(const std::vector<ChatMessage>& messages,
                                              bool add_generation_prompt) const {
  return RenderWithContents(messages, add_generation_prompt, {});
}

RenderedChat ChatTemplate::RenderWithContents(const std::vector<ChatMessage>& messages,
                                              bool add_generation_prompt,
                                              const std::vector<std::string>& tools) const {
  return RenderStyle(style_, tool_format_, bos_text_, eos_text_, has_default_system_prompt_,
                     default_system_prompt_, messages, add_generation_prompt, tools);
}

namespace {

std::string TokenText(const Tokenizer& tokenizer, int id) {
  return id >= 0 && id < tokenizer.vocab_size() ? tokenizer.spec().tokens[id] : std::string();
}

bool IsControlToken(const Tokenizer& tokenizer, std::string_view text) {
  const std::optional<std::int32_t> id = tokenizer.FindToken(text);
  const std::vector<std::int32_t>& types = tokenizer.spec().token_types;
  return id && static_cast<std::size_t>(*id) < types.size() && types[*id] == kTokenControl;
}

}  // namespace

ChatTemplate ChatTemplateFor(const Tokenizer& tokenizer, std::string_view override_name) {
  const std::string bos = TokenText(tokenizer, tokenizer.bos_id());
  const std::string eos = TokenText(tokenizer, tokenizer.eos_id());
  if (!override_name.empty()) return ChatTemplate::FromName(override_name, bos, eos);
  if (tokenizer.chat_template().empty()) {
    // A Gemma 3 base model carries no template but the turn markers its instruct sibling was tuned with.
    if (IsControlToken(tokenizer, "<start_of_turn>") && IsControlToken(tokenizer, "<end_of_turn>")) {
      return ChatTemplate::FromName(ChatStyleName(ChatStyle::kGemma3), bos, eos);
    }
    throw MakeError("the model has no chat template; choose a style: ", StyleNames());
  }
  try {
    return ChatTemplate::FromJinja(tokenizer.chat_template(), bos, eos);
  } catch (const Error& e) {
    throw MakeError(e.what(), "; or choose a style: ", StyleNames());
  }
}

}  // namespace plumb
