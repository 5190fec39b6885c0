// TemplateJson: the text a chat template's `tojson` filter writes, as Hugging Face transformers defines
// the filter for chat templates (json.dumps with ensure_ascii=False, keys kept in order), so that tools and
// tool-call arguments render byte for byte as apply_chat_template renders them (fixtures/chat/).
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "plumb/core/error.h"
#include "plumb/tokenizer/chat_template.h"

namespace plumb {
namespace {

using Json = nlohmann::ordered_json;

// Python's json.dumps layout: ", " between items, ": " after keys, "[]" and "{}" for empty containers.
// Scalars are nlohmann's compact text, whose string escapes are Python's with ensure_ascii=False (only
// '"', '\\' and the control characters below U+0020 are escaped, \u00xx in lower case).
void Write(const Json& value, std::string& out) {
  if (value.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [key, item] : value.items()) {
      if (!first) out += ", ";
      first = false;
      out += Json(key).dump(-1, ' ', false, Json::error_handler_t::strict);
      out += ": ";
      Write(item, out);
    }
    out += '}';
  } else if (value.is_array()) {
    out += '[';
    for (std::size_t i = 0; i < value.size(); ++i) {
      if (i > 0) out += ", ";
      Write(value[i], out);
    }
    out += ']';
  } else {
    out += value.dump(-1, ' ', false, Json::error_handler_t::strict);
  }
}

}  // namespace

std::string TemplateJson(std::string_view json_text) {
  Json value;
  try {
    value = Json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw MakeError("tojson: not valid JSON: ", e.what());
  }
  std::string out;
  Write(value, out);
  return out;
}

}  // namespace plumb
