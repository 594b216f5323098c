// MetricsServer: /metrics, /healthz and /readyz on one port.
//
// The port is reachable by every tenant on the node (it listens on all
// interfaces, as node_exporter does), and the DaemonSet's liveness probe goes
// through it: a client must never be able to starve /healthz. This file owns
// the connection policy, whatever speaks HTTP behind it:
//   - the accept: pressured drains the kernel's accept queue at every turn
//     and holds a new connection itself until its first bytes arrive, so a
//     flood of connections that are opened and closed costs an accept and a
//     close each, the queue does not fill, and a probe's SYN is not dropped
//     (a dropped SYN is retried only a second later); the HTTP engine is
//     handed only connections that have something to say;
//   - at most `max_connections` connections; over the cap, the oldest one
//     that has not finished sending its request is dropped (an idle or
//     slow-loris connection cannot keep a probe out, and one that came with
//     its request is answered before anything is dropped);
//   - a request (TLS handshake included) must be complete within
//     `header_timeout` of the accept, and fit in `max_request_bytes`;
//   - one request per connection (Connection: close), answers written
//     within `write_timeout`;
//   - what is answered (the router, below).
// The HTTP engine (metrics/http_engine.hpp) is pressured's own HTTP/1.1
// server (plain_engine.cpp) when the web configuration asks for neither TLS
// nor authentication, and otherwise libmicrohttpd over GnuTLS with bcrypt
// checks on a thread of their own, from a module dlopened at start
// (libpressured_metrics_tls.so, tls/engine.cpp): a port without TLS maps no
// TLS library. TLS and authentication follow node_exporter's web
// configuration file (web_config.cpp); see docs/operations.md.

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <spdlog/spdlog.h>

#include "common/module_path.hpp"
#include "kernel/fd.hpp"
#include "metrics/health.hpp"
#include "metrics/http_engine.hpp"
#include "metrics/web_config.hpp"
#include "pressured/metrics.hpp"

namespace pressured {

namespace web {

Result<MakeTlsEngine> load_tls_module(const std::string& path) {
#ifdef PRESSURED_METRICS_TLS_MODULE_BUILD
  const char* build_path = PRESSURED_METRICS_TLS_MODULE_BUILD;
#else
  const char* build_path = nullptr;
#endif
  const std::vector<std::string> tries =
      path.empty() ? module_search_paths(kTlsModuleFile, build_path) : std::vector<std::string>{path};
  std::string why;
  for (const std::string& t : tries) {
    if (path.empty() && !std::filesystem::exists(t)) {
      why += "; " + t + ": absent";
      continue;
    }
    // Loaded once for the process's life: the engine's code must outlive every server.
    // initramfs: not carried (an optional module; no VM test configures TLS or authentication)
    void* h = ::dlopen(t.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (h == nullptr) {
      const char* err = ::dlerror();
      why += "; " + t + ": " + (err ? err : "dlopen failed");
      continue;
    }
    auto make = reinterpret_cast<MakeTlsEngine>(::dlsym(h, kTlsEngineSymbol));
    if (make == nullptr) {
      why += "; " + t + ": no " + kTlsEngineSymbol;
      continue;
    }
    spdlog::debug("metrics server: TLS and authentication module loaded from {}", t);
    return make;
  }
  return Error{ENOENT, std::string("cannot load the metrics port's TLS and authentication module (") +
                           kTlsModuleFile + "): " + (why.empty() ? std::string("nowhere to look") : why.substr(2))};
}

}  // namespace web

namespace {

using SteadyClock = std::chrono::steady_clock;

// A connection handed to the engine, by its sequence number.
struct Conn {
  int fd = -1;  // the engine's; shut down (never closed) here
  // Request: TLS handshake and request still arriving (sheddable, header
  // deadline); Answering: request complete, answer being made or written
  // (write deadline); Suspended: waiting for a password check (neither).
  enum class Phase { Request, Answering, Suspended } phase = Phase::Request;
  SteadyClock::time_point deadline;
  bool cut = false;           // shut down by us (shed or late); the engine closes it next
  bool request_seen = false;  // a whole request reached the engine
};

// A connection pressured accepted and holds until its first bytes arrive
// (then it is handed to the engine, keeping its seq and deadline).
struct Waiting {
  uint64_t seq = 0;
  SteadyClock::time_point deadline;
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
};

}  // namespace

struct MetricsServer::Impl final : web::EngineHost {
  const Metrics* metrics = nullptr;
  WebConfig web;
  MetricsServerLimits limits;
  kernel::Fd listen_fd, epoll_fd, stop_fd, wake_fd;
  std::unordered_map<int, Waiting> waiting;  // by fd, in epoll_fd until handed over
  std::map<uint64_t, int> waiting_by_seq;    // the same, oldest first
  std::unordered_map<uint64_t, Conn> conns;  // handed to the engine, until it closes them
  std::unique_ptr<web::HttpEngine> engine;
  std::thread thread;
  ListenAddress bound;
  bool stopped = false;
  uint64_t next_seq = 0;
  std::size_t cut_count = 0;
  MetricsServerCounters st;

  ~Impl() {
    // The engine reports its connections closed into `conns`, still here.
    if (engine) engine->stop();
    engine.reset();
    for (const auto& [fd, w] : waiting) ::close(fd);
  }

  std::size_t open_count() const { return waiting.size() + conns.size() - cut_count; }
  void update_open() { st.open = open_count(); }

  // Makes the engine close `c` on its next turn: its reads and writes fail
  // at once. The fd is still the engine's (closed only before it reports
  // closed(), which erases `c` on this same thread), so it cannot be another
  // socket.
  void cut(Conn& c) {
    if (c.cut) return;
    c.cut = true;
    ++cut_count;
    ::shutdown(c.fd, SHUT_RDWR);
    update_open();
  }

  // ---- What the engine reports (all on the serving thread)

  void request_arrived(uint64_t seq) override {
    auto it = conns.find(seq);
    if (it == conns.end()) return;
    it->second.request_seen = true;
    if (it->second.phase != Conn::Phase::Answering) {
      it->second.phase = Conn::Phase::Answering;
      it->second.deadline = SteadyClock::now() + limits.write_timeout;
    }
  }

  void suspended(uint64_t seq) override {
    auto it = conns.find(seq);
    if (it != conns.end()) it->second.phase = Conn::Phase::Suspended;
  }

  void closed(uint64_t seq) override {
    auto it = conns.find(seq);
    if (it == conns.end()) return;
    // Ended before a whole request, and not cut by the port: not HTTP (or
    // not TLS on a TLS port), malformed, too large, or closed by the client
    // before its request was complete.
    if (!it->second.cut && !it->second.request_seen) st.rejected++;
    if (it->second.cut) --cut_count;
    conns.erase(it);
    update_open();
  }

  void answered() override { st.served++; }

  void unauthorized() override { st.unauthorized++; }

  void log_debug(std::string_view line) override { spdlog::debug("metrics server: {}", line); }

  // ---- What is answered

  web::Answer answer(std::string_view method, std::string_view path) override {
    if (method != "GET" && method != "HEAD") return web::Answer{405, "only GET\n", {{"Allow", "GET, HEAD"}}};
    // The probes read the health facts only, never the registry.
    if (path == "/healthz") {
      const bool ok = metrics->health().alive();
      return web::Answer{ok ? 200u : 503u, ok ? "ok\n" : "reactor heartbeat stale\n", {}};
    }
    if (path == "/readyz") {
      const bool ok = metrics->health().ready();
      return web::Answer{
          ok ? 200u : 503u, ok ? "ready\n" : "not ready: events not attached or no observation yet\n", {}};
    }
    if (path == "/metrics") return web::Answer{200, metrics->render(), {}, "text/plain; version=0.0.4; charset=utf-8"};
    if (path == "/") return web::Answer{200, "pressured: /metrics /healthz /readyz\n", {}};
    return web::Answer{404, "not found\n", {}};
  }

  // ---- The loop

  // Deadlines, then the cap: over it, the oldest connections still sending
  // their request make room. Run after the engine's turn, so a connection
  // that came with its request in the same turn was answered before anything
  // is shed.
  SteadyClock::time_point police() {
    auto now = SteadyClock::now();
    auto next = SteadyClock::time_point::max();
    for (auto it = waiting.begin(); it != waiting.end();) {
      if (it->second.deadline <= now) {
        st.timed_out++;
        ::close(it->first);
        waiting_by_seq.erase(it->second.seq);
        it = waiting.erase(it);
      } else {
        next = std::min(next, it->second.deadline);
        ++it;
      }
    }
    update_open();
    for (auto& [seq, c] : conns) {
      if (c.cut || c.phase == Conn::Phase::Suspended) continue;
      if (c.deadline <= now) {
        st.timed_out++;  // counted before the cut: a client that sees its connection end may read it at once
        cut(c);
      } else {
        next = std::min(next, c.deadline);
      }
    }
    shed_over_cap();
    return next;
  }

  // Over the cap, the oldest connections that have sent nothing yet make
  // room, then the oldest still sending their request. A connection that has
  // said nothing costs nobody anything to lose; one that has begun its
  // request (a probe sends it right after connecting) goes after all of them.
  void shed_over_cap() {
    while (open_count() > limits.max_connections) {
      if (!waiting_by_seq.empty()) {
        // Its request may have come since it was accepted (a probe sends
        // it right after connecting): then it goes to the engine, not out.
        const int fd = waiting_by_seq.begin()->second;
        const Waiting w = take_waiting(fd);
        if (check_waiting(fd, w)) {
          update_open();
          continue;
        }
        st.shed++;
        ::close(fd);
        update_open();
        continue;
      }
      Conn* victim = nullptr;
      uint64_t victim_seq = 0;
      for (auto& [seq, c] : conns) {
        if (!c.cut && c.phase == Conn::Phase::Request && (victim == nullptr || seq < victim_seq)) {
          victim = &c;
          victim_seq = seq;
        }
      }
      if (victim == nullptr) break;  // all are being answered: they end within write_timeout
      st.shed++;
      cut(*victim);
    }
  }

  // ---- The accept

  // Takes every connection the kernel has queued (bounded per turn, so that
  // the deadlines still run under a flood). One that has sent bytes goes to
  // the engine at once; one closed already (the flood's usual case) is
  // closed for the price of a close; one still silent waits here, under the
  // cap and the header deadline.
  void accept_all() {
    for (int i = 0; i < 4096; ++i) {
      Waiting w;
      w.addr_len = sizeof w.addr;
      int fd = ::accept4(listen_fd.get(), reinterpret_cast<sockaddr*>(&w.addr), &w.addr_len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          // Out of fds (EMFILE/ENFILE) or memory: the kernel keeps the rest
          // queued; the next turn (or a deadline) tries again.
          spdlog::debug("metrics server: accept: {}", std::strerror(errno));
        }
        return;
      }
      st.accepted++;
      w.seq = next_seq++;
      w.deadline = SteadyClock::now() + limits.header_timeout;
      if (!check_waiting(fd, w)) add_waiting(fd, w);
      update_open();
      // The cap is kept at the end of the turn (police), when the requests
      // of those accepted in this one have had the whole turn to arrive;
      // here only a bound on the fds a turn can hold.
      if (waiting.size() > 2 * limits.max_connections) shed_over_cap();
    }
  }

  // True when `fd` was dealt with (handed to the engine, or closed); false
  // while it has sent nothing yet and is still open.
  bool check_waiting(int fd, const Waiting& w) {
    char b;
    ssize_t n = ::recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
    if (n <= 0) {  // closed (or reset) before its request: as the engine would count it
      st.rejected++;
      ::close(fd);
      return true;
    }
    conns[w.seq] = Conn{fd, Conn::Phase::Request, w.deadline};
    update_open();  // counted before the engine answers it (a scrape sees its own connection)
    // The engine owns (and closes) the fd from here, also when it refuses
    // it; it may be done with it before add() returns.
    if (!engine->add(fd, reinterpret_cast<const sockaddr*>(&w.addr), w.addr_len, w.seq)) {
      st.rejected++;
      conns.erase(w.seq);
    }
    return true;
  }

  // Into the waiting set, woken by its first bytes or its end; a connection
  // that cannot be watched is closed (counted as rejected).
  void add_waiting(int fd, const Waiting& w) {
    epoll_event e{};
    e.events = EPOLLIN | EPOLLRDHUP;
    e.data.fd = fd;
    if (::epoll_ctl(epoll_fd.get(), EPOLL_CTL_ADD, fd, &e) != 0) {
      st.rejected++;
      ::close(fd);
      return;
    }
    waiting.emplace(fd, w);
    waiting_by_seq.emplace(w.seq, fd);
  }

  // Out of the waiting set and of epoll_fd (the engine watches it then).
  Waiting take_waiting(int fd) {
    auto it = waiting.find(fd);
    const Waiting w = it->second;
    ::epoll_ctl(epoll_fd.get(), EPOLL_CTL_DEL, fd, nullptr);
    waiting_by_seq.erase(w.seq);
    waiting.erase(it);
    return w;
  }

  void on_waiting_event(int fd) {
    if (!waiting.contains(fd)) return;
    const Waiting w = take_waiting(fd);
    if (!check_waiting(fd, w)) add_waiting(fd, w);  // woken without data (EINTR): keep waiting
    update_open();
  }

  void run() {
    std::array<epoll_event, 64> evs{};
    auto next_deadline = SteadyClock::time_point::max();
    while (true) {
      long long timeout_ms = engine->timeout_ms();
      if (next_deadline != SteadyClock::time_point::max()) {
        auto left = std::chrono::ceil<std::chrono::milliseconds>(next_deadline - SteadyClock::now()).count();
        left = std::max<long long>(left, 0);
        timeout_ms = timeout_ms < 0 ? left : std::min(timeout_ms, static_cast<long long>(left));
      }
      int n = ::epoll_wait(epoll_fd.get(), evs.data(), static_cast<int>(evs.size()), static_cast<int>(timeout_ms));
      if (n < 0 && errno != EINTR) {
        spdlog::error("metrics server: epoll_wait: {}", std::strerror(errno));
        return;
      }
      for (int i = 0; i < n; ++i) {
        const int fd = evs[static_cast<std::size_t>(i)].data.fd;
        if (fd == stop_fd.get()) return;
        if (fd == wake_fd.get()) {
          uint64_t v;
          if (::read(wake_fd.get(), &v, sizeof v) < 0) {
            // Already drained.
          }
        } else if (fd == listen_fd.get()) {
          accept_all();
        } else if (fd != engine->poll_fd()) {
          on_waiting_event(fd);
        }
      }
      engine->run();
      next_deadline = police();
    }
  }

  // The engine for the web configuration: pressured's own without TLS and
  // authentication, else the TLS module's.
  Result<std::unique_ptr<web::HttpEngine>> make_engine() {
    if (!web.tls() && !web.auth()) return web::make_plain_engine(*this, limits.max_request_bytes);
    web::TlsEngineOptions o;
    o.web = web;
    o.limits = limits;
    o.wake_fd = wake_fd.get();
    if (web.tls()) {
      auto cert = web::read_text_file(web.cert_file, "TLS certificate");
      if (!cert) return Error{EINVAL, cert.error().message};
      auto key = web::read_text_file(web.key_file, "TLS key");
      if (!key) return Error{EINVAL, key.error().message};
      o.cert_pem = std::move(*cert);
      o.key_pem = std::move(*key);
    }
    auto make = web::load_tls_module();
    if (!make) {
      return Error{make.error().code, std::string("the web configuration asks for ") +
                                          (web.tls() ? "TLS" : "authentication") + ", and " + make.error().message};
    }
    std::string error;
    web::HttpEngine* e = (*make)(*this, o, error);
    if (e == nullptr) return Error{web.tls() ? EINVAL : EIO, error};
    return std::unique_ptr<web::HttpEngine>(e);
  }
};

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsServer::~MetricsServer() { stop(); }

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const Metrics& metrics, std::string_view listen,
                                                            const WebConfig& web, MetricsServerLimits limits) {
  auto addr = parse_listen_address(listen);
  if (!addr) {
    return Error{EINVAL, std::string("invalid metrics listen address \"").append(listen).append("\": ") +
                             addr.error().message};
  }

  auto impl = std::make_unique<Impl>();
  impl->metrics = &metrics;
  impl->web = web;
  impl->limits = limits;
  if (impl->limits.max_connections == 0) impl->limits.max_connections = 1;

  // The listening socket is bound here (host names, IPv6, clear errors for
  // a port in use) and accepted on by this server (accept_all).
  const std::string what = "cannot listen for metrics on " + addr->to_string();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port_text = std::to_string(addr->port);
  if (int rc = ::getaddrinfo(addr->host.c_str(), port_text.c_str(), &hints, &res); rc != 0 || res == nullptr) {
    return Error{EADDRNOTAVAIL, what + ": address cannot be resolved (" + ::gai_strerror(rc) + ")"};
  }
  kernel::Fd listen_fd;
  int err = EADDRNOTAVAIL;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    kernel::Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd) {
      err = errno;
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    // The longest queue the kernel allows (it caps any larger backlog at
    // net.core.somaxconn, 4096 by default since Linux 5.4): a burst is taken
    // whole at the next turn instead of its SYNs dropped, also while this
    // thread waits for a core on a loaded node.
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd.get(), 65535) == 0) {
      listen_fd = std::move(fd);
      break;
    }
    err = errno;
  }
  ::freeaddrinfo(res);
  if (!listen_fd) return Error::from_errno(err, what);

  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(listen_fd.get(), reinterpret_cast<sockaddr*>(&ss), &len);
  uint16_t port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                           : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  impl->bound = ListenAddress{addr->host, port};

  impl->epoll_fd.reset(::epoll_create1(EPOLL_CLOEXEC));
  impl->stop_fd.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  impl->wake_fd.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!impl->epoll_fd || !impl->stop_fd || !impl->wake_fd) return Error::from_errno(errno, "metrics server");
  auto engine = impl->make_engine();
  if (!engine) return engine.error();
  impl->engine = std::move(*engine);
  if (impl->engine->poll_fd() < 0) return Error{EIO, "metrics server: the HTTP engine has no fd to watch"};
  impl->listen_fd = std::move(listen_fd);

  for (int fd : {impl->engine->poll_fd(), impl->listen_fd.get(), impl->stop_fd.get(), impl->wake_fd.get()}) {
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.fd = fd;
    if (::epoll_ctl(impl->epoll_fd.get(), EPOLL_CTL_ADD, fd, &e) != 0) return Error::from_errno(errno, "metrics server");
  }
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->run(); });
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

uint16_t MetricsServer::port() const { return impl_->bound.port; }

std::string MetricsServer::address() const { return impl_->bound.to_string(); }

std::string MetricsServer::scheme() const { return impl_->web.tls() ? "https" : "http"; }

MetricsServerStats MetricsServer::stats() const { return impl_->st.values(); }

const MetricsServerCounters& MetricsServer::counters() const { return impl_->st; }

void MetricsServer::stop() {
  if (!impl_ || impl_->stopped) return;
  impl_->stopped = true;
  uint64_t one = 1;
  if (::write(impl_->stop_fd.get(), &one, sizeof one) < 0) {
    // The eventfd cannot fail to take one increment; nothing to do.
  }
  if (impl_->thread.joinable()) impl_->thread.join();
  // Closes the connections (a password check under way finishes first) and
  // then the listening socket: a restart can bind the port.
  if (impl_->engine) impl_->engine->stop();
  for (const auto& [fd, w] : impl_->waiting) ::close(fd);
  impl_->waiting.clear();
  impl_->waiting_by_seq.clear();
  impl_->listen_fd.reset();
}

}  // namespace pressured
