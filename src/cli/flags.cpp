#include "plumb/cli/flags.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "plumb/core/error.h"

namespace plumb::cli {

void Flags::AddValue(const std::string& name, const std::string& value_name, const std::string& help,
                     const std::string& default_value) {
  order_.push_back(name);
  specs_[name] = Spec{value_name, help, default_value};
}

void Flags::AddSwitch(const std::string& name, const std::string& help) {
  order_.push_back(name);
  specs_[name] = Spec{"", help, ""};
}

const Flags::Spec& Flags::Find(const std::string& name) const {
  auto it = specs_.find(name);
  if (it == specs_.end()) throw MakeError("unknown flag --", name, " (see --help)");
  return it->second;
}

void Flags::Parse(std::span<const std::string> args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      throw MakeError("unexpected argument '", arg, "': flags look like --name VALUE (see --help)");
    }
    const std::size_t eq = arg.find('=', 2);
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    std::optional<std::string> inline_value;
    if (eq != std::string::npos) inline_value = arg.substr(eq + 1);
    const Spec& spec = Find(name);
    if (values_.count(name)) throw MakeError("flag --", name, " is given twice");
    if (spec.value_name.empty()) {
      if (inline_value) throw MakeError("flag --", name, " takes no value");
      values_.emplace(name, "1");  // emplace, not operator=(const char*): GCC 12 -Wrestrict false positive
    } else if (inline_value) {
      values_[name] = *inline_value;
    } else {
      if (i + 1 >= args.size())
        throw MakeError("flag --", name, " needs a value: --", name, " ", spec.value_name);
      values_[name] = args[++i];
    }
  }
}

bool Flags::IsSet(const std::string& name) const {
  Find(name);
  return values_.count(name) != 0;
}

bool Flags::Switch(const std::string& name) const {
  return IsSet(name);
}

std::string Flags::String(const std::string& name) const {
  const Spec& spec = Find(name);
  if (auto it = values_.find(name); it != values_.end()) return it->second;
  if (spec.default_value.empty()) throw MakeError("missing required flag --", name, " ", spec.value_name);
  return spec.default_value;
}

long long ParseInteger(const std::string& text, long long min_value, long long max_value,
                       const std::string& what) {
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end != text.c_str() + text.size())
    throw MakeError(what, ": '", text, "' is not an integer");
  // Too large (or small) even for a long long: said so, with the range, never as some other number.
  const bool overflow = errno == ERANGE;
  if ((overflow && value > 0) || value > max_value) {
    throw MakeError(what, ": ", text, " is outside [", min_value, ", ", max_value, "] (too large)");
  }
  if (value < min_value) {
    if (!overflow && (max_value == std::numeric_limits<long long>::max() ||
                      max_value == std::numeric_limits<int>::max())) {
      throw MakeError(what, ": ", value, " must be at least ", min_value);
    }
    throw MakeError(what, ": ", text, " is outside [", min_value, ", ", max_value, "] (too small)");
  }
  return value;
}

int Flags::Int(const std::string& name, int min_value, int max_value) const {
  return static_cast<int>(ParseInteger(String(name), min_value, max_value, "--" + name));
}

float Flags::Float(const std::string& name, float min_value, float max_value) const {
  return ParseFloat(String(name), min_value, max_value, "--" + name);
}

std::uint64_t Flags::UInt64(const std::string& name) const {
  const std::string text = String(name);
  errno = 0;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || end != text.c_str() + text.size() || errno == ERANGE) {
    throw MakeError("--", name, ": '", text, "' is not a non-negative integer");
  }
  return value;
}

std::vector<int> Flags::IntList(const std::string& name) const {
  const std::string text = String(name);
  std::vector<int> values;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    values.push_back(static_cast<int>(ParseInteger(item, 0, std::numeric_limits<int>::max(),
                                                   "--" + name + " item " + std::to_string(values.size()))));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return values;
}

bool Flags::ParseUnlessHelp(std::span<const std::string> args, std::string_view usage, std::ostream& out) {
  if (!specs_.contains("help")) AddSwitch("help", "show this help");
  Parse(args);
  if (!Switch("help")) return true;
  out << usage << Help();
  return false;
}

std::string Flags::Help() const {
  std::size_t width = 0;
  for (const std::string& name : order_) {
    width = std::max(width, name.size() + specs_.at(name).value_name.size() + 4);
  }
  std::ostringstream out;
  for (const std::string& name : order_) {
    const Spec& spec = specs_.at(name);
    std::string left = "--" + name + (spec.value_name.empty() ? "" : " " + spec.value_name);
    out << "  " << left << std::string(width - left.size() + 2, ' ') << spec.help;
    if (!spec.default_value.empty()) out << " (default: " << spec.default_value << ")";
    out << "\n";
  }
  return out.str();
}

float ParseFloat(const std::string& text, float min_value, float max_value, const std::string& what) {
  errno = 0;
  char* end = nullptr;
  const float value = std::strtof(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(value)) {
    throw MakeError(what, ": '", text, "' is not a finite number");
  }
  if (value < min_value || value > max_value) {
    if (max_value == std::numeric_limits<float>::max())
      throw MakeError(what, ": ", value, " must be at least ", min_value);
    throw MakeError(what, ": ", value, " is outside [", min_value, ", ", max_value, "]");
  }
  return value;
}

}  // namespace plumb::cli
