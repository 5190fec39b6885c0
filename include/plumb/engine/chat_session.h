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

  // options.interrupt stopped the reply; the text so far is the assistant's message all the same.
  bool cut() const { return stats.stop_reason == StopReason::kAborted; }
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

  // Replaces the system prompt (empty: none, the template's default if it has one) and keeps the
  // conversation; the next turn prefills it again from the start, since its first message changed.
  void SetSystemPrompt(std::string system_prompt);

  // Replaces the conversation with `messages` (a saved one: system first if at all, then user and
  // assistant) and prefills it, so that the cache holds what the next turn would otherwise prefill. The
  // system prompt becomes the conversation's. Drops the oldest exchanges if it does not fit with room for a
  // reply, and returns how many messages went. Throws plumb::Error naming the message for a role it cannot
  // take, leaving the session as it was.
  int Load(std::vector<ChatMessage> messages);

  // The options every reply uses (sampling, max_new_tokens, interrupt, ...).
  const GenerationOptions& options() const { return options_; }
  void set_options(GenerationOptions options) { options_ = std::move(options); }

  const std::vector<ChatMessage>& messages() const { return messages_; }
  const std::string& system_prompt() const { return system_prompt_; }
  const ContiguousKvCache& cache() const { return cache_; }
  // The token ids whose keys and values the cache holds, in position order: the context as the model
  // has seen it (a reply's tokens as sampled, not as its text would tokenize).
  const std::vector<int>& context_tokens() const { return kv_tokens_; }

 private:
  // The tokens to prefill for the rendered conversation: the part after kv_text_ if the cache holds a
  // prefix, otherwise all of it (and the cache is reset). The messages' contents are read as plain text.
  std::vector<int> TokensToPrefill(const RenderedChat& prompt, bool& reprefill);
  // Renders the conversation (with the generation prompt or not) and finds the tokens to prefill, dropping
  // the oldest exchanges (never the system prompt, never the last message) until they and room for a reply
  // fit; if even the last message alone does not, restores `before` (and the cache as it was) and throws.
  std::vector<int> FitConversation(bool generation_prompt, const std::vector<ChatMessage>& before,
                                   RenderedChat& rendered, ChatTurn& turn);
  void ClearCache();

  Model& model_;
  const Tokenizer& tokenizer_;
  ChatTemplate template_;
  GenerationOptions options_;
  ContiguousKvCache cache_;
  std::string system_prompt_;
  std::vector<ChatMessage> messages_;
  std::string kv_text_;         // the text whose tokens the cache holds, in order
  std::vector<int> kv_tokens_;  // those tokens
  int turns_ = 0;
};

}  // namespace plumb
