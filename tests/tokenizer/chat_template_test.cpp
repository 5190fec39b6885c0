// ChatTemplate against jinja2: fixtures/chat/*.json hold real chat template texts and what jinja2 renders
// from them, the way Hugging Face transformers runs them (tools/reference/make_chat_template_fixtures.py).
// plumb must detect each template's style, render every conversation it accepts to exactly the same
// text, refuse every conversation the real template refuses (quoting its words), and refuse templates it
// cannot render, saying why.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plumb/core/error.h"
#include "plumb/tokenizer/chat_template.h"
#include "plumb/tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_fixtures.h"

namespace plumb {
namespace {

using nlohmann::json;

// Every style by name, in ChatStyleName's spelling.
const std::vector<std::string> kStyleNames = {"chatml",  "llama3", "llama2",    "gemma", "gemma3",
                                              "mistral", "phi3",   "phi4-mini", "olmo2", "qwen3"};

struct Fixture {
  std::string file;
  json data;
};

std::vector<Fixture> LoadFixtures() {
  const std::filesystem::path dir = std::filesystem::path(PLUMB_SOURCE_DIR) / "fixtures" / "chat";
  std::vector<Fixture> fixtures;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    fixtures.push_back({entry.path().filename().string(), json::parse(text.str())});
  }
  std::sort(fixtures.begin(), fixtures.end(),
            [](const Fixture& a, const Fixture& b) { return a.file < b.file; });
  return fixtures;
}

const std::vector<Fixture>& Fixtures() {
  static const std::vector<Fixture> fixtures = LoadFixtures();
  return fixtures;
}

const Fixture& FixtureNamed(const std::string& file) {
  const auto it =
      std::find_if(Fixtures().begin(), Fixtures().end(), [&](const Fixture& f) { return f.file == file; });
  if (it == Fixtures().end()) throw MakeError("fixtures/chat/", file, " is missing");
  return *it;
}

ChatTemplate TemplateOf(const json& fixture) {
  return ChatTemplate::FromJinja(fixture["template"].get<std::string>(),
                                 fixture["bos_token"].get<std::string>(),
                                 fixture["eos_token"].get<std::string>());
}

std::vector<ChatMessage> MessagesOf(const json& c) {
  std::vector<ChatMessage> messages;
  for (const json& m : c["messages"]) messages.push_back({m["role"], m["content"]});
  return messages;
}

// The plumb::Error message of f() ("" if it does not throw).
template <typename F>
std::string ErrorOf(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string CaseName(const Fixture& f, const json& c) {
  return f.file + " / " + c["name"].get<std::string>() +
         (c["add_generation_prompt"].get<bool>() ? " + generation prompt" : "");
}

// Guards against a test that passes because the fixtures are missing or were thinned out.
TEST(ChatTemplateFixtures, CoverEveryStyleAndSomeRefusals) {
  std::set<std::string> styles;
  int refused = 0;
  for (const Fixture& f : Fixtures()) {
    if (f.data["style"].is_null()) {
      ++refused;
    } else {
      styles.insert(f.data["style"].get<std::string>());
    }
  }
  EXPECT_EQ(styles, std::set<std::string>(kStyleNames.begin(), kStyleNames.end()));
  EXPECT_GE(refused, 3);
}

TEST(ChatTemplateFixtures, DetectTheStyleAndDefaultSystemPromptOfEachRealTemplate) {
  for (const Fixture& f : Fixtures()) {
    if (f.data["style"].is_null()) continue;
    SCOPED_TRACE(f.file);
    const ChatTemplate t = TemplateOf(f.data);
    EXPECT_EQ(ChatStyleName(t.style()), f.data["style"].get<std::string>());
    // Derived by the generator from the template's rendering of a lone user message; plumb reads it from
    // the template's source.
    EXPECT_EQ(t.default_system_prompt(), f.data["default_system_prompt"].get<std::string>());
  }
}

TEST(ChatTemplateFixtures, SmolLm2DefaultSystemPromptIsFound) {
  // The model plumb runs: its template must not render as plain ChatML.
  EXPECT_FALSE(TemplateOf(FixtureNamed("smollm2-135m-instruct.json").data).default_system_prompt().empty());
}

TEST(ChatTemplateFixtures, RefuseTemplatesPlumbCannotRenderSayingWhy) {
  for (const Fixture& f : Fixtures()) {
    if (!f.data["style"].is_null()) continue;
    SCOPED_TRACE(f.file);
    const std::string message = ErrorOf([&] { TemplateOf(f.data); });
    ASSERT_FALSE(message.empty());
    EXPECT_NE(message.find(f.data["refusal"].get<std::string>()), std::string::npos) << message;
    for (const std::string& name : kStyleNames) EXPECT_NE(message.find(name), std::string::npos) << message;
    EXPECT_NE(message.find("--chat-template"), std::string::npos) << message;
    // Quotes the start of the template (the fixtures' first 16 characters are printable ASCII).
    EXPECT_NE(message.find(f.data["template"].get<std::string>().substr(0, 16)), std::string::npos)
        << message;
  }
}

TEST(ChatTemplateFixtures, RenderExactlyWhatJinja2Renders) {
  int compared = 0;
  for (const Fixture& f : Fixtures()) {
    if (f.data["style"].is_null()) continue;
    const ChatTemplate t = TemplateOf(f.data);
    for (const json& c : f.data["cases"]) {
      if (!c["plumb_accepts"].get<bool>()) continue;
      SCOPED_TRACE(CaseName(f, c));
      EXPECT_EQ(t.Render(MessagesOf(c), c["add_generation_prompt"].get<bool>()),
                c["rendered"].get<std::string>());
      ++compared;
    }
  }
  EXPECT_GE(compared, 200);
}

TEST(ChatTemplateFixtures, RefuseWhatTheRealTemplateRefusesInItsWords) {
  int refused_by_both = 0;
  for (const Fixture& f : Fixtures()) {
    if (f.data["style"].is_null()) continue;
    const ChatTemplate t = TemplateOf(f.data);
    for (const json& c : f.data["cases"]) {
      if (c["plumb_accepts"].get<bool>()) continue;
      SCOPED_TRACE(CaseName(f, c));
      const std::string message =
          ErrorOf([&] { t.Render(MessagesOf(c), c["add_generation_prompt"].get<bool>()); });
      ASSERT_FALSE(message.empty()) << "plumb rendered a conversation it should refuse";
      EXPECT_NE(message.find(ChatStyleName(t.style())), std::string::npos) << message;
      if (c.contains("jinja_error")) {
        EXPECT_NE(message.find(c["jinja_error"].get<std::string>()), std::string::npos) << message;
        ++refused_by_both;
      }
    }
  }
  EXPECT_GE(refused_by_both, 10);
}

// The chat loop keeps the KV cache of the conversation so far and prefills only what a new user turn adds.
// That is valid only if rendering the conversation so far (ending with the assistant's reply, no
// generation prompt) is a prefix of rendering it plus the next user message with the generation prompt.
// It holds for most styles: each message renders from itself, its position and messages[0] alone, and
// the generation prompt only appends (Llama 2 and Mistral have none). It fails, as jinja2 confirms, for
// Phi-3.5 and Phi-4-mini, which end a prompt without a generation prompt with EOS, and for Qwen3, which
// writes an empty <think> block into the last reply and drops it once a user message follows; the chat
// loop (ChatSession) compares texts and re-prefills whenever the check below would fail, so those cost a
// re-prefill, not a wrong prompt. Two caveats the loop handles, not this class:
// Llama 2/3 and Gemma strip the reply's surrounding whitespace, so the rendered reply can differ from the
// tokens the model generated, and the text prefix is a token prefix only if tokenization does not merge
// across the boundary.
TEST(ChatTemplateFixtures, PrefixPropertyHoldsAsJinja2Says) {
  for (const Fixture& f : Fixtures()) {
    if (f.data["style"].is_null()) continue;
    SCOPED_TRACE(f.file);
    const ChatTemplate t = TemplateOf(f.data);
    int checked = 0;
    bool holds = true;
    for (const json& c : f.data["cases"]) {
      std::vector<ChatMessage> so_far = MessagesOf(c);
      if (!c["plumb_accepts"].get<bool>() || c["add_generation_prompt"].get<bool>() || so_far.empty() ||
          so_far.back().role != "assistant") {
        continue;
      }
      std::vector<ChatMessage> next = so_far;
      next.push_back({"user", "And one more thing?"});
      const std::string before = t.Render(so_far, false);
      const std::string after = t.Render(next, true);
      ++checked;
      holds = holds && after.starts_with(before);
    }
    EXPECT_GE(checked, 2);
    EXPECT_EQ(holds, f.data["prefix_property"].get<bool>());
    const std::string style = f.data["style"].get<std::string>();
    if (style != "phi3" && style != "phi4-mini" && style != "qwen3") {
      EXPECT_TRUE(holds) << "the chat loop would have to re-prefill every turn";
    }
  }
}

TEST(ChatTemplateFixtures, PrefixPropertyHoldsForTemplatesChosenByName) {
  const std::vector<ChatMessage> so_far = {
      {"system", " sys "}, {"user", " q1 "}, {"assistant", " a1 "}, {"user", "q2"}, {"assistant", "a2\n"}};
  for (const char* name : {"chatml", "llama3", "llama2", "gemma3", "olmo2"}) {
    SCOPED_TRACE(name);
    const ChatTemplate t = ChatTemplate::FromName(name, "<s>", "</s>");
    std::vector<ChatMessage> next = so_far;
    next.push_back({"user", "q3"});
    EXPECT_TRUE(t.Render(next, true).starts_with(t.Render(so_far, false)));
  }
  const std::vector<ChatMessage> no_system(so_far.begin() + 1, so_far.end());
  std::vector<ChatMessage> next = no_system;
  next.push_back({"user", "q3"});
  for (const char* name : {"gemma", "mistral"}) {  // no system role
    SCOPED_TRACE(name);
    const ChatTemplate t = ChatTemplate::FromName(name, "<bos>", "<eos>");
    EXPECT_TRUE(t.Render(next, true).starts_with(t.Render(no_system, false)));
  }
}

// --- choosing a template by name, and templates that are not in the fixtures
// ---------------------------------

TEST(ChatTemplate, FromNameKnowsEveryStyleByItsName) {
  for (const std::string& name : kStyleNames) {
    const ChatTemplate t = ChatTemplate::FromName(name, "<s>", "</s>");
    EXPECT_EQ(ChatStyleName(t.style()), name);
    EXPECT_EQ(t.default_system_prompt(), "");
  }
}

TEST(ChatTemplate, FromNameListsTheNamesForAnUnknownOne) {
  const std::string message = ErrorOf([] { ChatTemplate::FromName("ChatML", "", ""); });
  EXPECT_NE(message.find("'ChatML'"), std::string::npos) << message;
  for (const std::string& name : kStyleNames) EXPECT_NE(message.find(name), std::string::npos) << message;
}

TEST(ChatTemplate, FromNameChatMlHasNoDefaultSystemTurn) {
  const ChatTemplate t = ChatTemplate::FromName("chatml", "", "");
  EXPECT_EQ(t.Render({{"user", "hi"}}, true).find("system"), std::string::npos);
}

TEST(ChatTemplate, EmptyTemplateIsAnErrorNamingTheChoices) {
  for (const char* text : {"", " \n\t "}) {
    const std::string message = ErrorOf([&] { ChatTemplate::FromJinja(text, "", ""); });
    EXPECT_NE(message.find("empty"), std::string::npos) << message;
    EXPECT_NE(message.find("--chat-template"), std::string::npos) << message;
  }
}

TEST(ChatTemplate, RefusesReasoningAndNewerGemmaTemplates) {
  const std::string think =
      "{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n'}}{% "
      "endfor %}"
      "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n<think>\\n' }}{% endif %}";
  EXPECT_NE(ErrorOf([&] { ChatTemplate::FromJinja(think, "", ""); }).find("<think>"), std::string::npos);
  const std::string gemma_with_system =
      "{{ bos_token }}{% for m in messages %}{{ '<start_of_turn>' + m['role'] + '\\n' + m['content'] | trim "
      "+ "
      "'<end_of_turn>\\n' }}{% endfor %}";
  EXPECT_NE(
      ErrorOf([&] { ChatTemplate::FromJinja(gemma_with_system, "", ""); }).find("accepts system messages"),
      std::string::npos);
}

// Gemma 3's template is recognised with its newlines real (as tokenizer_config.json decodes them, and GGUF
// stores them) or written as Jinja escapes; a fine-tune that joins the system prompt with one newline, or
// names the assistant otherwise, is another format and refused.
TEST(ChatTemplate, RecognisesGemma3ByItsSystemPrefixOnly) {
  const std::string real = FixtureNamed("gemma3-it.json").data["template"].get<std::string>();
  EXPECT_EQ(ChatTemplate::FromJinja(real, "<bos>", "<eos>").style(), ChatStyle::kGemma3);
  const auto replaced = [&](const std::string& from, const std::string& to) {
    std::string text = real;
    const std::size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
  };
  EXPECT_EQ(
      ChatTemplate::FromJinja(replaced("['content'] + '\n\n'", "['content'] + '\\n\\n'"), "", "").style(),
      ChatStyle::kGemma3);
  for (const std::string& variant : {replaced("['content'] + '\n\n'", "['content'] + '\n'"),
                                     replaced("set role = \"model\"", "set role = \"reflect\"")}) {
    EXPECT_NE(ErrorOf([&] { ChatTemplate::FromJinja(variant, "", ""); }).find("is not Gemma 3's"),
              std::string::npos);
  }
}

// Where the messages lie in a Gemma 3 rendering: the system text as it is, then each message stripped (the
// "\n\n" that joins the system text to the first user message is the template's), as the fixture's
// generator places them with Python's strip(). Every accepted case of the real template's fixture.
TEST(ChatTemplateFixtures, Gemma3ContentRangesHoldTheMessages) {
  const Fixture& f = FixtureNamed("gemma3-it.json");
  const ChatTemplate t = TemplateOf(f.data);
  int checked = 0;
  for (const json& c : f.data["cases"]) {
    if (!c["plumb_accepts"].get<bool>()) continue;
    SCOPED_TRACE(CaseName(f, c));
    const std::vector<ChatMessage> messages = MessagesOf(c);
    const RenderedChat r = t.RenderWithContents(messages, c["add_generation_prompt"].get<bool>());
    EXPECT_EQ(r.text, c["rendered"].get<std::string>());
    const bool has_system = messages[0].role == "system";
    std::vector<std::string> actual;
    for (std::size_t k = 0; k < r.contents.size(); ++k) {
      const auto [begin, end] = r.contents[k];
      ASSERT_LE(begin, end);
      ASSERT_LE(end, r.text.size());
      if (k > 0) {
        ASSERT_LE(r.contents[k - 1].second, begin);
      }
      actual.push_back(r.text.substr(begin, end - begin));
    }
    EXPECT_EQ(actual, c["contents"].get<std::vector<std::string>>());
    if (has_system && messages.size() > 1) {
      EXPECT_EQ(r.text.substr(r.contents[0].second, 2), "\n\n");
    }
    ++checked;
  }
  EXPECT_GE(checked, 30);
}

// A copy of a fixture's template with one published marker replaced, to check that a variant which renders
// other text is refused rather than rendered as the style it resembles.
std::string Replaced(const std::string& fixture_file, const std::string& from, const std::string& to) {
  std::string text = FixtureNamed(fixture_file).data["template"].get<std::string>();
  const std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << fixture_file << ": " << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

// Qwen3's two published revisions are one style; a copy that also keeps the reasoning of replies before
// the last query (llama.cpp's later edit) or opens <think> in the generation prompt (the 2507 Thinking
// models) writes other text, and is refused.
TEST(ChatTemplate, RecognisesQwen3OnlyAsPublished) {
  for (const char* file : {"qwen3-0.6b.json", "qwen3-8b.json"}) {
    SCOPED_TRACE(file);
    EXPECT_EQ(TemplateOf(FixtureNamed(file).data).style(), ChatStyle::kQwen3);
    for (const std::string& variant :
         {Replaced(file, "ns.last_query_index %}", "ns.last_query_index or reasoning_content %}"),
          Replaced(file, "{{- '<|im_start|>assistant\\n' }}",
                   "{{- '<|im_start|>assistant\\n<think>\\n' }}")}) {
      EXPECT_NE(ErrorOf([&] { ChatTemplate::FromJinja(variant, "", ""); }).find("not Qwen3's"),
                std::string::npos);
    }
  }
}

// Phi-3.5's template drops an empty system message; a Phi-3 revision that writes it is another format.
// Phi-4-mini's has no newlines. OLMo 2's is recognised by all its branches.
TEST(ChatTemplate, RecognisesPhiAndOlmo2OnlyAsPublished) {
  const std::string phi3_keeps_empty_system =
      Replaced("phi3.5-mini-instruct.json", " and message['content'] %}", " %}");
  EXPECT_NE(ErrorOf([&] {
              ChatTemplate::FromJinja(phi3_keeps_empty_system, "", "");
            }).find("neither Phi-3.5-mini's nor Phi-4-mini's"),
            std::string::npos);
  const std::string olmo2_other_reply =
      Replaced("olmo2-instruct.json", "message['content'] + eos_token + '\n'", "message['content'] + '\n'");
  EXPECT_NE(ErrorOf([&] { ChatTemplate::FromJinja(olmo2_other_reply, "", ""); }).find("not recognised"),
            std::string::npos);
  // Jinja's \n escape renders the same newline as a real one.
  const std::string olmo2_escaped =
      Replaced("olmo2-instruct.json", "'<|user|>\n' + message['content'] + '\n'",
               "'<|user|>\\n' + message['content'] + '\\n'");
  EXPECT_EQ(ChatTemplate::FromJinja(olmo2_escaped, "", "").style(), ChatStyle::kOlmo2);
}

// Where the messages lie in every accepted rendering: ordered, disjoint, inside the text; and for Qwen3,
// which splits a reply into reasoning and answer, exactly the pieces the template takes from it.
TEST(ChatTemplateFixtures, ContentRangesAreOrderedAndHoldQwen3sReasoningAndAnswers) {
  for (const Fixture& f : Fixtures()) {
    if (f.data["style"].is_null()) continue;
    const ChatTemplate t = TemplateOf(f.data);
    for (const json& c : f.data["cases"]) {
      if (!c["plumb_accepts"].get<bool>()) continue;
      SCOPED_TRACE(CaseName(f, c));
      const RenderedChat r = t.RenderWithContents(MessagesOf(c), c["add_generation_prompt"].get<bool>());
      std::size_t at = 0;
      std::vector<std::string> pieces;
      for (const auto& [begin, end] : r.contents) {
        ASSERT_LE(at, begin);
        ASSERT_LE(begin, end);
        ASSERT_LE(end, r.text.size());
        at = end;
        pieces.push_back(r.text.substr(begin, end - begin));
      }
      if (f.file == "qwen3-8b.json" && c["name"] == "think_in_replies") {
        EXPECT_EQ(pieces, (std::vector<std::string>{"sys", "q1", "answer 1", "q2", "step 2", "answer 2"}));
      }
    }
  }
}

// --- tools: Qwen2.5's and Qwen3's tool blocks, tool calls and tool results --------------------------------

// A fixture's tool cases read again keeping key order (nlohmann::json sorts keys; `tojson` does not).
using OrderedJson = nlohmann::ordered_json;

OrderedJson ToolCasesOf(const Fixture& f) {
  const std::filesystem::path path = std::filesystem::path(PLUMB_SOURCE_DIR) / "fixtures" / "chat" / f.file;
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return OrderedJson::parse(text.str())["tool_cases"];
}

// As plumb serve hands them over: each tool's and each call's arguments' `tojson` text.
std::vector<std::string> ToolsOf(const OrderedJson& c) {
  std::vector<std::string> tools;
  if (!c["tools"].is_null()) {
    for (const OrderedJson& tool : c["tools"]) tools.push_back(TemplateJson(tool.dump()));
  }
  return tools;
}

std::vector<ChatMessage> ToolMessagesOf(const OrderedJson& c) {
  std::vector<ChatMessage> messages;
  for (const OrderedJson& m : c["messages"]) {
    ChatMessage message{m["role"], m["content"]};
    if (m.contains("tool_calls")) {
      for (const OrderedJson& call : m["tool_calls"]) {
        message.tool_calls.push_back(
            {call["function"]["name"], TemplateJson(call["function"]["arguments"].dump())});
      }
    }
    messages.push_back(std::move(message));
  }
  return messages;
}

TEST(ChatTemplateFixtures, ToolFormatIsFoundInQwenTemplatesOnly) {
  int with_tools = 0;
  for (const Fixture& f : Fixtures()) {
    if (f.data["style"].is_null()) continue;
    SCOPED_TRACE(f.file);
    const ToolFormat format = TemplateOf(f.data).tool_format();
    const json& expected = f.data["tool_format"];
    if (expected.is_null()) {
      EXPECT_EQ(format, ToolFormat::kNone);
    } else {
      ++with_tools;
      EXPECT_EQ(format, expected == "qwen2.5" ? ToolFormat::kQwen25 : ToolFormat::kQwen3);
    }
  }
  EXPECT_EQ(with_tools, 3);
  EXPECT_EQ(ChatTemplate::FromName("qwen3", "", "<|im_end|>").tool_format(), ToolFormat::kQwen3);
  EXPECT_EQ(ChatTemplate::FromName("chatml", "", "<|im_end|>").tool_format(), ToolFormat::kNone);
}

TEST(ChatTemplateFixtures, RenderToolConversationsExactlyAsJinja2Does) {
  int compared = 0;
  for (const Fixture& f : Fixtures()) {
    if (f.data["style"].is_null() || f.data["tool_format"].is_null()) continue;
    const ChatTemplate t = TemplateOf(f.data);
    for (const OrderedJson& c : ToolCasesOf(f)) {
      SCOPED_TRACE(f.file + " / " + c["name"].get<std::string>() +
                   (c["add_generation_prompt"].get<bool>() ? " + generation prompt" : ""));
      const RenderedChat r =
          t.RenderWithContents(ToolMessagesOf(c), c["add_generation_prompt"].get<bool>(), ToolsOf(c));
      EXPECT_EQ(r.text, c["rendered"].get<std::string>());
      // The tools' texts, names, arguments and results are contents: never read as control tokens.
      std::size_t at = 0;
      for (const auto& [begin, end] : r.contents) {
        ASSERT_LE(at, begin);
        ASSERT_LE(begin, end);
        ASSERT_LE(end, r.text.size());
        at = end;
      }
      ++compared;
    }
  }
  EXPECT_GE(compared, 70);
}

TEST(ChatTemplate, TemplatesWithoutToolUseRefuseToolsToolCallsAndToolResults) {
  const ChatTemplate t = ChatTemplate::FromName("chatml", "", "<|im_end|>");
  const std::vector<ChatMessage> question = {{"user", "q"}};
  EXPECT_NE(ErrorOf([&] { t.RenderWithContents(question, true, {"{}"}); }).find("does not write tools"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] {
              t.Render({{"user", "q"}, {"tool", "42"}}, true);
            }).find("messages[1]"),
            std::string::npos);
  const std::vector<ChatMessage> call = {{"user", "q"}, {"assistant", "", {{"f", "{}"}}}};
  EXPECT_NE(ErrorOf([&] { t.Render(call, true); }).find("does not write tool calls"), std::string::npos);
  const ChatTemplate qwen3 = ChatTemplate::FromName("qwen3", "", "<|im_end|>");
  const std::vector<ChatMessage> user_call = {{"user", "q", {{"f", "{}"}}}};
  EXPECT_NE(ErrorOf([&] { qwen3.Render(user_call, true); }).find("only assistant messages"),
            std::string::npos);
}

TEST(TemplateJson, WritesJsonDumpsLayoutInTheGivenKeyOrder) {
  EXPECT_EQ(TemplateJson(R"({"b":1,"a":[1,2.5,{}],"c":{"x":null,"y":true},"d":[]})"),
            R"({"b": 1, "a": [1, 2.5, {}], "c": {"x": null, "y": true}, "d": []})");
  // ensure_ascii=False: non-ASCII as it is; control characters escaped as Python does.
  EXPECT_EQ(TemplateJson("\"caf\u00e9 \\u00e9 \\n \\u001f \\\"\""), "\"caf\u00e9 \u00e9 \\n \\u001f \\\"\"");
  EXPECT_NE(ErrorOf([] { TemplateJson("{"); }).find("not valid JSON"), std::string::npos);
}

TEST(ChatTemplate, MistralRefusesOtherRolesInItsTemplatesWords) {
  const ChatTemplate t = ChatTemplate::FromName("mistral", "<s>", "</s>");
  std::string message = ErrorOf([&] { t.Render({{"system", "s"}, {"user", "a"}}, true); });
  EXPECT_NE(message.find("messages[0] (role 'system')"), std::string::npos) << message;
  EXPECT_NE(message.find("must alternate"), std::string::npos) << message;
  message = ErrorOf([&] { t.Render({{"user", "a"}, {"tool", "b"}}, true); });
  EXPECT_NE(message.find("Only user and assistant roles are supported!"), std::string::npos) << message;
  EXPECT_EQ(t.Render({{"user", " a "}, {"assistant", " b "}, {"user", "c"}}, true),
            "<s>[INST]  a  [/INST] b </s>[INST] c [/INST]");
}

TEST(ChatTemplate, QuotesAnUnknownTemplateOnOneLine) {
  const std::string text =
      "Line one\nline two\t\x01 and a long tail that goes past sixty bytes for sure, surely";
  const std::string message = ErrorOf([&] { ChatTemplate::FromJinja(text, "", ""); });
  EXPECT_NE(message.find("\"Line one\\nline two\\t\\x01 and a long"), std::string::npos) << message;
  EXPECT_NE(message.find("...\""), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST(ChatTemplate, DefaultSystemPromptDecodesJinjaEscapesOrRefuses) {
  const std::string escaped =
      R"({% if messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nIt\'s "fine"\\ok<|im_end|>\n' }}{% endif %})"
      R"({% for m in messages %}{{'<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n'}}{% endfor %})";
  EXPECT_EQ(ChatTemplate::FromJinja(escaped, "", "").default_system_prompt(), "It's \"fine\"\\ok");

  // A quote in the text between tags must not start a literal; a literal in a comment does not count.
  const std::string text_between_tags =
      "Don't {# '<|im_start|>system\nfrom a comment<|im_end|>' #}{{ '<|im_start|>system\nreal<|im_end|>\n' "
      "}}";
  EXPECT_EQ(ChatTemplate::FromJinja(text_between_tags, "", "").default_system_prompt(), "real");

  const std::string unknown_escape = R"({{ '<|im_start|>system\x41<|im_end|>\n' }})";
  EXPECT_EQ(ChatTemplate::FromJinja(unknown_escape, "", "").default_system_prompt(), "")
      << "not a system header: system is followed by \\x41, not a newline";
  const std::string bad_escape = R"({{ '<|im_start|>system\nA\x41<|im_end|>\n' }})";
  EXPECT_NE(ErrorOf([&] { ChatTemplate::FromJinja(bad_escape, "", ""); }).find("\\x"), std::string::npos);

  const std::string two =
      "{{ '<|im_start|>system\nA<|im_end|>\n' }}{{ '<|im_start|>system\nB<|im_end|>\n' }}";
  EXPECT_NE(ErrorOf([&] { ChatTemplate::FromJinja(two, "", ""); }).find("two different"), std::string::npos);

  const std::string unterminated = "<|im_start|><|im_end|>{{ 'abc }}";
  EXPECT_NE(ErrorOf([&] { ChatTemplate::FromJinja(unterminated, "", ""); }).find("byte offset 25"),
            std::string::npos);
}

// Python's strip() sees only valid UTF-8 (a str); plumb's contents are bytes. The rule: bytes that are
// not a valid UTF-8 sequence are not whitespace, and stripping never reads past the content.
TEST(ChatTemplate, StripTreatsInvalidUtf8AsText) {
  const ChatTemplate t = ChatTemplate::FromName("gemma", "", "");
  const auto body = [&](const std::string& content) {
    const std::string out = t.Render({{"user", content}}, false);
    const std::string head = "<start_of_turn>user\n";
    const std::string tail = "<end_of_turn>\n";
    return out.substr(head.size(), out.size() - head.size() - tail.size());
  };
  EXPECT_EQ(body(" \xff "), "\xff");
  EXPECT_EQ(body("x\xe3\x80"), "x\xe3\x80");          // U+3000 cut short: not a space
  EXPECT_EQ(body("\xe3\x80\x80x\xe3\x80\x80"), "x");  // U+3000 whole: a space
  EXPECT_EQ(body("\xc2\xa0\xc0\xa0"), "\xc0\xa0");    // overlong U+0020 is not a space
  EXPECT_EQ(body("\x80\x80\x80\x80\x80 "), "\x80\x80\x80\x80\x80");
  EXPECT_EQ(body(std::string("a\0 ", 3)), std::string("a\0", 2));  // NUL is not whitespace in Python
}

TEST(ChatTemplate, RenderNamesTheOffendingMessage) {
  const ChatTemplate chatml = ChatTemplate::FromName("chatml", "", "");
  std::string message = ErrorOf([&] { chatml.Render({{"user", "a"}, {"function", "b"}}, true); });
  EXPECT_NE(message.find("messages[1] (role 'function')"), std::string::npos) << message;
  EXPECT_NE(message.find("unknown role"), std::string::npos) << message;
  message = ErrorOf([&] { chatml.Render({{"user", "a"}, {"system", "b"}}, true); });
  EXPECT_NE(message.find("messages[1] (role 'system')"), std::string::npos) << message;
  message = ErrorOf([&] { chatml.Render({}, true); });
  EXPECT_NE(message.find("empty"), std::string::npos) << message;

  const ChatTemplate llama2 = ChatTemplate::FromName("llama2", "<s>", "</s>");
  message = ErrorOf([&] { llama2.Render({{"system", "s"}, {"user", "a"}, {"user", "b"}}, true); });
  EXPECT_NE(message.find("messages[2] (role 'user')"), std::string::npos) << message;
  EXPECT_NE(message.find("must alternate"), std::string::npos) << message;
}

// ChatTemplateFor: the model's own template, or the style a user names instead of it.
TEST(ChatTemplateFor, UsesTheModelsTemplateOrTheNamedStyleAndListsTheStylesWhenItCannot) {
  TokenizerSpec spec =
      Tokenizer::FromTokenizerJson(testing::TokenizerFixture("bpe-tiny/tokenizer.json")).spec();
  spec.chat_template = FixtureNamed("qwen2-instruct.json").data["template"].get<std::string>();
  EXPECT_EQ(ChatTemplateFor(Tokenizer(spec)).style(), ChatStyle::kChatMl);
  EXPECT_EQ(ChatTemplateFor(Tokenizer(spec), "llama3").style(), ChatStyle::kLlama3);

  const std::string styles =
      "choose a style: chatml, llama3, llama2, gemma, gemma3, mistral, phi3, phi4-mini, olmo2, qwen3";
  spec.chat_template = "";
  std::string message;
  try {
    ChatTemplateFor(Tokenizer(spec));
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("the model has no chat template"), std::string::npos) << message;
  EXPECT_NE(message.find(styles), std::string::npos) << message;
  spec.chat_template = "{{ something plumb has never seen }}";
  message.clear();
  try {
    ChatTemplateFor(Tokenizer(spec));
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find(styles), std::string::npos) << message;
  EXPECT_THROW(ChatTemplateFor(Tokenizer(spec), "alpaca"), Error);
}

// A model without a template whose vocabulary has Gemma's turn markers as control tokens (a Gemma 3 base
// GGUF) chats in the Gemma 3 style; the same texts as ordinary tokens choose nothing.
TEST(ChatTemplateFor, GemmaTurnControlTokensWithoutATemplateChooseGemma3) {
  TokenizerSpec spec =
      Tokenizer::FromTokenizerJson(testing::TokenizerFixture("bpe-tiny/tokenizer.json")).spec();
  spec.chat_template = "";
  spec.token_types.resize(spec.tokens.size(), kTokenNormal);
  for (const char* marker : {"<start_of_turn>", "<end_of_turn>"}) {
    spec.tokens.push_back(marker);
    spec.token_types.push_back(kTokenUserDefined);
  }
  EXPECT_NE(ErrorOf([&] { ChatTemplateFor(Tokenizer(spec)); }).find("the model has no chat template"),
            std::string::npos);
  spec.token_types[spec.tokens.size() - 2] = spec.token_types[spec.tokens.size() - 1] = kTokenControl;
  const ChatTemplate t = ChatTemplateFor(Tokenizer(spec));
  EXPECT_EQ(t.style(), ChatStyle::kGemma3);
  EXPECT_EQ(t.Render({{"system", "S"}, {"user", "U"}}, true),
            spec.tokens[spec.bos_id] + "<start_of_turn>user\nS\n\nU<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(ChatTemplateFor(Tokenizer(spec), "gemma").style(), ChatStyle::kGemma);  // a name still wins
}

}  // namespace
}  // namespace plumb
