// JsonWriter: the JSON of `plumb roofline --json` and `plumb estimate --json` (schemas: docs/roofline.md
// "JSON"), two-space indented, keys in the order written. Numbers print with 10 significant digits; a
// non-finite number prints as null.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace plumb::roofline {

class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);  // inside an object, before each value
  JsonWriter& Value(double number);
  JsonWriter& Value(long long number);
  JsonWriter& Value(int number) { return Value(static_cast<long long>(number)); }
  JsonWriter& Value(bool flag);
  JsonWriter& Value(std::string_view text);
  JsonWriter& Value(const char* text) { return Value(std::string_view(text)); }
  JsonWriter& Null();

  // The document, ending in a newline. Throws plumb::Error if an object or array is still open.
  std::string str() const;

 private:
  void BeforeValue();
  void Close(char bracket);
  void AppendString(std::string_view text);  // quoted and escaped

  std::string out_;
  std::vector<int> counts_;  // values written so far in each open container, innermost last
  bool after_key_ = false;
};

}  // namespace plumb::roofline
