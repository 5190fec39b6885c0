// Reading the body of an OpenAI request (POST /v1/chat/completions, /v1/completions) into token ids and
// generation options; every field checked, every refusal an HttpError 400 naming the field.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "plumb/engine/generator.h"
#include "plumb/engine/scheduler.h"
#include "plumb/tokenizer/chat_template.h"
#include "plumb/tokenizer/tokenizer.h"
#include "structured_output.h"
#include "tool_calls.h"

namespace plumb::serve {

// What both endpoints take.
struct Request {
  std::vector<int> prompt;
  GenerationOptions options;
  std::vector<std::string> stops;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with the usage
  // Chat `logprobs: true` (+ `top_logprobs`), completions `logprobs: N`: the sampled tokens'; with `echo`
  // (completions only) the prompt's too.
  LogprobOptions logprobs;
  bool want_logprobs = false;  // the response carries them (max_tokens 0 scores the prompt without asking)
  bool echo = false;           // completions: the text begins with the prompt's
  std::string prompt_text;     // the prompt as text: the client's string, or its token ids decoded
  // Chat with tools (tool_choice not none): how to read the reply for tool calls.
  std::optional<ToolReplyReader> tool_reply;
};

class RequestReader {
 public:
  // context: the positions a request may use (prompt + max_tokens), the cap of max_tokens.
  RequestReader(const Tokenizer& tokenizer, ChatTemplate chat_template, std::vector<int> stop_ids,
                int context);

  // Parses and checks `body`; throws HttpError (400) for malformed JSON, a field of the wrong type or out of
  // range, or a prompt that leaves no room in the context.
  Request Read(const std::string& body, bool chat) const;

 private:
  std::vector<int> ChatPrompt(const nlohmann::json& body, const ChatTools& tools) const;
  std::vector<int> CompletionPrompt(const nlohmann::json& body, std::string& text) const;

  const Tokenizer& tokenizer_;
  const ChatTemplate template_;
  const std::vector<int> stop_ids_;
  const int context_;
  const ResponseFormatReader response_format_;  // response_format: the constraint on the reply, if any
};

}  // namespace plumb::serve
