#include "plumb/sample/json_schema.h"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "plumb/core/error.h"

namespace plumb {
namespace {

// ordered_json: the properties keep the schema's order, which is the order they are generated in.
using Json = nlohmann::ordered_json;

// Bounded repetition is spelled out one rule per count (grammar.h); past this it is refused, not cut.
constexpr long long kMaxSpelledOut = 10000;

const std::set<std::string, std::less<>> kAnnotations = {"title",    "description", "default", "examples",
                                                         "$comment", "$schema",     "$id",     "deprecated",
                                                         "readOnly", "writeOnly",   "$defs",   "definitions"};
const std::set<std::string, std::less<>> kObjectKeywords = {"properties", "required", "additionalProperties"};
const std::set<std::string, std::less<>> kArrayKeywords = {"items", "minItems", "maxItems"};
const std::set<std::string, std::less<>> kStringKeywords = {"minLength", "maxLength"};
const std::set<std::string, std::less<>> kOtherKeywords = {"type", "enum", "const", "anyOf", "allOf", "$ref"};
const char* const kTypes[] = {"object", "array", "string", "number", "integer", "boolean", "null"};

// A JSON pointer's reference token: "~" and "/" escaped (RFC 6901).
std::string PointerToken(const std::string& key) {
  std::string out;
  for (const char c : key) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

bool HasType(const Json& value, std::string_view type) {
  if (type == "null") return value.is_null();
  if (type == "boolean") return value.is_boolean();
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "string") return value.is_string();
  if (type == "number") return value.is_number();
  // integer: JSON Schema counts 1.0 as an integer, as validators do.
  if (value.is_number_integer()) return true;
  if (!value.is_number_float()) return false;
  const double d = value.get<double>();
  return std::isfinite(d) && d == std::floor(d);
}

class SchemaCompiler {
 public:
  explicit SchemaCompiler(const Json& root) : root_(root) {}

  int Schema(const Json& s, const std::string& path);
  int AnyObject();
  Grammar Build(int root) { return b_.Build(root); }

 private:
  template <typename... Args>
  [[noreturn]] void Fail(const std::string& path, Args&&... args) {
    throw MakeError("JSON schema: at ", path, ": ", std::forward<Args>(args)...);
  }

  int Ref(const Json& ref, const std::string& path);
  int EnumOf(const Json& s, const std::string& path);
  int OfType(std::string_view type, const Json& s, const std::string& path);
  int Object(const Json& s, const std::string& path);
  int Array(const Json& s, const std::string& path);
  int Count(const Json& s, const char* key, long long fallback, const std::string& path);

  // The shared pieces, each made at its first use.
  GrammarSequence Space();  // after ':' and ','
  GrammarSequence Comma() { return Concat({b_.Literal(","), Space()}); }
  int Char();
  int String(long long min, long long max);
  int Integer();
  int Number();
  int AnyValue();
  int Digits(long long min, long long max);

  const Json& root_;
  GrammarBuilder b_;
  std::map<std::string, int> refs_;
  std::map<std::string, int> shared_;  // the pieces above by name
};

int SchemaCompiler::Schema(const Json& s, const std::string& path) {
  if (s.is_boolean()) {
    if (!s.get<bool>()) Fail(path, "the schema false admits no document");
    return AnyValue();
  }
  if (!s.is_object()) Fail(path, "a schema must be an object or a boolean, not ", s.type_name());
  std::vector<std::string> constraining;  // the keywords present that constrain the document
  for (const auto& [key, value] : s.items()) {
    if (kAnnotations.contains(key)) continue;
    if (key == "uniqueItems" && value == false) continue;
    if (!kObjectKeywords.contains(key) && !kArrayKeywords.contains(key) && !kStringKeywords.contains(key) &&
        !kOtherKeywords.contains(key)) {
      Fail(path, "unsupported keyword \"", key,
           "\": it constrains the document and plumb cannot enforce it (docs/serve.md, \"Structured "
           "output\")");
    }
    constraining.push_back(key);
  }
  // Keywords that combine with nothing else here: what they would combine with is an intersection.
  for (const char* alone : {"$ref", "anyOf", "allOf"}) {
    if (!s.contains(alone)) continue;
    for (const std::string& other : constraining) {
      if (other != alone) Fail(path, "\"", alone, "\" alongside \"", other, "\" is not supported");
    }
  }
  if (s.contains("$ref")) return Ref(s["$ref"], path);
  if (const auto it = s.find("anyOf"); it != s.end()) {
    if (!it->is_array() || it->empty()) Fail(path, "anyOf must be a non-empty array of schemas");
    std::vector<GrammarSequence> alternatives;
    for (std::size_t i = 0; i < it->size(); ++i)
      alternatives.push_back({b_.Ref(Schema((*it)[i], path + "/anyOf/" + std::to_string(i)))});
    return b_.Add(path, std::move(alternatives));
  }
  if (const auto it = s.find("allOf"); it != s.end()) {
    if (!it->is_array() || it->size() != 1)
      Fail(path, "allOf is supported with exactly one schema (an intersection of several is not)");
    return Schema((*it)[0], path + "/allOf/0");
  }
  if (s.contains("enum") || s.contains("const")) return EnumOf(s, path);

  std::vector<std::string> types;
  if (const auto it = s.find("type"); it != s.end()) {
    const Json names = it->is_array() ? *it : Json::array({*it});
    if (names.empty()) Fail(path, "type must name at least one type");
    for (const Json& name : names) {
      if (!name.is_string() ||
          std::find(std::begin(kTypes), std::end(kTypes), name.get<std::string>()) == std::end(kTypes))
        Fail(path, "type ", name.dump(),
             " is not one of object, array, string, number, integer, boolean, null");
      if (std::find(types.begin(), types.end(), name.get<std::string>()) != types.end())
        Fail(path, "type lists ", name.dump(), " twice");
      types.push_back(name.get<std::string>());
    }
  } else {
    // No type: the types whose keywords appear (generating only those is a subset of what validates).
    for (const std::string& key : constraining) {
      const char* t = kObjectKeywords.contains(key)   ? "object"
                      : kArrayKeywords.contains(key)  ? "array"
                      : kStringKeywords.contains(key) ? "string"
                                                      : nullptr;
      if (t && std::find(types.begin(), types.end(), t) == types.end()) types.push_back(t);
    }
    if (types.empty()) return AnyValue();
  }
  std::vector<GrammarSequence> alternatives;
  for (const std::string& t : types) alternatives.push_back({b_.Ref(OfType(t, s, path))});
  return alternatives.size() == 1 ? alternatives[0][0].index : b_.Add(path, std::move(alternatives));
}

int SchemaCompiler::Ref(const Json& ref, const std::string& path) {
  if (!ref.is_string()) Fail(path, "$ref must be a string");
  const std::string target = ref.get<std::string>();
  if (const auto it = refs_.find(target); it != refs_.end()) return it->second;
  if (target != "#" && target.rfind("#/", 0) != 0)
    Fail(path, "$ref \"", target, "\" is not a pointer into this schema (\"#\", \"#/$defs/Name\", ...)");
  const Json* resolved = nullptr;
  try {
    resolved = &root_.at(Json::json_pointer(target.substr(1)));
  } catch (const nlohmann::json::exception&) {
    Fail(path, "$ref \"", target, "\" points to nothing in this schema");
  }
  // Declared before it is compiled, so a recursive reference finds it.
  const int rule = b_.Declare(target);
  refs_[target] = rule;
  b_.Define(rule, {{b_.Ref(Schema(*resolved, target))}});
  return rule;
}

int SchemaCompiler::EnumOf(const Json& s, const std::string& path) {
  for (const auto& [key, value] : s.items()) {
    if (key != "enum" && key != "const" && key != "type" && !kAnnotations.contains(key))
      Fail(path, "\"", key, "\" alongside enum or const is not supported");
  }
  if (s.contains("enum") && s.contains("const")) Fail(path, "enum and const together are not supported");
  const Json values = s.contains("const") ? Json::array({s["const"]}) : s["enum"];
  if (!values.is_array() || values.empty()) Fail(path, "enum must be a non-empty array");
  std::vector<std::string> types;
  if (const auto it = s.find("type"); it != s.end()) {
    for (const Json& t : it->is_array() ? *it : Json::array({*it}))
      if (t.is_string()) types.push_back(t.get<std::string>());
  }
  std::vector<GrammarSequence> alternatives;
  for (const Json& v : values) {
    bool typed = types.empty();
    for (const std::string& t : types) typed = typed || HasType(v, t);
    if (typed) alternatives.push_back(b_.Literal(v.dump()));  // compact: the layout of the grammar
  }
  if (alternatives.empty()) Fail(path, "no enum or const value has the schema's type");
  return b_.Add(path + (s.contains("const") ? "/const" : "/enum"), std::move(alternatives));
}

int SchemaCompiler::Count(const Json& s, const char* key, long long fallback, const std::string& path) {
  const auto it = s.find(key);
  if (it == s.end()) return static_cast<int>(fallback);
  if (!it->is_number_integer() || it->get<long long>() < 0)
    Fail(path, key, " must be a non-negative integer, not ", it->dump());
  if (it->get<long long>() > kMaxSpelledOut)
    Fail(path, key, " ", it->get<long long>(), " is more than plumb spells out (", kMaxSpelledOut, ")");
  return static_cast<int>(it->get<long long>());
}

int SchemaCompiler::OfType(std::string_view type, const Json& s, const std::string& path) {
  if (type == "object") return Object(s, path);
  if (type == "array") return Array(s, path);
  if (type == "string") {
    const int min = Count(s, "minLength", 0, path), max = Count(s, "maxLength", -1, path);
    if (max >= 0 && min > max) Fail(path, "minLength ", min, " is more than maxLength ", max);
    return String(min, max);
  }
  if (type == "number") return Number();
  if (type == "integer") return Integer();
  if (type == "boolean") {
    if (!shared_.contains("boolean"))
      shared_["boolean"] = b_.Add("boolean", {b_.Literal("true"), b_.Literal("false")});
    return shared_["boolean"];
  }
  if (!shared_.contains("null")) shared_["null"] = b_.Add("null", {b_.Literal("null")});
  return shared_["null"];
}

int SchemaCompiler::Object(const Json& s, const std::string& path) {
  static const Json kEmpty = Json::object();
  const Json& props = s.contains("properties") ? s["properties"] : kEmpty;
  if (!props.is_object()) Fail(path, "properties must be an object");
  std::set<std::string> required;
  if (const auto it = s.find("required"); it != s.end()) {
    if (!it->is_array()) Fail(path, "required must be an array of property names");
    for (const Json& name : *it) {
      if (!name.is_string()) Fail(path, "required must be an array of property names");
      if (!props.contains(name.get<std::string>()))
        Fail(path, "required property ", name.dump(),
             " is not in properties: plumb generates only the properties the schema declares");
      required.insert(name.get<std::string>());
    }
  }
  const auto additional = s.find("additionalProperties");
  if (additional != s.end() && !additional->is_boolean() && !additional->is_object())
    Fail(path, "additionalProperties must be a boolean or a schema");
  if (props.empty()) {
    if (additional != s.end() && *additional == false) return b_.Add(path, {b_.Literal("{}")});
    if (additional == s.end() || additional->is_boolean()) return AnyObject();
    // A map: any keys, every value of one schema.
    const int value = Schema(*additional, path + "/additionalProperties");
    const GrammarSequence member =
        Concat({{b_.Ref(String(0, -1))}, b_.Literal(":"), Space(), {b_.Ref(value)}});
    const int more = b_.Repeat(path + "/members", Concat({Comma(), member}), 0, -1);
    return b_.Add(path,
                  {b_.Literal("{}"), Concat({b_.Literal("{"), member, {b_.Ref(more)}, b_.Literal("}")})});
  }
  // rest[i][e]: the members from property i on, e: some member came before (so a comma goes first). A
  // required property must appear; an optional one may be skipped.
  const std::size_t n = props.size();
  std::vector<std::array<int, 2>> rest(n + 1);
  const int none = b_.Add(path + "/end", {{}});
  rest[n] = {none, none};
  std::vector<std::pair<std::string, const Json*>> list;
  for (const auto& [key, value] : props.items()) list.emplace_back(key, &value);
  for (std::size_t i = n; i-- > 0;) {
    const std::string& key = list[i].first;
    const int value = Schema(*list[i].second, path + "/properties/" + PointerToken(key));
    const GrammarSequence member =
        Concat({b_.Literal(Json(key).dump()), b_.Literal(":"), Space(), {b_.Ref(value)}});
    for (int e = 0; e < 2; ++e) {
      std::vector<GrammarSequence> alternatives{
          Concat({e ? Comma() : GrammarSequence{}, member, {b_.Ref(rest[i + 1][1])}})};
      if (!required.contains(key)) alternatives.push_back({b_.Ref(rest[i + 1][static_cast<std::size_t>(e)])});
      rest[i][static_cast<std::size_t>(e)] =
          b_.Add(path + "/properties/" + PointerToken(key) + (e ? "," : ""), std::move(alternatives));
    }
  }
  return b_.Add(path, {Concat({b_.Literal("{"), {b_.Ref(rest[0][0])}, b_.Literal("}")})});
}

int SchemaCompiler::Array(const Json& s, const std::string& path) {
  const auto items = s.find("items");
  if (items != s.end() && items->is_array())
    Fail(path, "items as an array (a tuple, draft 4 to 2019-09) is not supported");
  const int item = items == s.end() ? AnyValue() : Schema(*items, path + "/items");
  const int min = Count(s, "minItems", 0, path), max = Count(s, "maxItems", -1, path);
  if (max >= 0 && min > max) Fail(path, "minItems ", min, " is more than maxItems ", max);
  if (max == 0) return b_.Add(path, {b_.Literal("[]")});
  const int more = b_.Repeat(path + "/more", Concat({Comma(), {b_.Ref(item)}}), std::max(min - 1, 0),
                             max < 0 ? -1 : max - 1);
  std::vector<GrammarSequence> alternatives{
      Concat({b_.Literal("["), {b_.Ref(item)}, {b_.Ref(more)}, b_.Literal("]")})};
  if (min == 0) alternatives.push_back(b_.Literal("[]"));
  return b_.Add(path, std::move(alternatives));
}

GrammarSequence SchemaCompiler::Space() {
  if (!shared_.contains("space")) shared_["space"] = b_.Add("space", {b_.Literal(" "), {}});
  return {b_.Ref(shared_["space"])};
}

int SchemaCompiler::Char() {
  if (shared_.contains("char")) return shared_["char"];
  const auto set = [&](ByteSet s) { return b_.Bytes(s); };
  const GrammarElement hex = set(ByteSet::Range('0', '9').AddRange('a', 'f').AddRange('A', 'F'));
  const GrammarElement cont = set(ByteSet::Range(0x80, 0xBF));
  // \uXXXX for any code point but a surrogate (D800-DFFF): one escape, one character.
  const int unicode = b_.Add(
      "escape-u", {{set(ByteSet::Range('0', '9').AddRange('a', 'c').AddRange('A', 'C')), hex, hex, hex},
                   {set(ByteSet::Of('d').Add('D')), set(ByteSet::Range('0', '7')), hex, hex},
                   {set(ByteSet::Range('e', 'f').AddRange('E', 'F')), hex, hex, hex}});
  ByteSet plain = ByteSet::Range(0x20, 0x7F);
  plain.Remove('"').Remove('\\');
  // Well-formed UTF-8 (Unicode's table 3-7): no overlong forms, no surrogates, nothing past U+10FFFF.
  const int rule =
      b_.Add("char", {{set(plain)},
                      {set(ByteSet::Of('\\')),
                       set(ByteSet::Of('"').Add('\\').Add('/').Add('b').Add('f').Add('n').Add('r').Add('t'))},
                      Concat({b_.Literal("\\u"), {b_.Ref(unicode)}}),
                      {set(ByteSet::Range(0xC2, 0xDF)), cont},
                      {set(ByteSet::Of(0xE0)), set(ByteSet::Range(0xA0, 0xBF)), cont},
                      {set(ByteSet::Range(0xE1, 0xEC).AddRange(0xEE, 0xEF)), cont, cont},
                      {set(ByteSet::Of(0xED)), set(ByteSet::Range(0x80, 0x9F)), cont},
                      {set(ByteSet::Of(0xF0)), set(ByteSet::Range(0x90, 0xBF)), cont, cont},
                      {set(ByteSet::Range(0xF1, 0xF3)), cont, cont, cont},
                      {set(ByteSet::Of(0xF4)), set(ByteSet::Range(0x80, 0x8F)), cont, cont}});
  return shared_["char"] = rule;
}

int SchemaCompiler::String(long long min, long long max) {
  const std::string name = "string{" + std::to_string(min) + "," + std::to_string(max) + "}";
  if (shared_.contains(name)) return shared_[name];
  const int chars =
      b_.Repeat(name + "-chars", {b_.Ref(Char())}, static_cast<int>(min), static_cast<int>(max));
  return shared_[name] = b_.Add(name, {Concat({b_.Literal("\""), {b_.Ref(chars)}, b_.Literal("\"")})});
}

int SchemaCompiler::Digits(long long min, long long max) {
  const std::string name = "digits{" + std::to_string(min) + "," + std::to_string(max) + "}";
  if (shared_.contains(name)) return shared_[name];
  return shared_[name] = b_.Repeat(name, {b_.Bytes(ByteSet::Range('0', '9'))}, static_cast<int>(min),
                                   static_cast<int>(max));
}

int SchemaCompiler::Integer() {
  if (shared_.contains("integer")) return shared_["integer"];
  const int magnitude = b_.Add(
      "integer-digits", {b_.Literal("0"), {b_.Bytes(ByteSet::Range('1', '9')), b_.Ref(Digits(0, 15))}});
  return shared_["integer"] =
             b_.Add("integer", {{b_.Ref(magnitude)}, Concat({b_.Literal("-"), {b_.Ref(magnitude)}})});
}

int SchemaCompiler::Number() {
  if (shared_.contains("number")) return shared_["number"];
  const int fraction = b_.Add("fraction", {Concat({b_.Literal("."), {b_.Ref(Digits(1, 16))}}), {}});
  const int exponent =
      b_.Add("exponent",
             {{b_.Bytes(ByteSet::Of('e').Add('E')),
               b_.Ref(b_.Add("exponent-sign", {b_.Literal("+"), b_.Literal("-"), {}})), b_.Ref(Digits(1, 3))},
              {}});
  return shared_["number"] = b_.Add("number", {{b_.Ref(Integer()), b_.Ref(fraction), b_.Ref(exponent)}});
}

int SchemaCompiler::AnyObject() {
  if (shared_.contains("any-object")) return shared_["any-object"];
  const int object = shared_["any-object"] = b_.Declare("any-object");
  const GrammarSequence member =
      Concat({{b_.Ref(String(0, -1))}, b_.Literal(":"), Space(), {b_.Ref(AnyValue())}});
  const int more = b_.Repeat("any-object-members", Concat({Comma(), member}), 0, -1);
  b_.Define(object, {b_.Literal("{}"), Concat({b_.Literal("{"), member, {b_.Ref(more)}, b_.Literal("}")})});
  return object;
}

int SchemaCompiler::AnyValue() {
  if (shared_.contains("any-value")) return shared_["any-value"];
  // Declared first: objects and arrays hold values.
  const int value = shared_["any-value"] = b_.Declare("any-value");
  const int more = b_.Repeat("any-array-items", Concat({Comma(), {b_.Ref(value)}}), 0, -1);
  const int array =
      b_.Add("any-array",
             {b_.Literal("[]"), Concat({b_.Literal("["), {b_.Ref(value)}, {b_.Ref(more)}, b_.Literal("]")})});
  b_.Define(value, {{b_.Ref(AnyObject())},
                    {b_.Ref(array)},
                    {b_.Ref(String(0, -1))},
                    {b_.Ref(Number())},
                    b_.Literal("true"),
                    b_.Literal("false"),
                    b_.Literal("null")});
  return value;
}

}  // namespace

Grammar JsonSchemaGrammar(std::string_view schema) {
  Json root;
  try {
    root = Json::parse(schema);
  } catch (const nlohmann::json::exception& e) {
    throw MakeError("JSON schema: not valid JSON: ", e.what());
  }
  SchemaCompiler compiler(root);
  try {
    const int start = compiler.Schema(root, "#");
    return compiler.Build(start);
  } catch (const nlohmann::json::exception& e) {  // e.g. an enum string that is not valid UTF-8
    throw MakeError("JSON schema: ", e.what());
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.rfind("JSON schema", 0) == 0) throw;
    // ValidateGrammar: a recursion with no way out, or one that can begin with itself.
    throw MakeError("JSON schema: admits no finite document, or recurses without consuming text: ", what);
  }
}

Grammar AnyJsonObjectGrammar() {
  const Json root = Json::object();
  SchemaCompiler compiler(root);
  return compiler.Build(compiler.AnyObject());
}

}  // namespace plumb
