// plumb chat's /save and /load files (cli/chat_file.h): what SaveConversation writes reads back the same, a
// chat request body loads as a conversation, and every refusal names the file and the JSON pointer (or byte)
// of what is wrong.
#include "plumb/cli/chat_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "plumb/core/error.h"
#include "support/errors.h"

namespace plumb::cli {
namespace {

namespace fs = std::filesystem;
using plumb::testing::ErrorOf;
using plumb::testing::ExpectMessageHas;
using Messages = std::vector<ChatMessage>;

// Compares roles and contents (ChatMessage has no operator==), naming the first difference.
void ExpectMessages(const Messages& actual, const Messages& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(actual[i].role, expected[i].role) << "message " << i;
    EXPECT_EQ(actual[i].content, expected[i].content) << "message " << i;
    EXPECT_TRUE(actual[i].tool_calls.empty()) << "message " << i;
  }
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class ChatFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::path(::testing::TempDir()) /
        ("plumb_chat_file_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(ChatFileTest, SavedConversationLoadsBackAsItWas) {
  const Messages messages = {
      {"system", "You are terse.\nAnswer in \"quotes\" and with a backslash \\ or two \\\\."},
      {"user", "Grüße aus Köln — 日本語 and an emoji 🐍, a tab\there"},
      {"assistant", "Line one\nLine two\r\nand {\"json\": [1, 2]}"},
      {"user", ""},
      {"assistant", std::string("a NUL \0 inside", 14)},
  };
  const std::string path = (dir_ / "chat.json").string();
  SaveConversation(path, messages);
  ExpectMessages(LoadConversation(path), messages);
  // Written as UTF-8 (not \u escapes: the file is for people to read too), ending in a newline.
  const std::string text = ReadFile(path);
  EXPECT_NE(text.find("Grüße aus Köln — 日本語"), std::string::npos) << text;
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  // Only the file itself: the temporary it was written through is gone.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(ChatFileTest, SavedFileIsAChatRequestBodyWithRoleBeforeContent) {
  const std::string path = (dir_ / "chat.json").string();
  SaveConversation(path, {{"user", "content first?"}, {"assistant", "no, role"}});
  const std::string text = ReadFile(path);
  // {"messages": [...]} as plumb serve's /v1/chat/completions takes it, and each message as people write it.
  EXPECT_EQ(text.find("{"), 0u) << text;
  EXPECT_NE(text.find("\"messages\""), std::string::npos) << text;
  std::size_t from = 0;
  for (int i = 0; i < 2; ++i) {
    const std::size_t role = text.find("\"role\"", from), content = text.find("\"content\"", from);
    ASSERT_NE(role, std::string::npos) << "message " << i << ": " << text;
    ASSERT_NE(content, std::string::npos) << "message " << i << ": " << text;
    EXPECT_LT(role, content) << "message " << i << ": " << text;
    from = content + 1;
  }
  ExpectMessages(ParseConversation(text, "chat.json"),
                 {{"user", "content first?"}, {"assistant", "no, role"}});
}

TEST_F(ChatFileTest, InvalidUtf8IsSavedAsReplacementCharacters) {
  // A reply cut inside a character ends in part of one; the file must stay JSON (valid UTF-8) all the same.
  const std::string path = (dir_ / "cut.json").string();
  SaveConversation(path, {{"user",
                           "a\xff"
                           "b"},
                          {"assistant", "caf\xc3"}});
  ExpectMessages(LoadConversation(path), {{"user",
                                           "a\xEF\xBF\xBD"
                                           "b"},
                                          {"assistant", "caf\xEF\xBF\xBD"}});
}

TEST_F(ChatFileTest, SaveReplacesAnExistingFileAndNamesAPathItCannotWrite) {
  const std::string path = (dir_ / "chat.json").string();
  SaveConversation(path, {{"user", "first"}, {"assistant", "reply"}, {"user", "more"}});
  SaveConversation(path, {{"user", "second"}});
  ExpectMessages(LoadConversation(path), {{"user", "second"}});
  SaveConversation(path, {});
  ExpectMessages(LoadConversation(path), {});

  const std::string nowhere = (dir_ / "no such dir" / "chat.json").string();
  ExpectMessageHas(ErrorOf([&] { SaveConversation(nowhere, {{"user", "x"}}); }), {nowhere});
  EXPECT_FALSE(fs::exists(dir_ / "no such dir"));
}

TEST(ParseConversation, AcceptsABareArrayOfMessages) {
  ExpectMessages(ParseConversation(R"([{"role": "user", "content": "hi"}])", "a.json"), {{"user", "hi"}});
  ExpectMessages(ParseConversation("[]", "a.json"), {});
  ExpectMessages(ParseConversation(R"({"messages": []})", "a.json"), {});
}

TEST(ParseConversation, AcceptsAChatRequestBodyIgnoringItsOtherKeys) {
  const std::string body = R"({
    "model": "smollm2",
    "temperature": 0.7,
    "stream": true,
    "messages": [
      {"role": "developer", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hello, "}, {"type": "text", "text": "world"}]},
      {"role": "assistant", "content": null, "tool_calls": []},
      {"role": "assistant", "content": "Hi.", "tool_calls": null, "name": "bot"},
      {"role": "user", "content": []}
    ],
    "max_tokens": 20
  })";
  // developer is OpenAI's newer name for system; text parts are joined with nothing between them.
  ExpectMessages(ParseConversation(body, "body.json"), {{"system", "Be brief."},
                                                        {"user", "Hello, world"},
                                                        {"assistant", ""},
                                                        {"assistant", "Hi."},
                                                        {"user", ""}});
}

TEST(ParseConversation, ASyntaxErrorNamesTheFileAndTheByte) {
  // nlohmann counts the byte it stopped at from 1: the '}' where a value should be is the 15th.
  const std::string message = ErrorOf([] { ParseConversation(R"({"messages": [})", "bad.json"); });
  ExpectMessageHas(message, {"bad.json: not JSON: syntax error at byte 15"});
  ExpectMessageHas(ErrorOf([] { ParseConversation("", "empty.json"); }),
                   {"empty.json: not JSON: syntax error at byte 1"});
  ExpectMessageHas(ErrorOf([] { ParseConversation("[] x", "t.json"); }),
                   {"t.json: not JSON: syntax error at byte 4"});
  // A number beyond double's range is nlohmann's out_of_range, not a parse_error: a plumb::Error all the same
  // (a request body's "temperature": 1e400 must not escape as another exception).
  ExpectMessageHas(ErrorOf([] { ParseConversation(R"({"temperature": 1e400, "messages": []})", "n.json"); }),
                   {"n.json: not JSON: ", "number overflow", "1e400"});
  // A string that is not UTF-8 is a syntax error too (the JSON text itself must be UTF-8).
  ExpectMessageHas(
      ErrorOf([] { ParseConversation("[{\"role\": \"user\", \"content\": \"\xff\"}]", "u.json"); }),
      {"u.json: not JSON: syntax error at byte"});
}

TEST(ParseConversation, RefusalsNameTheFileAndTheJsonPointer) {
  struct Case {
    std::string json;
    std::string expected;  // the whole start of the message, pointer included
  };
  const std::vector<Case> cases = {
      {R"({"model": "x"})", R"(c.json: no "messages" array)"},
      {R"({"messages": {"role": "user"}})", "c.json: messages must be an array"},
      {R"({"messages": "hi"})", "c.json: messages must be an array"},
      {"42", "c.json: the document must be an array"},
      {R"("hello")", "c.json: the document must be an array"},
      {R"({"messages": [{"role": "user", "content": "a"}, 7]})", "c.json: messages[1] must be an object"},
      {R"([["user", "hi"]])", "c.json: [0] must be an object"},
      {R"({"messages": [{"content": "a"}]})", "c.json: messages[0].role must be a string"},
      {R"([{"role": 1, "content": "a"}])", "c.json: [0].role must be a string"},
      {R"({"messages": [{"role": "user", "content": "a"}, {"role": "tool", "content": "42"}]})",
       R"(c.json: messages[1].role is "tool")"},
      {R"([{"role": "function", "content": "a"}])", R"(c.json: [0].role is "function")"},
      {R"([{"role": "System", "content": "a"}])", R"(c.json: [0].role is "System")"},
      {R"({"messages": [{"role": "user", "content": "a"},
                        {"role": "assistant", "content": null,
                         "tool_calls": [{"type": "function",
                                         "function": {"name": "f", "arguments": "{}"}}]}]})",
       "c.json: messages[1].tool_calls: plumb chat has no tools"},
      {R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                                                     {"type": "image_url", "image_url": {"url": "x"}}]}]})",
       R"(c.json: messages[0].content[1]: only parts of type "text")"},
      {R"([{"role": "user", "content": ["plain string part"]}])", "c.json: [0].content[0]: only parts"},
      {R"([{"role": "user", "content": [{"type": "text"}]}])",
       "c.json: [0].content[0].text must be a string"},
      {R"([{"role": "user", "content": [{"type": "text", "text": 5}]}])", "c.json: [0].content[0].text"},
      {R"([{"role": "user", "content": 5}])",
       "c.json: [0].content must be a string or an array of text parts"},
      // Only an assistant's content may be null (a reply that was all tool calls).
      {R"([{"role": "user", "content": null}])", "c.json: [0].content must be a string"},
      {R"([{"role": "system", "content": {"text": "a"}}])", "c.json: [0].content must be a string"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.json);
    const std::string message = ErrorOf([&] { ParseConversation(c.json, "c.json"); });
    EXPECT_EQ(message.substr(0, c.expected.size()), c.expected) << message;
  }
}

TEST_F(ChatFileTest, LoadNamesAPathItCannotRead) {
  const std::string missing = (dir_ / "missing.json").string();
  ExpectMessageHas(ErrorOf([&] { LoadConversation(missing); }), {missing, "cannot read the conversation"});
  const std::string directory = dir_.string();
  ExpectMessageHas(ErrorOf([&] { LoadConversation(directory); }), {directory});
  // A bad file's errors name the path given (the file), as ParseConversation's name.
  const std::string bad = (dir_ / "bad.json").string();
  std::ofstream(bad) << R"({"messages": [{"role": "tool", "content": "x"}]})";
  ExpectMessageHas(ErrorOf([&] { LoadConversation(bad); }), {bad + ": messages[0].role"});
}

}  // namespace
}  // namespace plumb::cli
