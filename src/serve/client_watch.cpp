#include "client_watch.h"

#include <httplib.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

namespace plumb::serve {
namespace {

// An address as cpp-httplib writes it into Request::remote_addr / local_addr (numeric host), and its port.
bool HostAndPort(const sockaddr_storage& addr, socklen_t len, std::string& host, int& port) {
  char h[NI_MAXHOST];
  char p[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, h, sizeof h, p, sizeof p,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return false;
  }
  host = h;
  return std::from_chars(p, p + std::strlen(p), port).ec == std::errc{};
}

bool IsConnection(int fd, const httplib::Request& req) {
  sockaddr_storage peer{};
  sockaddr_storage local{};
  socklen_t peer_len = sizeof peer;
  socklen_t local_len = sizeof local;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) return false;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) return false;
  std::string peer_host, local_host;
  int peer_port = -1, local_port = -1;
  return HostAndPort(peer, peer_len, peer_host, peer_port) &&
         HostAndPort(local, local_len, local_host, local_port) && peer_port == req.remote_port &&
         local_port == req.local_port && peer_host == req.remote_addr && local_host == req.local_addr;
}

}  // namespace

ClientWatch::ClientWatch(const httplib::Request& req) {
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/dev/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    int fd = -1;
    if (std::from_chars(name.data(), name.data() + name.size(), fd).ec != std::errc{}) continue;
    if (IsConnection(fd, req)) {
      fd_ = fd;
      return;
    }
  }
}

bool ClientWatch::ClientGone() const {
  if (fd_ < 0) return false;
  char byte;
  const ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

}  // namespace plumb::serve
