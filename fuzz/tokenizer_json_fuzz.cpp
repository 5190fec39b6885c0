// Feeds the input to Tokenizer::FromTokenizerJsonText as the text of a Hugging Face tokenizer.json (what
// Tokenizer::FromTokenizerJson reads from a file, without a tokenizer_config.json), then, for a tokenizer
// that loads, encodes a short fixed string (with and without special tokens) and decodes the ids, whole and
// one at a time through TokenToPiece. A plumb::Error is the expected answer to a malformed file; a finding is
// anything else: a crash, a sanitizer report, another exception (an nlohmann type_error escaping the reader
// included), a hang or an allocation past libFuzzer's limit.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace plumb;
  try {
    const Tokenizer tokenizer = Tokenizer::FromTokenizerJsonText(
        std::string_view(reinterpret_cast<const char*>(data), size), "fuzz/tokenizer.json");
    for (const bool special : {false, true}) {
      const std::vector<std::int32_t> ids =
          tokenizer.Encode(" Hello,  world!\n<s> 123 caf\xC3\xA9 \xF0\x9F\x99\x82", special, special);
      (void)tokenizer.Decode(ids);
      for (const std::int32_t id : ids) (void)tokenizer.TokenToPiece(id);
    }
    (void)tokenizer.Decode(std::vector<std::int32_t>{0, tokenizer.vocab_size() - 1});
  } catch (const Error&) {
  }
  return 0;
}
