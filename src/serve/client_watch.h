// Noticing a client that has gone while its answer is still being computed, so its request is aborted and
// its KV blocks freed then rather than when the answer would have been complete.
#pragma once

namespace httplib {
struct Request;
}

namespace plumb::serve {

class ClientWatch {
 public:
  // Finds the socket `req` came on. cpp-httplib 0.11 (Debian 12's) hands a handler no socket, so it is
  // looked up among this process's descriptors by its two addresses, which name one TCP connection. Where it
  // cannot be found (no /dev/fd) the client never counts as gone.
  explicit ClientWatch(const httplib::Request& req);

  // True once the client has closed or reset its end: a read would see end of file or an error. A client
  // that half-closes after sending its request counts as gone (HTTP clients do not do that).
  bool ClientGone() const;

 private:
  int fd_ = -1;
};

}  // namespace plumb::serve
