// JsonWriter (include/plumb/roofline/json_writer.h).
#include "plumb/roofline/json_writer.h"

#include <cmath>
#include <cstdio>

#include "plumb/core/error.h"

namespace plumb::roofline {

void JsonWriter::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!counts_.empty()) {
    out_ += counts_.back() > 0 ? ",\n" : "\n";
    out_.append(2 * counts_.size(), ' ');
    ++counts_.back();
  }
}

JsonWriter& JsonWriter::BeginObject() {
  BeforeValue();
  out_ += '{';
  counts_.push_back(0);
  return *this;
}

JsonWriter& JsonWriter::BeginArray() {
  BeforeValue();
  out_ += '[';
  counts_.push_back(0);
  return *this;
}

void JsonWriter::Close(char bracket) {
  if (counts_.empty()) throw MakeError("JsonWriter: '", bracket, "' closes nothing");
  const bool had_values = counts_.back() > 0;
  counts_.pop_back();
  if (had_values) {
    out_ += '\n';
    out_.append(2 * counts_.size(), ' ');
  }
  out_ += bracket;
}

JsonWriter& JsonWriter::EndObject() {
  Close('}');
  return *this;
}

JsonWriter& JsonWriter::EndArray() {
  Close(']');
  return *this;
}

JsonWriter& JsonWriter::Key(std::string_view key) {
  BeforeValue();
  AppendString(key);
  out_ += ": ";
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::Value(double number) {
  if (!std::isfinite(number)) return Null();
  BeforeValue();
  char text[32];
  std::snprintf(text, sizeof text, "%.10g", number);
  out_ += text;
  return *this;
}

JsonWriter& JsonWriter::Value(long long number) {
  BeforeValue();
  out_ += std::to_string(number);
  return *this;
}

JsonWriter& JsonWriter::Value(bool flag) {
  BeforeValue();
  out_ += flag ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::Value(std::string_view text) {
  BeforeValue();
  AppendString(text);
  return *this;
}

void JsonWriter::AppendString(std::string_view text) {
  out_ += '"';
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out_ += '\\';
      out_ += c;
    } else if (u < 0x20) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", u);
      out_ += escape;
    } else {
      out_ += c;
    }
  }
  out_ += '"';
}

JsonWriter& JsonWriter::Null() {
  BeforeValue();
  out_ += "null";
  return *this;
}

std::string JsonWriter::str() const {
  if (!counts_.empty()) throw MakeError("JsonWriter: ", counts_.size(), " object(s) or array(s) left open");
  return out_ + "\n";
}

}  // namespace plumb::roofline
