// What the chat template files share: chat_template_recognize.cpp recognises a template's style from its
// Jinja text, chat_template_render.cpp renders a style, chat_template.cpp is ChatTemplate's public face.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "plumb/tokenizer/chat_template.h"

namespace plumb::chat_template_detail {

// What every "cannot apply this template" error ends with.
inline constexpr std::string_view kKnownStyles =
    "plumb renders chatml (<|im_start|>), llama3 (<|start_header_id|>, Llama 3.0), llama2 (Meta's "
    "[INST] <<SYS>> format), gemma (<start_of_turn>, Gemma 1 and 2), gemma3 (Gemma 3's, with a system "
    "prompt), mistral (Mistral/Mixtral's [INST] without a system role), phi3 (Phi-3.5's <|user|>\\n), "
    "phi4-mini (Phi-4-mini's <|user|>), olmo2 (OLMo 2's Tulu format) and qwen3 (Qwen3's, with <think>); "
    "choose one by name with --chat-template NAME";

// The real templates' own error words: markers that recognise them, and words plumb's messages repeat.
inline constexpr std::string_view kNoSystem = "System role not supported";
inline constexpr std::string_view kMistralRoles = "Only user and assistant roles are supported!";

// The tool block Qwen2.5 and Qwen3 write into the system turn when `tools` is given, after their own first
// lines: kToolsHeader, "\n" + `tool | tojson` for each tool, then kToolsFooter (string literals of both
// templates, Qwen2.5's header after "\n\n").
inline constexpr std::string_view kToolsHeader =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with "
    "function signatures within <tools></tools> XML tags:\n<tools>";
inline constexpr std::string_view kToolsFooter =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call><|im_end|>\n";

// --- chat_template_recognize.cpp

// content.strip() / content | trim, with Python's notion of whitespace.
std::string_view PythonStrip(std::string_view text);

// The style a Jinja template writes. Throws plumb::Error, quoting the start of the template and ending
// with kKnownStyles, for a template plumb cannot apply.
ChatStyle DetectStyle(std::string_view jinja);

// The fixed prompt of a ChatML template's default system turn, if it has one. Throws plumb::Error for two
// different ones, or for a literal plumb cannot read.
std::optional<std::string> ChatMlDefaultSystemPrompt(std::string_view jinja);

// Whether a ChatML template with this default system prompt writes Qwen2.5's tool lines
// (ToolFormat::kQwen25).
bool IsQwen25ToolTemplate(std::string_view jinja, std::string_view default_prompt);

// Whether a Qwen3 template writes Qwen3's tool lines (ToolFormat::kQwen3).
bool HasQwen3ToolLines(std::string_view jinja);

// --- chat_template_render.cpp

// ChatTemplate::RenderWithContents with the template's members: checks the conversation and that a template
// with tool_format kNone gets no tools (plumb::Error, as ChatTemplate::Render says), then writes `style`.
RenderedChat RenderStyle(ChatStyle style, ToolFormat tool_format, const std::string& bos_text,
                         const std::string& eos_text, bool has_default_system_prompt,
                         const std::string& default_system_prompt, const std::vector<ChatMessage>& messages,
                         bool add_generation_prompt, const std::vector<std::string>& tools);

}  // namespace plumb::chat_template_detail
