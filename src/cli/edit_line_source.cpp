// The terminal line editor of plumb chat: libedit (BSD-3-Clause; Debian's libedit-dev). Chosen over GNU
// readline, whose GPL would bind plumb's license, and over replxx and linenoise, which Debian does not
// package (docs/chat.md "Line editing").
#include "line_source.h"

#include <clocale>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <ostream>

#if PLUMB_HAVE_LIBEDIT
#include <histedit.h>
#endif

namespace plumb::cli {

#if PLUMB_HAVE_LIBEDIT
namespace {

// Enough for weeks of chatting; the file stays small (a line each).
constexpr int kHistoryLines = 1000;

class EditLineSource : public LineSource {
 public:
  EditLineSource(std::string history_path, std::ostream& err)
      : history_path_(std::move(history_path)), err_(err) {
    // libedit reads multibyte input by LC_CTYPE; plumb's text is UTF-8 whatever the environment says.
    const char* ctype = std::setlocale(LC_CTYPE, "");
    if (!ctype || std::strcmp(ctype, "C") == 0 || std::strcmp(ctype, "POSIX") == 0) {
      std::setlocale(LC_CTYPE, "C.UTF-8");
    }
    history_ = history_init();
    HistEvent event;
    history(history_, &event, H_SETSIZE, kHistoryLines);
    history(history_, &event, H_SETUNIQUE, 1);  // the same line twice in a row is kept once
    // No file yet (a first chat) is no history yet: H_LOAD's failure is that.
    if (!history_path_.empty()) history(history_, &event, H_LOAD, history_path_.c_str());
    editor_ = el_init("plumb", stdin, stdout, stderr);
    el_set(editor_, EL_CLIENTDATA, this);
    el_set(editor_, EL_EDITOR, "emacs");
    el_set(editor_, EL_SIGNAL, 1);  // libedit follows window resizes and restores the terminal on signals
    el_set(editor_, EL_HIST, history, history_);
    el_set(editor_, EL_PROMPT, &EditLineSource::Prompt);
    // Ctrl-C is read as a key while a line is edited (isig off in edit mode, as in linenoise): it ends the
    // line as an interrupt instead of killing plumb. While a reply streams the terminal is back in its
    // usual mode, and Ctrl-C raises SIGINT, which stops the reply (src/cli/interrupt.h).
    el_set(editor_, EL_SETTY, "-d", "-isig", nullptr);
    el_set(editor_, EL_ADDFN, "plumb-interrupt", "end the line as an interrupt", &EditLineSource::Interrupt);
    el_set(editor_, EL_BIND, "^C", "plumb-interrupt", nullptr);
    // A shell's keys where libedit's emacs map differs: Ctrl-W deletes the word before the cursor, Ctrl-U the
    // whole line, Ctrl-R searches the history backwards as it is typed.
    el_set(editor_, EL_BIND, "^W", "ed-delete-prev-word", nullptr);
    el_set(editor_, EL_BIND, "^U", "em-kill-line", nullptr);
    el_set(editor_, EL_BIND, "^R", "em-inc-search-prev", nullptr);
    el_source(editor_, nullptr);  // the user's ~/.editrc, as every libedit program reads it
  }

  ~EditLineSource() override {
    el_end(editor_);
    history_end(history_);
  }

  Line Read(const std::string& prompt) override {
    prompt_ = prompt;
    interrupted_ = false;
    int count = 0;
    const char* text = el_gets(editor_, &count);
    std::string line = text && count > 0 ? std::string(text, static_cast<std::size_t>(count)) : "";
    if (!line.empty() && line.back() == '\n') line.pop_back();
    if (interrupted_) {
      // The line stays on the screen as typed, marked as a shell marks it, and the next prompt starts below.
      std::fputs("^C\n", stdout);
      std::fflush(stdout);
      return {Line::Kind::kInterrupt, line};
    }
    if (!text || count <= 0) return {Line::Kind::kEnd, ""};
    if (!line.empty()) Remember(line);
    return {Line::Kind::kText, line};
  }

 private:
  static char* Prompt(EditLine* editor) { return const_cast<char*>(Self(editor).prompt_.c_str()); }

  static unsigned char Interrupt(EditLine* editor, int /*key*/) {
    Self(editor).interrupted_ = true;
    return CC_NEWLINE;
  }

  static EditLineSource& Self(EditLine* editor) {
    void* self = nullptr;
    el_get(editor, EL_CLIENTDATA, &self);
    return *static_cast<EditLineSource*>(self);
  }

  // Into the history, and the history into its file at once: a chat that ends by a signal keeps it too.
  void Remember(const std::string& line) {
    HistEvent event;
    history(history_, &event, H_ENTER, line.c_str());
    if (history_path_.empty()) return;
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(history_path_).parent_path(), ec);
    if (history(history_, &event, H_SAVE, history_path_.c_str()) < 0 && !warned_) {
      err_ << "plumb chat: cannot write the history to " << history_path_ << " (--history FILE, or none)\n";
      warned_ = true;
    }
  }

  const std::string history_path_;
  std::ostream& err_;
  History* history_ = nullptr;
  EditLine* editor_ = nullptr;
  std::string prompt_;
  bool interrupted_ = false;
  bool warned_ = false;
};

}  // namespace

std::unique_ptr<LineSource> NewTerminalLineSource(const std::string& history_path, std::ostream& err) {
  return std::make_unique<EditLineSource>(history_path, err);
}

#else

std::unique_ptr<LineSource> NewTerminalLineSource(const std::string& /*history_path*/,
                                                  std::ostream& /*err*/) {
  return nullptr;
}

#endif

}  // namespace plumb::cli
