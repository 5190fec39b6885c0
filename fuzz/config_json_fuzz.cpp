// Feeds the input to ParseConfigJson as the text of a Hugging Face config.json (model/config.h), and, for a
// config that parses, its ConfigToJson text back through ParseConfigJson, which must give the same text
// again. A plumb::Error is the expected answer to malformed text; a finding is anything else: a crash, a
// sanitizer report (signed overflow, a float-to-int conversion out of range, ...), another exception (an
// nlohmann type_error escaping the reader included), a hang, or a config that does not survive the round
// trip.
#include <cstddef>
#include <cstdint>
#include <string>

#include "plumb/core/error.h"
#include "plumb/model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace plumb;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const ModelConfig config = ParseConfigJson(text, "fuzz/config.json");
    const std::string written = ConfigToJson(config);
    if (ConfigToJson(ParseConfigJson(written, "fuzz/written.json")) != written) __builtin_trap();
  } catch (const Error&) {
  }
  return 0;
}
