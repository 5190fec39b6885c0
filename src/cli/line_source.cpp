#include "line_source.h"

#include <cstdlib>
#include <filesystem>
#include <istream>
#include <ostream>

namespace plumb::cli {
namespace {

class StreamLineSource : public LineSource {
 public:
  StreamLineSource(std::istream& in, std::ostream& out, bool show_prompt)
      : in_(in), out_(out), show_prompt_(show_prompt) {}

  Line Read(const std::string& prompt) override {
    if (show_prompt_) out_ << prompt << std::flush;
    Line line;
    if (!std::getline(in_, line.text)) return {Line::Kind::kEnd, ""};
    line.kind = Line::Kind::kText;
    return line;
  }

 private:
  std::istream& in_;
  std::ostream& out_;
  const bool show_prompt_;
};

}  // namespace

std::unique_ptr<LineSource> NewStreamLineSource(std::istream& in, std::ostream& out, bool show_prompt) {
  return std::make_unique<StreamLineSource>(in, out, show_prompt);
}

std::string DefaultHistoryPath() {
  const char* state = std::getenv("XDG_STATE_HOME");
  if (state && *state) return (std::filesystem::path(state) / "plumb" / "chat_history").string();
  const char* home = std::getenv("HOME");
  if (home && *home) return (std::filesystem::path(home) / ".local/state/plumb/chat_history").string();
  return "";
}

}  // namespace plumb::cli
