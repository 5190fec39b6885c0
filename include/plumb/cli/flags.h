// Flags: a small command-line flag parser for the plumb CLI. Every mistake is a plumb::Error with one clear
// line (unknown flag, missing value, value not a number or out of range), never a crash.
#pragma once

#include <map>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace plumb::cli {

class Flags {
 public:
  // A flag that takes a value: --name VALUE or --name=VALUE. default_value "" means "no default".
  void AddValue(const std::string& name, const std::string& value_name, const std::string& help,
                const std::string& default_value = "");
  // A switch: --name, no value.
  void AddSwitch(const std::string& name, const std::string& help);

  // Parses args (without the program and command names). Throws plumb::Error on any mistake.
  void Parse(std::span<const std::string> args);
  // A command's parse: adds --help, parses args, and on --help prints `usage` and the flags to `out` and
  // returns false (the command then returns 0 without running); true otherwise.
  [[nodiscard]] bool ParseUnlessHelp(std::span<const std::string> args, std::string_view usage,
                                     std::ostream& out);

  bool IsSet(const std::string& name) const;  // given on the command line
  bool Switch(const std::string& name) const;
  std::string String(const std::string& name) const;  // the value, or the default; throws if neither
  int Int(const std::string& name, int min_value, int max_value) const;
  float Float(const std::string& name, float min_value, float max_value) const;
  std::uint64_t UInt64(const std::string& name) const;
  std::vector<int> IntList(const std::string& name) const;  // "1,2,3"

  // "  --name VALUE   help (default: x)" lines, aligned.
  std::string Help() const;

 private:
  struct Spec {
    std::string value_name;  // empty for a switch
    std::string help;
    std::string default_value;
  };
  const Spec& Find(const std::string& name) const;

  std::vector<std::string> order_;
  std::map<std::string, Spec> specs_;
  std::map<std::string, std::string> values_;
};

// Parses a whole decimal integer within [min_value, max_value]; `what` names it in the error.
long long ParseInteger(const std::string& text, long long min_value, long long max_value,
                       const std::string& what);
// Parses a whole finite decimal number within [min_value, max_value]; `what` names it in the error.
float ParseFloat(const std::string& text, float min_value, float max_value, const std::string& what);

}  // namespace plumb::cli
