// MetricsServer: /metrics, /healthz and /readyz on one port.
//
// The port is reachable by every tenant on the node (it listens on all
// interfaces, as node_exporter does), and the DaemonSet's liveness probe goes
// through it: a client must never be able to starve /healthz. HTTP and TLS
// are libmicrohttpd's (epoll mode, on this server's one thread); on top of
// it, pressured keeps:
//   - the accept: pressured drains the kernel's accept queue at every turn
//     and holds a new connection itself until its first bytes arrive, so a
//     flood of connections that are opened and closed costs an accept and a
//     close each, the queue does not fill, and a probe's SYN is not dropped
//     (a dropped SYN is retried only a second later); libmicrohttpd is
//     handed only connections that have something to say;
//   - at most `max_connections` connections; over the cap, the oldest one
//     that has not finished sending its request is dropped (an idle or
//     slow-loris connection cannot keep a probe out, and one that came with
//     its request is answered before anything is dropped);
//   - a request (TLS handshake included) must be complete within
//     `header_timeout` of the accept, and fit in `max_request_bytes`;
//   - one request per connection (Connection: close), answers written
//     within `write_timeout`;
//   - bcrypt checks on a thread of their own, bounded, so that probes never
//     wait behind them.
// TLS and authentication of /metrics follow node_exporter's web
// configuration file (tls_server_config, basic_auth_users with bcrypt
// hashes), plus a bearer token file; see docs/operations.md. The file is
// read in web_config.cpp, credentials are checked in auth.cpp.

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <unordered_map>

#include <microhttpd.h>
#include <spdlog/spdlog.h>

#include "kernel/fd.hpp"
#include "metrics/auth.hpp"
#include "metrics/web_config.hpp"
#include "pressured/metrics.hpp"

namespace pressured {

// ---------------------------------------------------------------------------
// The server

namespace {

using SteadyClock = std::chrono::steady_clock;

// What the serving thread knows of one TCP connection (MHD's socket context).
struct Conn {
  MHD_socket fd = MHD_INVALID_SOCKET;
  uint64_t seq = 0;
  // Request: TLS handshake and request still arriving (sheddable, header
  // deadline); Answering: request complete, answer being made or written
  // (write deadline); Suspended: waiting for a password check (neither).
  enum class Phase { Request, Answering, Suspended } phase = Phase::Request;
  SteadyClock::time_point deadline;
  bool cut = false;  // shut down by us (shed or late); MHD closes it next
  bool request_seen = false;  // a request reached on_request
};

// A connection pressured accepted and holds until its first bytes arrive
// (then it is handed to MHD, keeping its seq and deadline).
struct Waiting {
  uint64_t seq = 0;
  SteadyClock::time_point deadline;
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
};

// Per request (MHD's request context): the password check, if one was needed.
struct RequestState {
  std::shared_ptr<web::AuthJob> job;
};

struct Answer {
  unsigned status;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string type = "text/plain";
};

}  // namespace

// The HTTP protocol, TLS (GnuTLS), request limits and the socket I/O are
// libmicrohttpd's. Kept here, because MHD has no such policy: which
// connection makes room at the cap (the oldest still sending its request, so
// that a probe is never refused for idle or slow clients), a deadline from
// accept to whole request (MHD's timeout is an idle timeout, which a client
// sending one byte a second never reaches), and authentication. MHD runs in
// its epoll mode driven by this server's one thread, so every MHD callback
// and every shutdown() of a connection happen on that thread.
struct MetricsServer::Impl {
  const Metrics* metrics = nullptr;
  WebConfig web;
  MetricsServerLimits limits;
  MHD_Daemon* daemon = nullptr;
  kernel::Fd listen_fd, epoll_fd, stop_fd, wake_fd;
  int mhd_epoll_fd = -1;
  std::unordered_map<int, Waiting> waiting;  // by fd, in epoll_fd until handed over
  std::map<uint64_t, int> waiting_by_seq;    // the same, oldest first
  const Waiting* handing_over = nullptr;     // read by on_connection during MHD_add_connection
  std::unique_ptr<web::Authenticator> auth;
  std::thread thread;
  ListenAddress bound;
  bool stopped = false;
  uint64_t next_seq = 0;
  std::unordered_map<MHD_Connection*, Conn> conns;
  std::size_t cut_count = 0;
  std::string cert_pem, key_pem;  // MHD keeps pointers to them
  std::string priorities;
  std::string last_log;  // MHD's last message, for the error of a failed start
  MetricsServerCounters st;

  ~Impl() {
    if (daemon != nullptr) MHD_stop_daemon(daemon);
    for (const auto& [fd, w] : waiting) ::close(fd);
  }

  std::size_t open_count() const { return waiting.size() + conns.size() - cut_count; }
  void update_open() { st.open = open_count(); }

  // Makes MHD close `c` on its next turn: its reads and writes fail at once.
  // The fd is still MHD's (it is closed only after the CLOSED notification,
  // which erases `c` on this same thread), so it cannot be another socket.
  void cut(Conn& c) {
    if (c.cut) return;
    c.cut = true;
    ++cut_count;
    ::shutdown(c.fd, SHUT_RDWR);
    update_open();
  }

  // ---- MHD callbacks (all on the serving thread)

  static void on_log(void* cls, const char* fmt, va_list ap) {
    auto* self = static_cast<Impl*>(cls);
    char buf[512];
    va_list copy;
    va_copy(copy, ap);
    std::vsnprintf(buf, sizeof buf, fmt, copy);
    va_end(copy);
    std::string msg(buf);
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    self->last_log = msg;
    // MHD answers some malformed and oversized requests itself (400 for a
    // missing Host, 414, 431); its log is where it says so. (Rejections are
    // counted when such connections close: see on_connection.)
    if (std::strncmp(fmt, "Error processing request", 24) == 0) self->st.served++;
    spdlog::debug("metrics server: {}", msg);
  }

  static void on_connection(void* cls, MHD_Connection* connection, void** /*socket_context*/,
                            MHD_ConnectionNotificationCode code) {
    auto* self = static_cast<Impl*>(cls);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
      Conn c;
      const MHD_ConnectionInfo* info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
      c.fd = info != nullptr ? info->connect_fd : MHD_INVALID_SOCKET;
      if (self->handing_over != nullptr) {  // accepted by accept_all(): its place in line and its deadline
        c.seq = self->handing_over->seq;
        c.deadline = self->handing_over->deadline;
      } else {
        c.seq = self->next_seq++;
        c.deadline = SteadyClock::now() + self->limits.header_timeout;
      }
      self->conns[connection] = c;
    } else {
      auto it = self->conns.find(connection);
      if (it != self->conns.end()) {
        // Ended before a request reached pressured, and not cut by it: not
        // HTTP (or not TLS on a TLS port), malformed, too large, or closed
        // by the client before its request was complete.
        if (!it->second.cut && !it->second.request_seen) self->st.rejected++;
        if (it->second.cut) --self->cut_count;
        self->conns.erase(it);
      }
    }
    self->update_open();
  }

  static void on_completed(void* cls, MHD_Connection* /*connection*/, void** req_cls,
                           MHD_RequestTerminationCode code) {
    auto* self = static_cast<Impl*>(cls);
    if (code == MHD_REQUEST_TERMINATED_COMPLETED_OK) self->st.served++;
    delete static_cast<RequestState*>(*req_cls);
    *req_cls = nullptr;
  }

  static MHD_Result on_request(void* cls, MHD_Connection* connection, const char* url, const char* method,
                               const char* /*version*/, const char* /*upload_data*/, size_t* upload_data_size,
                               void** req_cls) {
    auto* self = static_cast<Impl*>(cls);
    auto conn = self->conns.find(connection);
    if (*upload_data_size != 0) {
      *upload_data_size = 0;  // a body is not read (GET only): answered 405 below
      return MHD_YES;
    }
    auto* state = static_cast<RequestState*>(*req_cls);
    if (state == nullptr) {
      state = new RequestState;
      *req_cls = state;
    }
    if (conn != self->conns.end()) conn->second.request_seen = true;
    if (conn != self->conns.end() && conn->second.phase != Conn::Phase::Answering) {
      conn->second.phase = Conn::Phase::Answering;
      conn->second.deadline = SteadyClock::now() + self->limits.write_timeout;
    }
    std::optional<Answer> a = self->route(connection, url, method, *state);
    if (!a) {  // a password check is under way: wait for it without holding the thread
      if (conn != self->conns.end()) conn->second.phase = Conn::Phase::Suspended;
      MHD_suspend_connection(connection);
      return MHD_YES;
    }
    const bool head = std::strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
    MHD_Response* r = MHD_create_response_from_buffer(a->body.size(), a->body.data(), MHD_RESPMEM_MUST_COPY);
    if (r == nullptr) return MHD_NO;
    (void)head;  // MHD sends no body for HEAD itself
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, a->type.c_str());
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");  // one request per connection
    for (const auto& [k, v] : a->headers) MHD_add_response_header(r, k.c_str(), v.c_str());
    MHD_Result ret = MHD_queue_response(connection, a->status, r);
    MHD_destroy_response(r);
    return ret;
  }

  // ---- What is answered

  std::optional<Answer> route(MHD_Connection* connection, std::string_view url, std::string_view method,
                              RequestState& state) {
    if (method != MHD_HTTP_METHOD_GET && method != MHD_HTTP_METHOD_HEAD) {
      return Answer{MHD_HTTP_METHOD_NOT_ALLOWED, "only GET\n", {{"Allow", "GET, HEAD"}}};
    }
    // Probes never need credentials, so nothing they do waits for a password check.
    if (url == "/healthz") {
      const bool ok = metrics->alive();
      return Answer{ok ? 200u : 503u, ok ? "ok\n" : "reactor heartbeat stale\n", {}};
    }
    if (url == "/readyz") {
      const bool ok = metrics->ready();
      return Answer{ok ? 200u : 503u, ok ? "ready\n" : "not ready: events not attached or no observation yet\n", {}};
    }
    if (url == "/metrics") {
      std::optional<unsigned> a = auth->authorize(connection, state.job);
      if (!a) return std::nullopt;
      if (*a != 200) {
        st.unauthorized++;
        std::vector<std::pair<std::string, std::string>> h;
        if (*a == 401) h.emplace_back("WWW-Authenticate", "Basic realm=\"pressured\"");
        if (*a == 429) h.emplace_back("Retry-After", "1");
        if (*a == 503) return Answer{*a, "stopping\n", h};
        return Answer{*a, *a == 401 ? "unauthorized\n" : "too many authentication attempts\n", h};
      }
      return Answer{200, metrics->render(), {}, "text/plain; version=0.0.4; charset=utf-8"};
    }
    if (url == "/") return Answer{200, "pressured: /metrics /healthz /readyz\n", {}};
    return Answer{404, "not found\n", {}};
  }

  // ---- The loop

  // Deadlines, then the cap: over it, the oldest connections still sending
  // their request make room. Run after MHD_run, so a connection that came
  // with its request in the same turn was answered before anything is shed.
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
    for (auto& [mc, c] : conns) {
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
        // it right after connecting): then it goes to MHD, not out.
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
      for (auto& [mc, c] : conns) {
        if (!c.cut && c.phase == Conn::Phase::Request && (victim == nullptr || c.seq < victim->seq)) victim = &c;
      }
      if (victim == nullptr) break;  // all are being answered: they end within write_timeout
      st.shed++;
      cut(*victim);
    }
  }

  // ---- The accept

  // Takes every connection the kernel has queued (bounded per turn, so that
  // the deadlines still run under a flood). One that has sent bytes goes to
  // MHD at once; one closed already (the flood's usual case) is closed for
  // the price of a close; one still silent waits here, under the cap and the
  // header deadline.
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

  // True when `fd` was dealt with (handed to MHD, or closed); false while it
  // has sent nothing yet and is still open.
  bool check_waiting(int fd, const Waiting& w) {
    char b;
    ssize_t n = ::recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
    if (n <= 0) {  // closed (or reset) before its request: as MHD counts it
      st.rejected++;
      ::close(fd);
      return true;
    }
    handing_over = &w;
    // MHD owns (and closes) the fd from here, also when it refuses it.
    if (MHD_add_connection(daemon, fd, reinterpret_cast<const sockaddr*>(&w.addr), w.addr_len) != MHD_YES) {
      st.rejected++;
    }
    handing_over = nullptr;
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

  // Out of the waiting set and of epoll_fd (MHD adds it to its own).
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
      long long timeout_ms = -1;
      MHD_UNSIGNED_LONG_LONG mhd_timeout = 0;
      if (MHD_get_timeout(daemon, &mhd_timeout) == MHD_YES) {
        timeout_ms = static_cast<long long>(std::min<MHD_UNSIGNED_LONG_LONG>(mhd_timeout, 60'000));
      }
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
        } else if (fd != mhd_epoll_fd) {
          on_waiting_event(fd);
        }
      }
      MHD_run(daemon);
      next_deadline = police();
    }
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

  if (web.tls()) {
    auto cert = web::read_text_file(web.cert_file, "TLS certificate");
    if (!cert) return Error{EINVAL, cert.error().message};
    auto key = web::read_text_file(web.key_file, "TLS key");
    if (!key) return Error{EINVAL, key.error().message};
    impl->cert_pem = std::move(*cert);
    impl->key_pem = std::move(*key);
    impl->priorities = web::tls_priorities(web.min_version);
  }

  // The listening socket is bound here (host names, IPv6, clear errors for
  // a port in use) and accepted on by this server (accept_all), not MHD.
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
    // The longest queue the kernel allows (net.core.somaxconn caps it): a
    // burst is taken whole at the next turn instead of its SYNs dropped.
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd.get(), 1024) == 0) {
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
  impl->auth = std::make_unique<web::Authenticator>(web, impl->limits.auth_failures_per_second, impl->wake_fd.get());
  if (!impl->auth->init()) return Error{EIO, "metrics server: no random key for the credentials cache"};

  Impl* raw = impl.get();
  unsigned int flags = MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
  if (web.tls()) flags |= MHD_USE_TLS;
  // MHD's own bounds sit above pressured's: its cap leaves room for the
  // connections accepted in one turn and those cut but not yet closed (at
  // its cap MHD stops accepting, it never refuses); its idle timeout is a
  // backstop behind the deadlines police() keeps.
  const auto cap = static_cast<unsigned int>(impl->limits.max_connections + 64);
  const auto idle_s = static_cast<unsigned int>(
      std::chrono::ceil<std::chrono::seconds>(impl->limits.header_timeout + impl->limits.write_timeout).count() + 1);
  std::vector<MHD_OptionItem> opts = {
      {MHD_OPTION_CONNECTION_LIMIT, cap, nullptr},
      {MHD_OPTION_CONNECTION_TIMEOUT, idle_s, nullptr},
      {MHD_OPTION_CONNECTION_MEMORY_LIMIT, static_cast<intptr_t>(impl->limits.max_request_bytes + 4096), nullptr},
      {MHD_OPTION_EXTERNAL_LOGGER, reinterpret_cast<intptr_t>(&Impl::on_log), raw},
      {MHD_OPTION_NOTIFY_CONNECTION, reinterpret_cast<intptr_t>(&Impl::on_connection), raw},
      {MHD_OPTION_NOTIFY_COMPLETED, reinterpret_cast<intptr_t>(&Impl::on_completed), raw},
  };
  if (web.tls()) {
    opts.push_back({MHD_OPTION_HTTPS_MEM_CERT, 0, impl->cert_pem.data()});
    opts.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0, impl->key_pem.data()});
    opts.push_back({MHD_OPTION_HTTPS_PRIORITIES, 0, impl->priorities.data()});
  }
  opts.push_back({MHD_OPTION_END, 0, nullptr});
  impl->daemon = MHD_start_daemon(flags, 0, nullptr, nullptr, &Impl::on_request, raw, MHD_OPTION_ARRAY, opts.data(),
                                  MHD_OPTION_END);
  if (impl->daemon == nullptr) {
    const std::string why = impl->last_log.empty() ? "libmicrohttpd refused the options" : impl->last_log;
    if (web.tls()) return Error{EINVAL, "TLS " + web.cert_file + " / " + web.key_file + ": " + why};
    return Error{EIO, what + ": " + why};
  }
  impl->listen_fd = std::move(listen_fd);

  const MHD_DaemonInfo* info = MHD_get_daemon_info(impl->daemon, MHD_DAEMON_INFO_EPOLL_FD);
  if (info == nullptr) return Error{EIO, "metrics server: libmicrohttpd has no epoll fd"};
  impl->mhd_epoll_fd = info->epoll_fd;
  for (int fd : {info->epoll_fd, impl->listen_fd.get(), impl->stop_fd.get(), impl->wake_fd.get()}) {
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.fd = fd;
    if (::epoll_ctl(impl->epoll_fd.get(), EPOLL_CTL_ADD, fd, &e) != 0) return Error::from_errno(errno, "metrics server");
  }
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
  // Suspended connections are resumed (answered 503) before MHD stops.
  if (impl_->auth) impl_->auth->stop();
  // Closes the connections and the listening socket: a restart can bind the port.
  if (impl_->daemon != nullptr) MHD_stop_daemon(impl_->daemon);
  impl_->daemon = nullptr;
  for (const auto& [fd, w] : impl_->waiting) ::close(fd);
  impl_->waiting.clear();
  impl_->waiting_by_seq.clear();
  impl_->listen_fd.reset();
}

}  // namespace pressured
