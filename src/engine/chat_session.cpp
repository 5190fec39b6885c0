#include "plumb/engine/chat_session.h"

#include <algorithm>

#include "plumb/core/error.h"
#include "plumb/tokenizer/tokenizer.h"
#include "plumb/tokenizer/unicode.h"

namespace plumb {
namespace {

// A reply needs at least this much room; with less, old exchanges are dropped first.
constexpr int kMinReplyTokens = 16;

}  // namespace

ChatSession::ChatSession(Model& model, const Tokenizer& tokenizer, ChatTemplate chat_template,
                         int context_positions, GenerationOptions options, std::string system_prompt,
                         KvDtype kv_dtype)
    : model_(model),
      tokenizer_(tokenizer),
      template_(std::move(chat_template)),
      options_(std::move(options)),
      cache_(model.NewKvCache(context_positions, kv_dtype)),
      system_prompt_(std::move(system_prompt)) {
  Reset();
}

void ChatSession::Reset() {
  messages_.clear();
  if (!system_prompt_.empty()) messages_.push_back({"system", unicode::ToValidUtf8(system_prompt_)});
  ClearCache();
}

void ChatSession::ClearCache() {
  cache_.set_length(0);
  kv_text_.clear();
  kv_tokens_.clear();
}

void ChatSession::SetSystemPrompt(std::string system_prompt) {
  system_prompt_ = std::move(system_prompt);
  const bool has = !messages_.empty() && messages_.front().role == "system";
  if (system_prompt_.empty()) {
    if (has) messages_.erase(messages_.begin());
  } else if (has) {
    messages_.front().content = unicode::ToValidUtf8(system_prompt_);
  } else {
    messages_.insert(messages_.begin(), {"system", unicode::ToValidUtf8(system_prompt_)});
  }
  // The next turn's rendering no longer starts with kv_text_, so TokensToPrefill starts over.
}

std::vector<int> ChatSession::TokensToPrefill(const RenderedChat& rendered, bool& reprefill) {
  const std::string& prompt = rendered.text;
  reprefill = !(cache_.length() > 0 && prompt.size() > kv_text_.size() && prompt.starts_with(kv_text_));
  if (reprefill) ClearCache();
  // The part after what the cache holds, and the contents' ranges within it. The template writes BOS
  // itself where the model wants one (e.g. Llama-3's <|begin_of_text|>); its own special tokens are read
  // as such, a message's text never is (docs/tokenizers.md "Special tokens").
  const std::size_t from = kv_text_.size();
  std::vector<std::pair<std::size_t, std::size_t>> plain;
  for (const auto& [begin, end] : rendered.contents) {
    if (end > from) plain.push_back({std::max(begin, from) - from, end - from});
  }
  return tokenizer_.EncodeTemplated(std::string_view(prompt).substr(from), /*add_special=*/false, plain);
}

std::vector<int> ChatSession::FitConversation(bool generation_prompt, const std::vector<ChatMessage>& before,
                                              RenderedChat& rendered, ChatTurn& turn) {
  // What the cache holds now: nothing is written to it here, so on a refusal it still holds this.
  const int kv_length = cache_.length();
  std::string kv_text = kv_text_;
  std::vector<int> kv_tokens = kv_tokens_;
  for (;;) {
    rendered = template_.RenderWithContents(messages_, generation_prompt);
    std::vector<int> tokens = TokensToPrefill(rendered, turn.reprefilled);
    const int room = cache_.max_positions() - cache_.length() - static_cast<int>(tokens.size());
    if (room >= std::min(kMinReplyTokens, options_.max_new_tokens)) return tokens;
    // Drop the oldest exchange after the system prompt; the last message itself is never dropped.
    const auto first = std::find_if(messages_.begin(), messages_.end(),
                                    [](const ChatMessage& m) { return m.role != "system"; });
    if (messages_.end() - first <= 1) {
      messages_ = before;
      cache_.set_length(kv_length);
      kv_text_ = std::move(kv_text);
      kv_tokens_ = std::move(kv_tokens);
      throw MakeError("the message (", tokens.size(), " tokens with the chat template) leaves no room for a ",
                      "reply in the context of ", cache_.max_positions(), " positions; use a larger --ctx");
    }
    auto last = first + 1;
    while (last != messages_.end() - 1 && last->role != "user") ++last;  // through the assistant's reply
    turn.dropped_messages += static_cast<int>(last - first);
    messages_.erase(first, last);
    ClearCache();  // what the cache holds no longer starts the conversation
  }
}

ChatTurn ChatSession::Send(const std::string& user_message,
                           const std::function<void(std::string_view)>& on_text) {
  const std::vector<ChatMessage> before = messages_;
  // Valid UTF-8 (each ill-formed sequence as U+FFFD, as the tokenizer reads it anyway), so that the
  // contents' byte ranges in the rendering are the tokenizer's.
  messages_.push_back({"user", unicode::ToValidUtf8(user_message)});
  ChatTurn turn;
  RenderedChat prompt;
  const std::vector<int> tokens = FitConversation(/*generation_prompt=*/true, before, prompt, turn);

  GenerationOptions options = options_;
  options.max_new_tokens = std::min(
      options_.max_new_tokens, cache_.max_positions() - cache_.length() - static_cast<int>(tokens.size()));
  options.sampling.seed = options_.sampling.seed + static_cast<std::uint64_t>(turns_++);

  StreamingDecoder decoder(tokenizer_);
  std::vector<int> generated;
  turn.stats = Generate(model_, cache_, tokens, options, [&](int token) {
    generated.push_back(token);
    const std::string piece = decoder.Push(token);
    if (!piece.empty()) on_text(piece);
  });
  const std::string tail = decoder.Flush();
  if (!tail.empty()) on_text(tail);

  // The last sampled token was never run through the model, so the cache holds the prompt and every
  // generated token but that one. An interrupted reply is no different: the next turn's rendering starts
  // with kv_text_, and its prefill begins with that last token's text.
  kv_tokens_.insert(kv_tokens_.end(), tokens.begin(), tokens.end());
  kv_tokens_.insert(kv_tokens_.end(), generated.begin(), generated.end() - 1);
  kv_text_ = prompt.text + tokenizer_.Decode(std::span<const int>(generated).first(generated.size() - 1));
  if (tokenizer_.IsEndOfGeneration(generated.back())) generated.pop_back();
  turn.reply = tokenizer_.Decode(generated);
  messages_.push_back({"assistant", turn.reply});
  turn.context_used = cache_.length();
  return turn;
}

int ChatSession::Load(std::vector<ChatMessage> messages) {
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    const bool known = role == "user" || role == "assistant" || (role == "system" && i == 0);
    if (!known || !messages[i].tool_calls.empty()) {
      throw MakeError("message ", i, ": a chat takes a system message (first, if any), then user and ",
                      "assistant messages without tool calls, not ",
                      role == "system" ? "a system message later on" : "role \"" + role + "\"",
                      messages[i].tool_calls.empty() ? "" : " with tool calls");
    }
    messages[i].content = unicode::ToValidUtf8(messages[i].content);
  }
  const std::vector<ChatMessage> before = messages_;
  const std::string system_before = system_prompt_;
  messages_ = std::move(messages);
  system_prompt_ = !messages_.empty() && messages_.front().role == "system" ? messages_.front().content : "";
  if (messages_.empty() || (messages_.size() == 1 && messages_.front().role == "system")) {
    ClearCache();
    return 0;
  }
  ChatTurn turn;
  RenderedChat rendered;
  std::vector<int> tokens;
  try {
    // A conversation that continues the one in the cache (the same chat saved and loaded again) keeps it.
    tokens = FitConversation(/*generation_prompt=*/false, before, rendered, turn);
  } catch (const Error&) {
    system_prompt_ = system_before;
    throw;
  }
  RunPrompt(model_, cache_, tokens, options_);
  kv_tokens_.insert(kv_tokens_.end(), tokens.begin(), tokens.end());
  kv_text_ = rendered.text;
  return turn.dropped_messages;
}

}  // namespace plumb
