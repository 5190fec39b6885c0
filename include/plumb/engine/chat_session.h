// ChatSession: a multi-turn conversation that keeps its KV cache between turns.
//
// Each turn renders the whole conversation with the chat template, but prefills only the text the cache
// does not hold yet: the template's rendering of the conversation so far is a prefix of its rendering with
// one more user message (docs/chat-templates.md), so the new tokens are those of the difference. When that
// does not hold, or the conversation outgrows the context, the session re-prefills from scratch, dropping
// the oldest exchanges (never the system prompt) until the new message and room for a reply fit.
#pragma once

#include "plumb/formats/kv_dtype.h"

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "plumb/engine/generator.h"
#include "plumb/kv/contiguous_kv_cache.h"
#include "plumb/model/model.h"
#include "plumb/tokenizer/chat_template.h"
#include "plumb/tokenizer/tokenizer.h"

namespace plumb {

struct ChatTurn {
  std::string reply;         // the assistant's text
  GenerationStats stats;     // prompt_tokens = tokens prefilled this turn (the new part only)
  int dropped_messages = 0;  // old messages removed to make room
  bool reprefilled = false;  // the cache was rebuilt from the start this turn
  int context_used = 0;      // cache positions in use after the turn
};

class ChatSession {
 public:
  // `options` applies to every reply (max_new_tokens is the cap per reply; stop_ids should hold the
  // model's end-of-generation ids). An empty system prompt leaves the template's default, if any.
  // The conversation's KV cache holds context_positions positions of kv_dtype.
  ChatSession(Model& model, const Tokenizer& tokenizer, ChatTemplate chat_template, int context_positions,
              GenerationOptions options, std::string system_prompt = "", KvDtype kv_dtype = KvDtype::kF32);

  // Adds the user's message and generates the reply, calling on_text with each piece of text as soon as
  // it is complete UTF-8. Throws plumb::Error (leaving the conversation as it was) if the message alone
  // does not fit in the context.
  ChatTurn Send(const std::string& user_message, const std::function<void(std::string_view)>& on_text);

  // Forgets the conversation (the system prompt stays).
  void Reset();

  const std::vector<ChatMessage>& messages() const { return messages_; }
  const ContiguousKvCache& cache() const { return cache_; }

 private:
  // The tokens to prefill for the rendered conversation: the part after kv_text_ if the cache holds a
  // prefix, otherwise all of it (and the cache is reset). The messages' contents are read as plain text.
  std::vector<int> TokensToPrefill(const RenderedChat& prompt, bool& reprefill);

  Model& model_;
  const Tokenizer& tokenizer_;
  ChatTemplate template_;
  GenerationOptions options_;
  ContiguousKvCache cache_;
  std::string system_prompt_;
  std::vector<ChatMessage> messages_;
  std::string kv_text_;  // the text whose tokens the cache holds, in order
  int turns_ = 0;
};

}  // namespace plumb
