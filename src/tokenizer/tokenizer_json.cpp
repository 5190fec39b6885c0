// TokenizerSpec from a Hugging Face tokenizer.json (+ tokenizer_config.json beside it). Only configurations
// this tokenizer reproduces exactly are accepted; every other one is an error naming the field:
//   byte-level BPE  pre_tokenizer ByteLevel(use_regex), Sequence[Split(known regex), ByteLevel] or
//                   Sequence[Digits(individual), ByteLevel]; no normalizer; decoder ByteLevel
//   Llama-2 style   normalizer Sequence[Prepend(U+2581), Replace(" ", U+2581)], or pre_tokenizer
//                   Metaspace(U+2581, no split); BPE with byte_fallback
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "hf_regexes.h"
#include "plumb/core/error.h"
#include "plumb/tokenizer/tokenizer.h"

namespace plumb {
namespace {

using nlohmann::json;

constexpr const char* kSpaceSymbol = "\xE2\x96\x81";  // U+2581

json ParseJson(std::string_view text, const std::string& path) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    throw MakeError(path, ": invalid JSON at byte ", e.byte, ": ", e.what());
  } catch (const json::out_of_range& e) {  // a number beyond double's range, e.g. 1e400 (nlohmann's 406)
    throw MakeError(path, ": invalid JSON: ", e.what());
  }
}

json ReadJson(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw MakeError(path, ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  return ParseJson(text.str(), path);
}

class JsonReader {
 public:
  explicit JsonReader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void Fail(const std::string& field, const std::string& why) const {
    throw MakeError(source_, ": ", field, ": ", why);
  }
  const json& Object(const json& value, const std::string& field) const {
    if (!value.is_object()) Fail(field, "expected an object, got " + value.dump());
    return value;
  }
  std::string String(const json& object, const char* key, const std::string& field) const {
    auto it = object.find(key);
    if (it == object.end() || !it->is_string()) Fail(field + "." + key, "expected a string");
    return it->get<std::string>();
  }
  // object[key] when it is a string, `fallback` when it is absent or null; an error for any other value.
  std::string OptString(const json& object, const char* key, const std::string& fallback,
                        const std::string& field) const {
    auto it = object.find(key);
    if (it == object.end() || it->is_null()) return fallback;
    if (!it->is_string()) Fail(field + "." + key, "expected a string, got " + it->dump());
    return it->get<std::string>();
  }
  bool Bool(const json& object, const char* key, bool fallback, const std::string& field) const {
    auto it = object.find(key);
    if (it == object.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) Fail(field + "." + key, "expected true or false, got " + it->dump());
    return it->get<bool>();
  }
  // A key that must be absent, null or "" / false for the configuration to be one plumb reproduces.
  void Unset(const json& object, const char* key, const std::string& field) const {
    auto it = object.find(key);
    if (it == object.end() || it->is_null() || (it->is_string() && it->get<std::string>().empty()) ||
        (it->is_boolean() && !it->get<bool>())) {
      return;
    }
    Fail(field + "." + key, "is " + it->dump() + ", which is not supported");
  }

 private:
  std::string source_;
};

// object[key], or null when absent (operator[] on a const json must not be asked for a missing key).
const json& Get(const json& object, const char* key) {
  static const json null;
  auto it = object.find(key);
  return it == object.end() ? null : *it;
}

bool IsNull(const json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() || it->is_null();
}

// The pre-tokenizer name for a byte-level pre_tokenizer value.
std::string ByteLevelPre(const JsonReader& r, const json& pre) {
  const std::string field = "pre_tokenizer";
  r.Object(pre, field);
  const std::string type = r.String(pre, "type", field);
  auto check_byte_level = [&](const json& value, bool use_regex, const std::string& where) {
    r.Object(value, where);
    if (r.String(value, "type", where) != "ByteLevel") r.Fail(where, "expected ByteLevel");
    r.Unset(value, "add_prefix_space", where);
    if (r.Bool(value, "use_regex", true, where) != use_regex) {
      r.Fail(where + ".use_regex", use_regex ? "must be true here" : "must be false after a Split");
    }
  };
  if (type == "ByteLevel") {
    check_byte_level(pre, true, field);
    return "gpt2";
  }
  if (type != "Sequence") r.Fail(field + ".type", "'" + type + "' is not supported for a byte-level BPE");
  auto it = pre.find("pretokenizers");
  if (it == pre.end() || !it->is_array() || it->size() != 2) {
    r.Fail(field + ".pretokenizers", "expected [Split or Digits, ByteLevel]");
  }
  const json& first = r.Object((*it)[0], field + ".pretokenizers[0]");
  const std::string first_type = r.String(first, "type", field + ".pretokenizers[0]");
  if (first_type == "Digits") {
    if (!r.Bool(first, "individual_digits", false, field + ".pretokenizers[0]")) {
      r.Fail(field + ".pretokenizers[0].individual_digits", "only individual digits are supported");
    }
    check_byte_level((*it)[1], true, field + ".pretokenizers[1]");
    return "smollm";
  }
  if (first_type != "Split") {
    r.Fail(field + ".pretokenizers[0].type", "'" + first_type + "' is not supported (Split or Digits)");
  }
  const std::string where = field + ".pretokenizers[0]";
  auto pattern = first.find("pattern");
  if (pattern == first.end() || !pattern->is_object() || !pattern->contains("Regex") ||
      !(*pattern)["Regex"].is_string()) {
    r.Fail(where + ".pattern", "expected {\"Regex\": ...}");
  }
  const std::string regex = (*pattern)["Regex"].get<std::string>();
  if (r.String(first, "behavior", where) != "Isolated")
    r.Fail(where + ".behavior", "only Isolated is supported");
  r.Unset(first, "invert", where);
  check_byte_level((*it)[1], false, field + ".pretokenizers[1]");
  if (regex == kLlama3Regex) return "llama-bpe";
  if (regex == kQwen2Regex) return "qwen2";
  if (regex == kGpt2Regex) return "gpt2";
  r.Fail(where + ".pattern.Regex", "unknown pattern " + json(regex).dump() +
                                       " (known: the GPT-2, Llama-3 and Qwen2 pre-tokenizer regexes)");
}

// How a Llama-2 style tokenizer.json puts the space in front: "every" fragment, "first" only, or none.
std::string SentencePieceStyle(const JsonReader& r, const json& root) {
  const json& normalizer = Get(root, "normalizer");
  const json& pre = Get(root, "pre_tokenizer");
  if (!normalizer.is_null()) {
    if (!pre.is_null())
      r.Fail("pre_tokenizer", "must be null when the normalizer does the SentencePiece escaping");
    r.Object(normalizer, "normalizer");
    const std::string type = r.String(normalizer, "type", "normalizer");
    if (type != "Sequence") r.Fail("normalizer.type", "'" + type + "' is not supported");
    const json& list = Get(normalizer, "normalizers");
    bool prepend = false, replace = false;
    for (std::size_t i = 0; list.is_array() && i < list.size(); ++i) {
      const std::string where = "normalizer.normalizers[" + std::to_string(i) + "]";
      const json& item = r.Object(list[i], where);
      const std::string item_type = r.String(item, "type", where);
      if (item_type == "Prepend" && !prepend && !replace &&
          r.String(item, "prepend", where) == kSpaceSymbol) {
        prepend = true;
      } else if (item_type == "Replace" && !replace && item.contains("pattern") &&
                 Get(item, "pattern").is_object() &&
                 r.OptString(item["pattern"], "String", "", where + ".pattern") == " " &&
                 r.String(item, "content", where) == kSpaceSymbol) {
        replace = true;
      } else {
        r.Fail(where,
               item.dump() + " is not supported (only Prepend(\"\u2581\") then Replace(\" \", \"\u2581\"))");
      }
    }
    if (!replace) r.Fail("normalizer", "expected Replace(\" \", \"\u2581\")");
    return prepend ? "every" : "none";
  }
  r.Object(pre, "pre_tokenizer");
  if (r.String(pre, "type", "pre_tokenizer") != "Metaspace") {
    r.Fail("pre_tokenizer.type", "'" + pre["type"].dump() + "' is not supported with a byte-fallback BPE");
  }
  if (r.String(pre, "replacement", "pre_tokenizer") != kSpaceSymbol) {
    r.Fail("pre_tokenizer.replacement", "only \"\u2581\" is supported");
  }
  if (r.Bool(pre, "split", true, "pre_tokenizer")) r.Fail("pre_tokenizer.split", "only false is supported");
  std::string scheme = r.OptString(pre, "prepend_scheme", "always", "pre_tokenizer");
  if (scheme == "always") return "every";
  if (scheme == "first") return "first";
  if (scheme == "never") return "none";
  r.Fail("pre_tokenizer.prepend_scheme", "'" + scheme + "' is not supported");
}

// tokenizer_config.json names tokens as a string or as {"content": ...}.
std::optional<std::string> TokenName(const json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return std::nullopt;
}

// The tokenizer `root` (the JSON of `path`) describes, with the tokenizer_config.json beside `path` when
// read_config is set and there is one.
Tokenizer FromTokenizerJsonRoot(const json& root, const std::string& path, bool read_config) {
  const JsonReader r(path);
  r.Object(root, "(root)");
  if (!root.contains("model")) r.Fail("model", "is missing");
  const json& model = r.Object(root["model"], "model");
  const std::string type = r.OptString(model, "type", "BPE", "model");
  if (type != "BPE") r.Fail("model.type", "'" + type + "' is not supported (only BPE)");
  r.Unset(model, "dropout", "model");
  r.Unset(model, "continuing_subword_prefix", "model");
  r.Unset(model, "end_of_word_suffix", "model");
  const bool byte_fallback = r.Bool(model, "byte_fallback", false, "model");

  TokenizerSpec spec;
  // Tokens: the model's vocabulary plus added_tokens, by id, with no gaps.
  std::vector<std::optional<std::string>> tokens;
  auto put = [&](std::int64_t id, const std::string& text, const std::string& where) {
    if (id < 0 || id > 100'000'000) r.Fail(where, "id " + std::to_string(id) + " is out of range");
    if (tokens.size() <= static_cast<std::size_t>(id)) tokens.resize(id + 1);
    auto& slot = tokens[id];
    if (slot && *slot != text)
      r.Fail(where, "id " + std::to_string(id) + " is both '" + *slot + "' and '" + text + "'");
    slot = text;
  };
  if (!model.contains("vocab") || !model["vocab"].is_object()) r.Fail("model.vocab", "expected an object");
  for (const auto& [text, id] : model["vocab"].items()) {
    if (!id.is_number_integer()) r.Fail("model.vocab." + text, "expected an integer id");
    put(id.get<std::int64_t>(), text, "model.vocab." + text);
  }
  std::vector<std::pair<std::int64_t, bool>> added;  // id, special
  if (root.contains("added_tokens") && !root["added_tokens"].is_null()) {
    const json& list = root["added_tokens"];
    if (!list.is_array()) r.Fail("added_tokens", "expected an array");
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string where = "added_tokens[" + std::to_string(i) + "]";
      const json& token = r.Object(list[i], where);
      if (!token.contains("id") || !token["id"].is_number_integer())
        r.Fail(where + ".id", "expected an integer");
      for (const char* key : {"lstrip", "rstrip", "single_word"}) r.Unset(token, key, where);
      const std::int64_t id = token["id"].get<std::int64_t>();
      put(id, r.String(token, "content", where), where);
      added.emplace_back(id, r.Bool(token, "special", false, where));
    }
  }
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    if (!tokens[id]) r.Fail("model.vocab", "no token has id " + std::to_string(id));
    spec.tokens.push_back(*tokens[id]);
  }
  spec.token_types.assign(spec.tokens.size(), kTokenNormal);
  for (auto [id, special] : added) spec.token_types[id] = special ? kTokenControl : kTokenUserDefined;

  if (model.contains("merges") && !model["merges"].is_null()) {
    const json& merges = model["merges"];
    if (!merges.is_array()) r.Fail("model.merges", "expected an array");
    for (std::size_t i = 0; i < merges.size(); ++i) {
      const json& m = merges[i];
      const std::string where = "model.merges[" + std::to_string(i) + "]";
      if (m.is_string()) {
        spec.merges.push_back(m.get<std::string>());
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        const std::string left = m[0].get<std::string>(), right = m[1].get<std::string>();
        if (left.find(' ') != std::string::npos || right.empty())
          r.Fail(where, "a token with a space: " + m.dump());
        spec.merges.push_back(left + " " + right);
      } else {
        r.Fail(where, "expected \"left right\" or [left, right], got " + m.dump());
      }
    }
  }
  spec.ignore_merges = r.Bool(model, "ignore_merges", false, "model");
  if (!IsNull(model, "unk_token")) {
    const std::string unk = r.String(model, "unk_token", "model");
    for (std::size_t id = 0; id < spec.tokens.size(); ++id) {
      if (spec.tokens[id] == unk) spec.unk_id = static_cast<std::int32_t>(id);
    }
    if (spec.unk_id < 0) r.Fail("model.unk_token", "'" + unk + "' is not in the vocabulary");
    spec.token_types[spec.unk_id] = kTokenUnknown;
  }

  if (byte_fallback) {
    spec.model = "llama";
    if (spec.ignore_merges) r.Fail("model.ignore_merges", "is not supported with byte_fallback");
    const std::string style = SentencePieceStyle(r, root);
    spec.add_space_prefix = style != "none";
    spec.space_prefix_first_only = style == "first";
    spec.space_prefix_unless_space = !IsNull(root, "pre_tokenizer");  // Metaspace
    for (std::size_t id = 0; id < spec.tokens.size(); ++id) {
      const std::string& t = spec.tokens[id];
      if (spec.token_types[id] == kTokenNormal && t.size() == 6 && t.starts_with("<0x") && t.back() == '>') {
        spec.token_types[id] = kTokenByte;
      }
    }
  } else {
    spec.model = "gpt2";
    if (!IsNull(root, "normalizer")) r.Fail("normalizer", root["normalizer"].dump() + " is not supported");
    if (IsNull(root, "pre_tokenizer"))
      r.Fail("pre_tokenizer", "is missing (a byte-level BPE needs ByteLevel)");
    spec.pre = ByteLevelPre(r, root["pre_tokenizer"]);
    if (const json& decoder = Get(root, "decoder");
        !decoder.is_null() && !(decoder.is_object() && Get(decoder, "type") == "ByteLevel")) {
      r.Fail("decoder", root["decoder"].dump() + " is not supported (ByteLevel)");
    }
  }

  // BOS/EOS: from a TemplateProcessing post-processor, overridden by tokenizer_config.json.
  auto id_of = [&](const std::string& text) -> std::int32_t {
    for (std::size_t id = 0; id < spec.tokens.size(); ++id) {
      if (spec.tokens[id] == text) return static_cast<std::int32_t>(id);
    }
    return -1;
  };
  // (Other post-processors, and values that are not one, add nothing.)
  if (const json& post = Get(root, "post_processor");
      post.is_object() && Get(post, "type") == "TemplateProcessing") {
    const json& single = Get(post, "single");
    auto special_at = [&](const json& item) -> std::int32_t {
      if (!item.is_object() || !item.contains("SpecialToken")) return -1;
      const std::string field = "post_processor.single[].SpecialToken";
      return id_of(r.String(r.Object(item["SpecialToken"], field), "id", field));
    };
    if (single.is_array() && !single.empty()) {
      if (std::int32_t id = special_at(single.front()); id >= 0) spec.bos_id = id, spec.add_bos = true;
      if (std::int32_t id = special_at(single.back()); id >= 0) spec.eos_id = id, spec.add_eos = true;
    }
  }
  const std::filesystem::path config_path =
      std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  if (read_config && std::filesystem::exists(config_path)) {
    const json config = ReadJson(config_path.string());
    const JsonReader c(config_path.string());
    c.Object(config, "(root)");
    for (auto [key, id] : {std::pair<const char*, std::int32_t*>{"bos_token", &spec.bos_id},
                           std::pair<const char*, std::int32_t*>{"eos_token", &spec.eos_id},
                           std::pair<const char*, std::int32_t*>{"pad_token", &spec.pad_id}}) {
      if (std::optional<std::string> name = TokenName(config, key)) {
        *id = id_of(*name);
        if (*id < 0) c.Fail(key, "'" + *name + "' is not a token of " + path);
      }
    }
    spec.add_bos = c.Bool(config, "add_bos_token", spec.add_bos, "(root)");
    spec.add_eos = c.Bool(config, "add_eos_token", spec.add_eos, "(root)");
    if (auto it = config.find("chat_template"); it != config.end() && !it->is_null()) {
      if (it->is_string()) {
        spec.chat_template = it->get<std::string>();
      } else if (it->is_array()) {  // named templates: take "default"
        for (const json& named : *it) {
          if (named.is_object() && Get(named, "name") == "default") {
            spec.chat_template = c.OptString(named, "template", "", "chat_template[default]");
          }
        }
      } else {
        c.Fail("chat_template", "expected a string or a list of {name, template}");
      }
    }
  }
  if (spec.add_bos && spec.bos_id < 0) r.Fail("add_bos_token", "is true but there is no BOS token");
  if (spec.add_eos && spec.eos_id < 0) r.Fail("add_eos_token", "is true but there is no EOS token");
  try {
    return Tokenizer(std::move(spec));
  } catch (const Error& e) {
    throw MakeError(path, ": ", e.what());
  }
}

}  // namespace

Tokenizer Tokenizer::FromTokenizerJson(const std::string& path) {
  return FromTokenizerJsonRoot(ReadJson(path), path, /*read_config=*/true);
}

Tokenizer Tokenizer::FromTokenizerJsonText(std::string_view text, const std::string& name) {
  return FromTokenizerJsonRoot(ParseJson(text, name), name, /*read_config=*/false);
}

}  // namespace plumb
