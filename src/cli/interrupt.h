// Ctrl-C during a reply: while an InterruptScope lives, SIGINT sets its flag instead of ending plumb, and
// Generate (GenerationOptions::interrupt) stops at the next token. Outside the scope SIGINT does what it did.
#pragma once

#include <atomic>

namespace plumb::cli {

class InterruptScope {
 public:
  InterruptScope();   // clears the flag and installs the handler
  ~InterruptScope();  // puts the previous handler back
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

  // The flag every scope sets: what GenerationOptions::interrupt points to.
  static const std::atomic<bool>* Flag();
};

}  // namespace plumb::cli
