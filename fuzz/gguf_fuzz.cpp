// Feeds the input to GgufFile::FromBytes as a whole GGUF file, then, for a file that parses, reads it the way
// loading a model does: every metadata value through the typed getters, the first and last byte of every
// tensor's data, ConfigFromGguf (model/config.h), TokenizerSpecFromGguf and, when that succeeds, a Tokenizer
// built from the spec that encodes and decodes a short string, and the chat template it carries. A
// plumb::Error anywhere is the expected answer to a malformed file; a finding is anything else: a crash, a
// sanitizer report (out-of-bounds read, overflow, UB), another exception, a hang or an allocation past
// libFuzzer's limit.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "plumb/core/error.h"
#include "plumb/formats/gguf.h"
#include "plumb/model/config.h"
#include "plumb/tokenizer/chat_template.h"
#include "plumb/tokenizer/tokenizer.h"

using plumb::fuzz::Expect;
using plumb::fuzz::sink;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace plumb;
  std::optional<GgufFile> file;
  try {
    file.emplace(GgufFile::FromBytes(std::span<const std::uint8_t>(data, size), "fuzz.gguf"));
  } catch (const Error&) {
    return 0;
  }
  for (const auto& entry : file->metadata()) {
    const std::string& key = entry.first;  // (clang 14 cannot capture a structured binding)
    Expect([&] { (void)file->FindUint(key); });
    Expect([&] { (void)file->FindFloat(key); });
    Expect([&] { (void)file->FindBool(key); });
    Expect([&] { (void)file->FindString(key); });
    Expect([&] { (void)file->GetStringArray(key); });
    Expect([&] { (void)file->GetFloatArray(key); });
    Expect([&] { (void)file->GetIntArray(key); });
    if (file->FindValue(key) != &entry.second) __builtin_trap();
  }
  for (const GgufTensorInfo& t : file->tensors()) {
    const std::span<const std::uint8_t> bytes = t.bytes();
    if (!bytes.empty()) sink = static_cast<std::uint8_t>(bytes.front() ^ bytes.back());
    if (file->FindTensor(t.name) != &t) __builtin_trap();
  }
  Expect([&] { (void)ConfigFromGguf(*file); });
  Expect([&] {
    TokenizerSpec spec = TokenizerSpecFromGguf(*file);
    const Tokenizer tokenizer(std::move(spec));
    const std::vector<std::int32_t> ids = tokenizer.Encode("Hello, world! <s> 12345 \xC3\xA9", true, true);
    (void)tokenizer.Decode(ids);
    Expect([&] {
      const ChatTemplate chat = ChatTemplateFor(tokenizer);
      (void)chat.Render({{"user", "hi"}}, true);
    });
  });
  return 0;
}
