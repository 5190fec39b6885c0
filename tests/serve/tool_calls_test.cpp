// Reading a reply for tool calls (src/serve/tool_calls.h): Qwen's <tool_call> blocks and the generic JSON,
// and every reply that does not parse returned whole as content, never as a malformed call.
#include <gtest/gtest.h>

#include <string>

#include "../src/serve/tool_calls.h"

namespace plumb::serve {
namespace {

const ToolReplyReader kQwen = {ToolFormat::kQwen3, {"get_weather", "search"}};
const ToolReplyReader kGeneric = {ToolFormat::kNone, {"get_weather"}};

TEST(ReadToolReply, QwenBlocksBecomeCallsAndTheTextBeforeThemContent) {
  const ToolReply r = ReadToolReply(
      kQwen,
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"search\", \"arguments\": {}}\n</tool_call>\n");
  EXPECT_EQ(r.content, "Let me check.");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, "{\"city\":\"Paris\"}");
  EXPECT_EQ(r.calls[1].arguments, "{}");
  EXPECT_EQ(r.calls[0].id.size(), 5u + 24u);
  EXPECT_NE(r.calls[0].id, r.calls[1].id);
}

TEST(ReadToolReply, WhatDoesNotParseIsContentWhole) {
  for (const std::string text : {
           "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa",    // cut off
           "<tool_call>\n{\"name\": \"delete_all\", \"arguments\": {}}\n</tool_call>",   // not a tool
           "<tool_call>\n{\"name\": \"search\", \"arguments\": \"q\"}\n</tool_call>",    // not an object
           "<tool_call>{\"name\": \"search\", \"arguments\": {}}</tool_call> and more",  // text after
       }) {
    SCOPED_TRACE(text);
    const ToolReply r = ReadToolReply(kQwen, text);
    EXPECT_TRUE(r.calls.empty());
    EXPECT_EQ(r.content, text);
  }
  EXPECT_EQ(ReadToolReply(kQwen, "plain answer").content, "plain answer");
}

TEST(ReadToolReply, GenericJsonIsACallOrAResponse) {
  ToolReply r =
      ReadToolReply(kGeneric, R"({"tool_call": {"name": "get_weather", "arguments": {"city": "Rome"}}})");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"city":"Rome"})");
  r = ReadToolReply(
      kGeneric,
      R"({"tool_calls":[{"name":"get_weather","arguments":{}},{"name":"get_weather","arguments":{}}]})");
  EXPECT_EQ(r.calls.size(), 2u);
  r = ReadToolReply(kGeneric, R"({"response": "Hi \"there\"\n"})");
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.content, "Hi \"there\"\n");
}

TEST(ReadToolReply, AGenericResponseCutShortIsItsTextSoFar) {
  EXPECT_EQ(ReadToolReply(kGeneric, R"({"response": "It is \"sunny)").content, "It is \"sunny");
  EXPECT_EQ(ReadToolReply(kGeneric, R"({"response":"a\)").content, "a");
  EXPECT_EQ(ReadToolReply(kGeneric, R"({"response": "caf\u00)").content, "caf");
  EXPECT_EQ(ReadToolReply(kGeneric, R"({"response": "x\ud83d)").content, "x");
  // A call cut short is not text: it comes back as it is.
  const std::string cut = R"({"tool_call": {"name": "get_weather", "argu)";
  EXPECT_EQ(ReadToolReply(kGeneric, cut).content, cut);
}

}  // namespace
}  // namespace plumb::serve
