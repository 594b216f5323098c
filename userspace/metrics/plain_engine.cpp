// pressured's own HTTP/1.1 engine for the metrics port without TLS or
// authentication (the default): a request in (parse_request), one answer
// out, close. The connection policy (the accept, the cap, the deadlines that
// bound a slow client) is server.cpp's; this file only reads, parses, asks
// the router and writes, on the server's thread, never blocking.

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <ctime>
#include <unordered_map>

#include "kernel/fd.hpp"
#include "metrics/http_engine.hpp"
#include "metrics/http_request.hpp"

namespace pressured::web {

namespace {

class PlainEngine final : public HttpEngine {
 public:
  PlainEngine(EngineHost& host, std::size_t max_request_bytes)
      : host_(host), max_(std::max<std::size_t>(max_request_bytes, 64)), ep_(::epoll_create1(EPOLL_CLOEXEC)) {}
  ~PlainEngine() override { stop(); }

  int poll_fd() const override { return ep_.get(); }

  bool add(int fd, const sockaddr* /*addr*/, socklen_t /*addr_len*/, uint64_t seq) override {
    epoll_event e{};
    e.events = EPOLLIN | EPOLLRDHUP;
    e.data.fd = fd;
    if (!ep_ || ::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, fd, &e) != 0) {
      ::close(fd);
      return false;
    }
    conns_[fd].seq = seq;
    on_event(fd);  // its first bytes are there already
    return true;
  }

  void run() override {
    std::array<epoll_event, 64> evs{};
    // Bounded per turn, so that the port's deadlines and accepts still run.
    for (int round = 0; round < 16; ++round) {
      const int n = ::epoll_wait(ep_.get(), evs.data(), static_cast<int>(evs.size()), 0);
      for (int i = 0; i < n; ++i) on_event(evs[static_cast<std::size_t>(i)].data.fd);
      if (n < static_cast<int>(evs.size())) return;
    }
  }

  long long timeout_ms() override { return -1; }

  void stop() override {
    while (!conns_.empty()) finish(conns_.begin()->first, false);
  }

 private:
  struct Conn {
    uint64_t seq = 0;
    std::string in;   // the request so far
    std::string out;  // the answer, once there is one
    std::size_t sent = 0;
    bool writing = false;
    bool out_armed = false;  // waiting for EPOLLOUT
  };

  void on_event(int fd) {
    auto it = conns_.find(fd);
    if (it == conns_.end()) return;
    if (it->second.writing) {
      write_some(fd, it->second);
    } else {
      read_some(fd, it->second);
    }
  }

  void read_some(int fd, Conn& c) {
    char buf[4096];
    bool ended = false;  // closed (or shut down by the port's cut), reset
    while (c.in.size() < max_) {
      const ssize_t n = ::recv(fd, buf, std::min(sizeof buf, max_ - c.in.size()), 0);
      if (n > 0) {
        c.in.append(buf, static_cast<std::size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      ended = true;
      break;
    }
    const ParseOutcome p = parse_request(c.in, max_);
    switch (p.state) {
      case ParseOutcome::State::Incomplete:
        if (ended) finish(fd, false);
        return;
      case ParseOutcome::State::Refused:
        respond(fd, c, Answer{p.status, std::string(p.reason), {}}, false);
        return;
      case ParseOutcome::State::Complete: {
        host_.request_arrived(c.seq);
        const Answer a = host_.answer(p.request.method, p.request.path);
        respond(fd, c, a, p.request.method == "HEAD");
        return;
      }
    }
  }

  // `c` may be gone when this returns.
  void respond(int fd, Conn& c, const Answer& a, bool head) {
    c.out = format_answer(a, head, http_date(static_cast<long long>(std::time(nullptr))));
    c.in.clear();
    c.in.shrink_to_fit();
    c.writing = true;
    write_some(fd, c);
  }

  // `c` may be gone when this returns.
  void write_some(int fd, Conn& c) {
    while (c.sent < c.out.size()) {
      const ssize_t n = ::send(fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
      if (n > 0) {
        c.sent += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (!c.out_armed) {
          epoll_event e{};
          e.events = EPOLLOUT | EPOLLRDHUP;
          e.data.fd = fd;
          if (::epoll_ctl(ep_.get(), EPOLL_CTL_MOD, fd, &e) != 0) {
            finish(fd, false);
            return;
          }
          c.out_armed = true;
        }
        return;
      }
      finish(fd, false);  // reset, or cut by the port (its write deadline)
      return;
    }
    host_.answered();
    finish(fd, true);
  }

  // Closes and reports. After an answer, what the client sent beyond its
  // request (already here) is read first: closing with unread bytes would
  // reset the connection, and the client could lose the answer with it.
  void finish(int fd, bool answered) {
    auto it = conns_.find(fd);
    if (it == conns_.end()) return;
    if (answered) {
      char buf[4096];
      for (int i = 0; i < 16 && ::recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0; ++i) {
      }
    }
    const uint64_t seq = it->second.seq;
    conns_.erase(it);
    ::close(fd);  // also leaves ep_
    host_.closed(seq);
  }

  EngineHost& host_;
  const std::size_t max_;
  kernel::Fd ep_;
  std::unordered_map<int, Conn> conns_;
};

}  // namespace

std::unique_ptr<HttpEngine> make_plain_engine(EngineHost& host, std::size_t max_request_bytes) {
  return std::make_unique<PlainEngine>(host, max_request_bytes);
}

}  // namespace pressured::web
