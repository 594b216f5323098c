// sd_notify(3)'s protocol without libsystemd (systemd_notify.hpp).
#include "daemon/systemd_notify.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

namespace pressured::systemd {

namespace {

// A positive decimal number, the whole of `s`.
bool parse_positive(const char* s, uint64_t& out) {
  if (s == nullptr || *s == '\0') return false;
  const char* end = s + std::strlen(s);
  auto [p, ec] = std::from_chars(s, end, out);
  return ec == std::errc() && p == end && out > 0;
}

}  // namespace

bool notify(std::string_view state) {
  const char* e = std::getenv("NOTIFY_SOCKET");
  if (e == nullptr) return false;
  const std::string_view addr(e);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  // A path, or an abstract name written with a leading '@' (sd_notify(3));
  // other kinds (vsock:) are not used for a node's services.
  if (addr.size() < 2 || (addr[0] != '/' && addr[0] != '@') || addr.size() >= sizeof sa.sun_path) return false;
  std::memcpy(sa.sun_path, addr.data(), addr.size());
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + addr.size());
  if (addr[0] == '@') {
    sa.sun_path[0] = '\0';
  } else {
    ++len;  // the path's NUL
  }
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const ssize_t n = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(&sa), len);
  const int saved = errno;
  ::close(fd);
  errno = saved;
  return n >= 0 && static_cast<std::size_t>(n) == state.size();
}

Duration watchdog_interval() {
  uint64_t usec = 0;
  if (!parse_positive(std::getenv("WATCHDOG_USEC"), usec)) return Duration(0);
  // Set for another process (a child that inherited the environment): not ours.
  if (const char* p = std::getenv("WATCHDOG_PID"); p != nullptr) {
    uint64_t pid = 0;
    if (!parse_positive(p, pid) || pid != static_cast<uint64_t>(::getpid())) return Duration(0);
  }
  return std::chrono::duration_cast<Duration>(std::chrono::microseconds(usec));
}

}  // namespace pressured::systemd
