// ChatSession on the default model (SmolLM2-135M-Instruct, fetched by scripts/fetch-model): the KV cache
// is kept between turns, only new text is prefilled, and an over-long conversation degrades gracefully.
#include "plumb/engine/chat_session.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "plumb/core/error.h"
#include "plumb/engine/text_model.h"

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

  static TextModel* loaded_;
};
TextModel* ChatSessionTest::loaded_ = nullptr;

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
}

}  // namespace
}  // namespace plumb
