#include "interrupt.h"

#include <csignal>

namespace plumb::cli {
namespace {

// Lock-free, so that a signal handler may set it (C++17 [support.signal]).
std::atomic<bool> interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);

struct sigaction previous;

void OnSigint(int) {
  interrupted.store(true, std::memory_order_relaxed);
}

}  // namespace

InterruptScope::InterruptScope() {
  interrupted.store(false);
  struct sigaction action = {};
  action.sa_handler = &OnSigint;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // the reply's writes to the terminal go on after the signal
  sigaction(SIGINT, &action, &previous);
}

InterruptScope::~InterruptScope() {
  sigaction(SIGINT, &previous, nullptr);
}

const std::atomic<bool>* InterruptScope::Flag() {
  return &interrupted;
}

}  // namespace plumb::cli
