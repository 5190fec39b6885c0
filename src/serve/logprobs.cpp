#include "logprobs.h"

#include <cmath>

#include "plumb/tokenizer/unicode.h"

namespace plumb::serve {
namespace {

using nlohmann::json;

// OpenAI's stand-in for "very unlikely" (its docs: -9999.0); JSON has no -inf, which a masked-out or
// underflowing token's log-probability can be.
constexpr double kVeryUnlikely = -9999.0;

double Number(double logprob) {
  return std::isfinite(logprob) ? logprob : kVeryUnlikely;
}

json Bytes(const std::string& bytes) {
  json out = json::array();
  for (unsigned char b : bytes) out.push_back(b);
  return out;
}

// Code points in valid UTF-8: every byte but the continuation bytes (10xxxxxx) begins one.
std::size_t CodePoints(const std::string& text) {
  std::size_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

TokenText ShowToken(const Tokenizer& tokenizer, int id) {
  std::string bytes = tokenizer.TokenToPiece(id);
  if (bytes.empty()) bytes = tokenizer.spec().tokens[static_cast<std::size_t>(id)];
  return {unicode::ToValidUtf8(bytes), bytes};
}

json ChatLogprobs(const Tokenizer& tokenizer, std::span<const PositionLogprobs> positions) {
  const auto entry = [&](int token, double logprob) {
    const TokenText t = ShowToken(tokenizer, token);
    return json{{"token", t.text}, {"logprob", Number(logprob)}, {"bytes", Bytes(t.bytes)}};
  };
  json content = json::array();
  for (const PositionLogprobs& p : positions) {
    json e = entry(p.token, p.logprob);
    e["top_logprobs"] = json::array();
    for (const TokenLogprob& top : p.top) e["top_logprobs"].push_back(entry(top.token, top.logprob));
    content.push_back(std::move(e));
  }
  return {{"content", std::move(content)}, {"refusal", nullptr}};
}

CompletionLogprobs::CompletionLogprobs(const Tokenizer& tokenizer)
    : tokenizer_(tokenizer), decoder_(tokenizer) {}

void CompletionLogprobs::AddPrompt(std::span<const int> prompt, std::span<const PositionLogprobs> scored) {
  for (std::size_t i = 0; i < prompt.size(); ++i)
    Append(prompt[i], i == 0 || i > scored.size() ? nullptr : &scored[i - 1]);
}

void CompletionLogprobs::Add(std::span<const PositionLogprobs> positions) {
  for (const PositionLogprobs& p : positions) Append(p.token, &p);
}

void CompletionLogprobs::Append(int token, const PositionLogprobs* scored) {
  tokens_.push_back(ShowToken(tokenizer_, token).text);
  text_offset_.push_back(offset_);
  offset_ += CodePoints(decoder_.Push(token));
  if (!scored) {
    token_logprobs_.push_back(nullptr);
    top_logprobs_.push_back(nullptr);
    return;
  }
  token_logprobs_.push_back(Number(scored->logprob));
  // Two tokens may show as the same text (two halves of different characters both as U+FFFD): the more
  // probable one keeps the key.
  json top = json::object();
  for (const TokenLogprob& t : scored->top)
    top.emplace(ShowToken(tokenizer_, t.token).text, Number(t.logprob));
  top.emplace(ShowToken(tokenizer_, token).text, Number(scored->logprob));
  top_logprobs_.push_back(std::move(top));
}

json CompletionLogprobs::Take() {
  json out = {{"tokens", std::move(tokens_)},
              {"token_logprobs", std::move(token_logprobs_)},
              {"top_logprobs", std::move(top_logprobs_)},
              {"text_offset", std::move(text_offset_)}};
  tokens_ = token_logprobs_ = top_logprobs_ = text_offset_ = json::array();
  return out;
}

}  // namespace plumb::serve
