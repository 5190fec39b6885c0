// ChatSession on the default model (SmolLM2-135M-Instruct, fetched by scripts/fetch-model): the KV cache
// is kept between turns, only new text is prefilled, and an over-long conversation degrades gracefully.
#include "plumb/engine/chat_session.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/engine/text_model.h"
#include "support/errors.h"

namespace plumb {
namespace {

const std::string kSmolLm2 = std::string(PLUMB_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

class ChatSessionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Not a skip: the test command fetches the model first, so its absence is a failure to report.
    ASSERT_TRUE(std::filesystem::exists(kSmolLm2)) << kSmolLm2 << " is missing: run scripts/fetch-model";
    loaded_ = new TextModel(TextModel::Load(kSmolLm2));
  }
  static void TearDownTestSuite() { delete loaded_; }

  ChatSession NewSession(int ctx, int max_tokens) {
    const Tokenizer& tokenizer = *loaded_->tokenizer;
    GenerationOptions options;
    options.max_new_tokens = max_tokens;
    options.sampling.temperature = 0;  // greedy: replies are reproducible
    options.stop_ids = loaded_->StopIds();
    return ChatSession(loaded_->model, tokenizer, ChatTemplate::FromJinja(tokenizer.chat_template(), "", ""),
                       ctx, options);
  }

  static ChatTemplate Template() {
    return ChatTemplate::FromJinja(loaded_->tokenizer->chat_template(), "", "");
  }
  // The tokens of the conversation as ChatSession prefills it from scratch (TokensToPrefill with an empty
  // cache): the template's special tokens read as such, the contents as plain text.
  static std::vector<int> Encoded(const std::vector<ChatMessage>& messages, bool generation_prompt) {
    const RenderedChat rendered = Template().RenderWithContents(messages, generation_prompt);
    return loaded_->tokenizer->EncodeTemplated(rendered.text, /*add_special=*/false, rendered.contents);
  }

  // A new session that loads `saved` and is sent `follow_up` gives the model the very context `original` had
  // after that message (token for token), so its greedy reply is `expected`'s.
  void ExpectLoadedSessionContinuesAs(const std::vector<ChatMessage>& saved, const std::string& follow_up,
                                      int max_tokens, const ChatSession& original, const ChatTurn& expected) {
    ChatSession loaded = NewSession(1024, max_tokens);
    EXPECT_EQ(loaded.Load(saved), 0);
    const ChatTurn actual = loaded.Send(follow_up, [](std::string_view) {});
    EXPECT_FALSE(actual.reprefilled);
    EXPECT_EQ(loaded.context_tokens(), original.context_tokens());
    EXPECT_EQ(actual.reply, expected.reply);
    EXPECT_EQ(actual.stats.generated_tokens, expected.stats.generated_tokens);
  }

  static TextModel* loaded_;
};
TextModel* ChatSessionTest::loaded_ = nullptr;

void Ignore(std::string_view) {}

// ChatMessage has no operator==: roles and contents, naming the first difference.
void ExpectMessages(const std::vector<ChatMessage>& actual, const std::vector<ChatMessage>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(actual[i].role, expected[i].role) << "message " << i;
    EXPECT_EQ(actual[i].content, expected[i].content) << "message " << i;
  }
}

std::vector<int> Prefix(const std::vector<int>& tokens, std::size_t n) {
  return std::vector<int>(tokens.begin(),
                          tokens.begin() + static_cast<std::ptrdiff_t>(std::min(n, tokens.size())));
}

TEST_F(ChatSessionTest, SecondTurnPrefillsOnlyTheNewText) {
  ChatSession chat = NewSession(1024, 24);
  std::string streamed;
  const ChatTurn first =
      chat.Send("What is the capital of France?", [&](std::string_view t) { streamed += t; });
  EXPECT_TRUE(first.reprefilled);
  EXPECT_FALSE(first.reply.empty());
  EXPECT_EQ(streamed.substr(0, first.reply.size()),
            first.reply);  // streamed text is the reply (+ nothing but EOG)

  const int cached = chat.cache().length();
  const ChatTurn second = chat.Send("And of Italy?", [](std::string_view) {});
  EXPECT_FALSE(second.reprefilled);
  const std::string whole =
      ChatTemplate::FromJinja(loaded_->tokenizer->chat_template(), "", "").Render(chat.messages(), false);
  const int whole_tokens = static_cast<int>(loaded_->tokenizer->Encode(whole, false, true).size());
  EXPECT_LT(second.stats.prompt_tokens, whole_tokens / 2) << "the second turn re-prefilled the first";
  // The cache grew by exactly the new prompt and every generated token but the last (never decoded).
  EXPECT_EQ(chat.cache().length(), cached + second.stats.prompt_tokens + second.stats.generated_tokens - 1);
  EXPECT_EQ(chat.messages().size(), 4u);  // the default system prompt is the template's, not a message
}

TEST_F(ChatSessionTest, IncrementalTurnsAgreeWithPrefillingTheWholeConversation) {
  ChatSession chat = NewSession(1024, 16);
  chat.Send("Name a primary colour.", [](std::string_view) {});
  const ChatTurn second = chat.Send("Name another one.", [](std::string_view) {});

  // The same conversation prefilled in one piece, then greedy decoding.
  std::vector<ChatMessage> before(chat.messages().begin(), chat.messages().end() - 1);
  const ChatTemplate tmpl = ChatTemplate::FromJinja(loaded_->tokenizer->chat_template(), "", "");
  const std::vector<int> prompt = loaded_->tokenizer->Encode(tmpl.Render(before, true), false, true);
  ContiguousKvCache cache = loaded_->model.NewKvCache(1024);
  GenerationOptions options;
  options.max_new_tokens = 16;
  options.stop_ids = loaded_->StopIds();
  std::vector<int> ids;
  Generate(loaded_->model, cache, prompt, options, [&](int t) { ids.push_back(t); });
  if (loaded_->tokenizer->IsEndOfGeneration(ids.back())) ids.pop_back();
  EXPECT_EQ(second.reply, loaded_->tokenizer->Decode(ids));
}

TEST_F(ChatSessionTest, OverlongConversationDropsOldExchanges) {
  ChatSession chat = NewSession(160, 32);
  int dropped = 0;
  for (const char* message : {"Tell me about cats.", "Tell me about dogs.", "Tell me about birds.",
                              "Tell me about fish.", "Which of them is best?"}) {
    const ChatTurn turn = chat.Send(message, [](std::string_view) {});
    EXPECT_LE(turn.context_used, 160);
    dropped += turn.dropped_messages;
  }
  EXPECT_GT(dropped, 0) << "160 positions cannot hold five exchanges";
  EXPECT_EQ(chat.messages().back().role, "assistant");
  EXPECT_EQ(chat.messages()[chat.messages().size() - 2].content, "Which of them is best?");
}

TEST_F(ChatSessionTest, MessageTooLongForTheContextIsAnErrorAndTheChatGoesOn) {
  ChatSession chat = NewSession(96, 8);
  std::string long_message;
  for (int i = 0; i < 100; ++i) long_message += "word ";
  try {
    chat.Send(long_message, [](std::string_view) {});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("leaves no room for a reply in the context of 96"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(chat.messages().empty());
  const ChatTurn turn = chat.Send("Hi!", [](std::string_view) {});
  EXPECT_FALSE(turn.reply.empty());

  // Refused later in the conversation, the message leaves the cache as it was: the next turn continues it.
  const std::vector<int> cached = chat.context_tokens();
  EXPECT_THROW(chat.Send(long_message, [](std::string_view) {}), Error);
  EXPECT_EQ(chat.context_tokens(), cached);
  EXPECT_EQ(static_cast<int>(cached.size()), chat.cache().length());
  EXPECT_FALSE(chat.Send("Bye!", [](std::string_view) {}).reprefilled);
}

// plumb chat's Ctrl-C: GenerationOptions::interrupt, set while the reply streams, cuts it after the token
// being emitted; what was said so far is the assistant's message, and the cache holds exactly it, so the
// next turn continues from there as if the cut reply had been loaded from a file.
TEST_F(ChatSessionTest, AnInterruptCutsTheReplyAndTheChatContinuesFromTheCache) {
  ChatSession chat = NewSession(1024, 64);
  std::atomic<bool> interrupt{false};
  GenerationOptions options = chat.options();
  options.interrupt = &interrupt;
  chat.set_options(options);
  ASSERT_EQ(chat.options().interrupt, &interrupt);

  int pieces = 0;
  std::string streamed;
  const ChatTurn cut =
      chat.Send("Write a long story about a dragon who learns to bake bread.", [&](std::string_view piece) {
        streamed += piece;
        if (++pieces == 3) interrupt = true;
      });
  EXPECT_TRUE(cut.cut());
  EXPECT_EQ(cut.stats.stop_reason, StopReason::kAborted);
  // Three pieces of English text are three tokens (a piece waits for more than one token only inside a
  // multi-byte character); the stop lands right after the token that set the flag.
  EXPECT_GE(cut.stats.generated_tokens, 3);
  EXPECT_LE(cut.stats.generated_tokens, 4);
  EXPECT_EQ(cut.reply, streamed);
  ASSERT_EQ(chat.messages().size(), 2u);
  EXPECT_EQ(chat.messages().back().role, "assistant");
  EXPECT_EQ(chat.messages().back().content, cut.reply);
  EXPECT_EQ(static_cast<int>(chat.context_tokens().size()), chat.cache().length());
  EXPECT_EQ(chat.cache().length(), cut.stats.prompt_tokens + cut.stats.generated_tokens - 1);
  EXPECT_EQ(cut.context_used, chat.cache().length());

  // The caller clears the flag for the next reply (the session leaves it alone).
  interrupt = false;
  const std::vector<ChatMessage> saved = chat.messages();
  const std::string follow_up = "Give the dragon a name.";
  const ChatTurn next = chat.Send(follow_up, Ignore);
  EXPECT_FALSE(next.reprefilled) << "the cut reply's tokens were thrown away";
  EXPECT_FALSE(next.cut());
  EXPECT_FALSE(next.reply.empty());
  EXPECT_EQ(static_cast<int>(chat.context_tokens().size()), chat.cache().length());

  // The same conversation loaded (as /load does with a saved one) and sent the same follow-up: the context
  // the model saw is the same token for token, so the greedy reply is too. (The cut reply is three common
  // English tokens, which the tokenizer reads back as the same three.)
  ExpectLoadedSessionContinuesAs(saved, follow_up, 64, chat, next);
}

TEST_F(ChatSessionTest, LoadPrefillsTheConversationAsTheTemplateRendersIt) {
  ChatSession chat = NewSession(1024, 24);
  const std::vector<ChatMessage> messages = {
      {"system", "You are a geography teacher."},
      {"user", "What is the capital of France?"},
      {"assistant", "The capital of France is Paris."},
  };
  EXPECT_EQ(chat.Load(messages), 0);
  ExpectMessages(chat.messages(), messages);
  EXPECT_EQ(chat.system_prompt(), "You are a geography teacher.");
  const std::vector<int> expected = Encoded(messages, /*generation_prompt=*/false);
  EXPECT_EQ(chat.context_tokens(), expected);
  EXPECT_EQ(chat.cache().length(), static_cast<int>(expected.size()));

  // The next turn prefills only its own message: the cache holds the loaded conversation.
  std::vector<ChatMessage> asked = messages;
  asked.push_back({"user", "And of Germany?"});
  const ChatTurn turn = chat.Send("And of Germany?", Ignore);
  EXPECT_FALSE(turn.reprefilled);
  EXPECT_FALSE(turn.reply.empty());
  const std::vector<int> whole = Encoded(asked, /*generation_prompt=*/true);
  EXPECT_EQ(turn.stats.prompt_tokens, static_cast<int>(whole.size() - expected.size()));
  EXPECT_EQ(Prefix(chat.context_tokens(), whole.size()), whole);

  // Loading replaces the conversation, system prompt included (none here: the template's default).
  const std::vector<ChatMessage> other = {{"user", "Hello!"}, {"assistant", "Hi! How can I help?"}};
  EXPECT_EQ(chat.Load(other), 0);
  ExpectMessages(chat.messages(), other);
  EXPECT_EQ(chat.system_prompt(), "");
  EXPECT_EQ(chat.context_tokens(), Encoded(other, false));
  // Nothing to prefill: a system prompt alone, or an empty conversation, leaves the cache empty.
  EXPECT_EQ(chat.Load({{"system", "Be brief."}}), 0);
  EXPECT_EQ(chat.system_prompt(), "Be brief.");
  EXPECT_EQ(chat.cache().length(), 0);
  EXPECT_TRUE(chat.context_tokens().empty());
  const ChatTurn after_system = chat.Send("Hi!", Ignore);
  EXPECT_TRUE(after_system.reprefilled);
  EXPECT_EQ(Prefix(chat.context_tokens(), static_cast<std::size_t>(after_system.stats.prompt_tokens)),
            Encoded({{"system", "Be brief."}, {"user", "Hi!"}}, true));
  EXPECT_EQ(chat.Load({}), 0);
  EXPECT_TRUE(chat.messages().empty());
  EXPECT_EQ(chat.system_prompt(), "");
  EXPECT_EQ(chat.cache().length(), 0);
}

TEST_F(ChatSessionTest, LoadRefusesWhatAChatCannotTakeAndKeepsTheSession) {
  ChatSession chat = NewSession(1024, 8);
  chat.SetSystemPrompt("Be brief.");
  chat.Send("Hi!", Ignore);
  const std::vector<ChatMessage> before = chat.messages();
  const std::vector<int> context = chat.context_tokens();
  ASSERT_EQ(before.size(), 3u);

  struct Refused {
    std::vector<ChatMessage> messages;
    std::string expected;  // the start of the error
  };
  const std::vector<Refused> refused = {
      {{{"user", "What is 6 times 7?"}, {"tool", "42"}}, "message 1: "},
      {{{"user", "Hi"}, {"system", "Be verbose."}}, "message 1: "},
      {{{"system", "A"}, {"system", "B"}}, "message 1: "},
      {{{"user", "Hi"}, {"assistant", "", {{"lookup", "{}"}}}}, "message 1: "},
      {{{"function", "x"}}, "message 0: "},
  };
  for (const Refused& r : refused) {
    SCOPED_TRACE(r.expected + r.messages.back().role);
    const std::string message = testing::ErrorOf([&] { chat.Load(r.messages); });
    EXPECT_EQ(message.substr(0, r.expected.size()), r.expected) << message;
    ExpectMessages(chat.messages(), before);
    EXPECT_EQ(chat.system_prompt(), "Be brief.");
    EXPECT_EQ(chat.context_tokens(), context);
    EXPECT_EQ(chat.cache().length(), static_cast<int>(context.size()));
  }
  testing::ExpectMessageHas(testing::ErrorOf([&] {
                              chat.Load({{"user", "a"}, {"tool", "42"}});
                            }),
                            {"role \"tool\""});
  testing::ExpectMessageHas(testing::ErrorOf([&] {
                              chat.Load({{"user", "a"}, {"system", "b"}});
                            }),
                            {"a system message later on"});
  // The chat goes on from the cache it had.
  const ChatTurn turn = chat.Send("Bye!", Ignore);
  EXPECT_FALSE(turn.reprefilled);
  EXPECT_EQ(chat.messages().size(), 5u);
}

TEST_F(ChatSessionTest, LoadingAMessageTooLongForTheContextIsAnErrorAndTheChatGoesOn) {
  ChatSession chat = NewSession(96, 8);
  chat.Send("Hi!", Ignore);
  const std::vector<ChatMessage> before = chat.messages();
  const std::vector<int> cached = chat.context_tokens();
  std::string long_message;
  for (int i = 0; i < 100; ++i) long_message += "word ";
  const std::string message = testing::ErrorOf([&] {
    chat.Load({{"system", "Be brief."}, {"user", "Hello"}, {"assistant", "Hi."}, {"user", long_message}});
  });
  EXPECT_NE(message.find("leaves no room for a reply in the context of 96"), std::string::npos) << message;
  ExpectMessages(chat.messages(), before);
  EXPECT_EQ(chat.system_prompt(), "");
  EXPECT_EQ(chat.context_tokens(), cached) << "the refused load left the cache as it was";
  EXPECT_EQ(static_cast<int>(chat.context_tokens().size()), chat.cache().length());
  const ChatTurn turn = chat.Send("Hello again!", Ignore);
  EXPECT_FALSE(turn.reprefilled);
  EXPECT_FALSE(turn.reply.empty());
  EXPECT_EQ(chat.messages().size(), 4u);
}

// Loading the conversation the session already holds (saved, then loaded again) keeps the cache: only what
// the cache lacks (the last reply's final token and the end of its turn) is prefilled.
TEST_F(ChatSessionTest, LoadingTheConversationItHoldsKeepsTheCache) {
  ChatSession chat = NewSession(1024, 16);
  chat.Send("What is the capital of France?", Ignore);
  const std::vector<int> cached = chat.context_tokens();
  EXPECT_EQ(chat.Load(chat.messages()), 0);
  ASSERT_GT(chat.context_tokens().size(), cached.size());
  EXPECT_TRUE(std::equal(cached.begin(), cached.end(), chat.context_tokens().begin()));
  EXPECT_LE(chat.context_tokens().size(), cached.size() + 4);
  EXPECT_EQ(static_cast<int>(chat.context_tokens().size()), chat.cache().length());
  EXPECT_FALSE(chat.Send("And of Spain?", Ignore).reprefilled);
}

TEST_F(ChatSessionTest, LoadDropsTheOldestExchangesThatDoNotFit) {
  ChatSession chat = NewSession(160, 32);
  std::vector<ChatMessage> messages = {{"system", "Be brief."}};
  for (const char* animal : {"cats", "dogs", "birds", "fish", "horses", "frogs"}) {
    messages.push_back({"user", std::string("Tell me about ") + animal + "."});
    messages.push_back({"assistant", std::string("People keep ") + animal +
                                         " as pets all over the world, and many of them live long lives."});
  }
  const int dropped = chat.Load(messages);
  EXPECT_GT(dropped, 0) << "160 positions cannot hold six exchanges of about 30 tokens";
  EXPECT_EQ(dropped % 2, 0) << "whole exchanges go";
  // The system prompt stays; the newest messages stay, in order.
  ASSERT_EQ(chat.messages().size(), messages.size() - static_cast<std::size_t>(dropped));
  EXPECT_EQ(chat.system_prompt(), "Be brief.");
  std::vector<ChatMessage> kept = {messages.front()};
  kept.insert(kept.end(), messages.begin() + 1 + dropped, messages.end());
  ExpectMessages(chat.messages(), kept);
  // What is left fits with room for a reply, and the cache holds exactly it.
  EXPECT_EQ(chat.context_tokens(), Encoded(kept, false));
  EXPECT_EQ(chat.cache().length(), static_cast<int>(chat.context_tokens().size()));
  EXPECT_LE(chat.cache().length() + 16, 160);
  // Keeping one more exchange would not have fit: only as many went as had to.
  std::vector<ChatMessage> one_more = {messages.front()};
  one_more.insert(one_more.end(), messages.begin() + dropped - 1, messages.end());
  EXPECT_GT(Encoded(one_more, false).size() + 16, 160u);

  const ChatTurn turn = chat.Send("Which of them is best?", Ignore);
  EXPECT_FALSE(turn.reply.empty());
  EXPECT_LE(turn.context_used, 160);
  EXPECT_EQ(chat.messages()[chat.messages().size() - 2].content, "Which of them is best?");
}

// What /save and /load do (the files themselves are cli/chat_file.h's, tested in tests/cli): a conversation
// loaded into a new session gives the model the very context the original session had, so the chat continues
// as it would have. This needs each sampled reply to be the tokens its text tokenizes to; greedy replies to
// these plain English questions are (a reply that is not would be re-read as other tokens, legitimately).
TEST_F(ChatSessionTest, ALoadedConversationContinuesTokenForTokenAsTheOriginal) {
  ChatSession original = NewSession(1024, 24);
  original.Send("What is the capital of France?", Ignore);
  original.Send("And what is the capital of Italy?", Ignore);
  const std::vector<ChatMessage> saved = original.messages();
  const std::string third = "Which of the two cities is larger?";
  const ChatTurn expected = original.Send(third, Ignore);
  EXPECT_FALSE(expected.reprefilled);

  ExpectLoadedSessionContinuesAs(saved, third, 24, original, expected);
}

// /system: the first message changes, so the next turn cannot continue the cache and prefills the whole
// conversation again, with the new system text at its start.
TEST_F(ChatSessionTest, SetSystemPromptReplacesTheFirstMessageAndTheNextTurnStartsOver) {
  ChatSession chat = NewSession(1024, 12);
  chat.Send("Hi!", Ignore);
  ASSERT_EQ(chat.messages().size(), 2u);
  ASSERT_EQ(chat.messages().front().role, "user");

  // The turn after a change: rebuilt from the start, its prompt the whole conversation's rendering, which
  // starts with the system text (after the template's "<|im_start|>system\n").
  const auto expect_starts_over = [&](const std::string& message, const std::string& system_text) {
    std::vector<ChatMessage> asked = chat.messages();
    asked.push_back({"user", message});
    const ChatTurn turn = chat.Send(message, Ignore);
    EXPECT_TRUE(turn.reprefilled);
    const std::vector<int> prompt = Encoded(asked, /*generation_prompt=*/true);
    EXPECT_EQ(turn.stats.prompt_tokens, static_cast<int>(prompt.size()));
    EXPECT_EQ(Prefix(chat.context_tokens(), prompt.size()), prompt);
    const std::string seen = loaded_->tokenizer->Decode(Prefix(chat.context_tokens(), 40));
    EXPECT_LT(seen.find(system_text), 20u) << seen;
    EXPECT_EQ(static_cast<int>(chat.context_tokens().size()), chat.cache().length());
  };

  chat.SetSystemPrompt("You are a pirate.");  // inserted before the conversation
  EXPECT_EQ(chat.system_prompt(), "You are a pirate.");
  ASSERT_EQ(chat.messages().size(), 3u);
  EXPECT_EQ(chat.messages()[0].role, "system");
  EXPECT_EQ(chat.messages()[0].content, "You are a pirate.");
  EXPECT_EQ(chat.messages()[1].content, "Hi!");
  expect_starts_over("Who are you?", "You are a pirate.");

  chat.SetSystemPrompt("You are a robot.");  // replaced in place
  ASSERT_EQ(chat.messages().size(), 5u);
  EXPECT_EQ(chat.messages()[0].content, "You are a robot.");
  EXPECT_EQ(chat.messages()[1].content, "Hi!");
  expect_starts_over("What do you eat?", "You are a robot.");
  EXPECT_EQ(std::count_if(chat.messages().begin(), chat.messages().end(),
                          [](const ChatMessage& m) { return m.role == "system"; }),
            1);

  chat.SetSystemPrompt("");  // removed: the template's default system prompt applies again
  EXPECT_EQ(chat.system_prompt(), "");
  ASSERT_EQ(chat.messages().size(), 6u);
  EXPECT_EQ(chat.messages()[0].role, "user");
  EXPECT_EQ(chat.messages()[0].content, "Hi!");
  ASSERT_FALSE(Template().default_system_prompt().empty());
  expect_starts_over("Bye!", Template().default_system_prompt());

  // Reset keeps the system prompt it was given last.
  chat.SetSystemPrompt("Be brief.");
  chat.Reset();
  ASSERT_EQ(chat.messages().size(), 1u);
  EXPECT_EQ(chat.messages()[0].content, "Be brief.");
  EXPECT_EQ(chat.cache().length(), 0);
}

}  // namespace
}  // namespace plumb
