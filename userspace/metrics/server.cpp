// MetricsServer: /metrics, /healthz and /readyz on one port.
//
// The port is reachable by every tenant on the node (it listens on all
// interfaces, as node_exporter does), and the DaemonSet's liveness probe goes
// through it: a client must never be able to starve /healthz. So the server
// is one epoll loop on its own thread with non-blocking sockets, not a
// thread pool that a slow client can pin:
//   - at most `max_connections` connections; at the cap, the oldest one that
//     has not finished sending its request is dropped for the newcomer (an
//     idle or slow-loris connection cannot keep a probe out);
//   - a request (TLS handshake included) must be complete within
//     `header_timeout` of the accept, and fit in `max_request_bytes`;
//   - one request per connection (Connection: close), answers written
//     without blocking within `write_timeout`.
// TLS and authentication of /metrics follow node_exporter's web
// configuration file (tls_server_config, basic_auth_users with bcrypt
// hashes), plus a bearer token file; see docs/operations.md.

#include <arpa/inet.h>
#include <crypt.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <unordered_map>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include "config/yaml_guard.hpp"
#include "kernel/fd.hpp"
#include "pressured/metrics.hpp"

namespace pressured {

// ---------------------------------------------------------------------------
// Web configuration

namespace {

Result<std::string> read_text_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error::from_errno(errno, what + " " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool is_bcrypt(const std::string& h) {
  return h.size() == 60 && h[0] == '$' && h[1] == '2' && (h[2] == 'a' || h[2] == 'b' || h[2] == 'y') && h[3] == '$';
}

}  // namespace

Result<WebConfig> load_web_config(const std::string& path) {
  auto text = read_text_file(path, "web config");
  if (!text) return text.error();
  const auto bad = [&](const std::string& why) { return Error{EINVAL, "web config " + path + ": " + why}; };
  if (auto g = check_yaml(*text); !g) return bad(g.error().message);
  YAML::Node root;
  try {
    root = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    return bad(std::string("syntax error: ") + e.what());
  }
  WebConfig out;
  if (!root || root.IsNull()) return out;  // an empty file: plain HTTP, no auth (as node_exporter)
  if (!root.IsMap()) return bad("not a mapping");
  const std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  const auto relative_to_file = [&](const std::string& p) { return p.empty() || p[0] == '/' ? p : dir + "/" + p; };
  try {
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>();
      const YAML::Node& v = kv.second;
      if (key == "tls_server_config") {
        if (v.IsNull()) continue;
        if (!v.IsMap()) return bad("tls_server_config is not a mapping");
        for (const auto& t : v) {
          const std::string k = t.first.as<std::string>();
          if (k == "cert_file") out.cert_file = relative_to_file(t.second.as<std::string>());
          else if (k == "key_file") out.key_file = relative_to_file(t.second.as<std::string>());
          else if (k == "min_version" || k == "cipher_suites" || k == "client_auth_type" || k == "client_ca_file") {
            return bad("tls_server_config." + k + " is not supported (TLS 1.2+, no client certificates)");
          } else {
            return bad("unknown key tls_server_config." + k);
          }
        }
        if (out.cert_file.empty() != out.key_file.empty()) return bad("tls_server_config needs both cert_file and key_file");
      } else if (key == "basic_auth_users") {
        if (v.IsNull()) continue;
        if (!v.IsMap()) return bad("basic_auth_users is not a mapping of user: bcrypt-hash");
        for (const auto& u : v) {
          std::string user = u.first.as<std::string>(), hash = u.second.as<std::string>();
          if (user.empty() || user.find(':') != std::string::npos) return bad("basic_auth_users: invalid user name '" + user + "'");
          if (!is_bcrypt(hash)) return bad("basic_auth_users." + user + ": not a bcrypt hash ($2y$... as htpasswd -B makes)");
          out.basic_auth_users.emplace_back(user, hash);
        }
      } else if (key == "bearer_token_file") {
        if (v.IsNull()) continue;
        auto tok = read_text_file(relative_to_file(v.as<std::string>()), "bearer_token_file");
        if (!tok) return bad(tok.error().message);
        std::string t = *tok;
        while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
        if (t.size() < 16) return bad("bearer_token_file holds fewer than 16 characters");
        out.bearer_token = t;
      } else if (key == "http_server_config") {
        return bad("http_server_config is not supported (HTTP/1.1 only)");
      } else {
        return bad("unknown key '" + key + "'");
      }
    }
  } catch (const YAML::Exception& e) {
    return bad(std::string("expected a string: ") + e.what());
  }
  if (out.tls()) {
    for (const auto& f : {out.cert_file, out.key_file}) {
      if (::access(f.c_str(), R_OK) != 0) return bad(Error::from_errno(errno, "cannot read " + f).message);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// The server

namespace {

using SteadyClock = std::chrono::steady_clock;

struct SslCtxDeleter {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};

std::string openssl_error() {
  unsigned long e = ERR_get_error();
  if (e == 0) return "unknown TLS error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return buf;
}

std::string base64_decode(std::string_view in) {
  std::string out((in.size() / 4 + 1) * 3 + 1, '\0');
  if (in.size() % 4 != 0) return {};
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(in.data()),
                          static_cast<int>(in.size()));
  if (n < 0) return {};
  std::size_t pad = 0;
  if (!in.empty() && in.back() == '=') ++pad;
  if (in.size() > 1 && in[in.size() - 2] == '=') ++pad;
  out.resize(static_cast<std::size_t>(n) - pad);
  return out;
}

bool equal_constant_time(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string sha256(std::string_view in) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(in.data()), in.size(), d);
  return std::string(reinterpret_cast<char*>(d), sizeof d);
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

struct Conn {
  int fd = -1;
  SSL* ssl = nullptr;
  enum class State { Handshake, Reading, Writing } state = State::Reading;
  std::string in;
  std::string out;
  std::size_t out_off = 0;
  SteadyClock::time_point deadline;
  uint64_t seq = 0;
  uint32_t events = 0;  // current epoll interest
};

}  // namespace

struct MetricsServer::Impl {
  const Metrics* metrics = nullptr;
  WebConfig web;
  MetricsServerLimits limits;
  std::unique_ptr<SSL_CTX, SslCtxDeleter> ssl_ctx;
  kernel::Fd listen_fd, epoll_fd, stop_fd;
  std::thread thread;
  ListenAddress bound;
  bool stopped = false;
  uint64_t next_seq = 0;
  std::unordered_map<int, Conn> conns;
  std::set<std::string> auth_cache;  // sha256 of credentials that verified
  SteadyClock::time_point auth_window;
  unsigned auth_checks = 0;
  MetricsServerCounters st;

  // Connections are owned by `conns` (keyed by their fd, which their SSL
  // uses too): closed here and in close_conn, after their SSL is freed.
  ~Impl() {
    for (auto& [fd, c] : conns) {
      if (c.ssl) SSL_free(c.ssl);
      ::close(fd);
    }
  }

  // Counted on the serving thread only; a scrape reads them on its own, one
  // atomic at a time.
  template <typename F>
  void count(F f) {
    f(st);
    st.open = conns.size();
  }

  void set_events(Conn& c, uint32_t ev) {
    if (c.events == ev) return;
    epoll_event e{};
    e.events = ev;
    e.data.fd = c.fd;
    ::epoll_ctl(epoll_fd.get(), EPOLL_CTL_MOD, c.fd, &e);
    c.events = ev;
  }

  void close_conn(int fd) {
    auto it = conns.find(fd);
    if (it == conns.end()) return;
    if (it->second.ssl) {
      if (it->second.state == Conn::State::Writing) SSL_shutdown(it->second.ssl);  // best effort, non-blocking
      SSL_free(it->second.ssl);
    }
    ::epoll_ctl(epoll_fd.get(), EPOLL_CTL_DEL, fd, nullptr);
    ::close(fd);
    conns.erase(it);
    st.open = conns.size();
  }

  // At the cap, the oldest connection still sending its request makes room.
  bool shed_one() {
    int victim = -1;
    uint64_t oldest = UINT64_MAX;
    for (const auto& [fd, c] : conns) {
      if (c.state != Conn::State::Writing && c.seq < oldest) {
        oldest = c.seq;
        victim = fd;
      }
    }
    if (victim < 0) return false;
    // Counted before the close: a client that sees its connection end may
    // read the counters at once (tests do).
    count([](MetricsServerCounters& s) { ++s.shed; });
    close_conn(victim);
    return true;
  }

  void accept_all() {
    while (true) {
      kernel::Fd accepted(::accept4(listen_fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!accepted) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;  // EAGAIN, or EMFILE/ENFILE: retried on the next readiness
      }
      const int fd = accepted.get();
      if (conns.size() >= limits.max_connections && !shed_one()) {
        count([](MetricsServerCounters& s) { ++s.shed; });
        continue;  // every slot is busy writing an answer: `accepted` closes it
      }
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      Conn c;
      c.fd = fd;
      c.seq = next_seq++;
      c.deadline = SteadyClock::now() + limits.header_timeout;
      if (ssl_ctx) {
        c.ssl = SSL_new(ssl_ctx.get());
        if (c.ssl == nullptr || SSL_set_fd(c.ssl, fd) != 1) {
          if (c.ssl) SSL_free(c.ssl);
          continue;
        }
        SSL_set_accept_state(c.ssl);
        c.state = Conn::State::Handshake;
      }
      epoll_event e{};
      e.events = EPOLLIN | EPOLLRDHUP;
      e.data.fd = fd;
      c.events = e.events;
      if (::epoll_ctl(epoll_fd.get(), EPOLL_CTL_ADD, fd, &e) != 0) {
        if (c.ssl) SSL_free(c.ssl);
        continue;
      }
      (void)accepted.release();  // owned by `conns` from here on
      conns.emplace(fd, std::move(c));
      count([](MetricsServerCounters& s) { ++s.accepted; });
    }
  }

  // TLS: result of an SSL call that wants more I/O -> the epoll interest.
  // Returns false when the connection failed.
  bool ssl_wants(Conn& c, int rc) {
    int err = SSL_get_error(c.ssl, rc);
    if (err == SSL_ERROR_WANT_READ) {
      set_events(c, EPOLLIN | EPOLLRDHUP);
      return true;
    }
    if (err == SSL_ERROR_WANT_WRITE) {
      set_events(c, EPOLLOUT | EPOLLRDHUP);
      return true;
    }
    ERR_clear_error();
    return false;
  }

  void on_ready(int fd) {
    auto it = conns.find(fd);
    if (it == conns.end()) return;
    Conn& c = it->second;
    if (c.state == Conn::State::Handshake) {
      int rc = SSL_accept(c.ssl);
      if (rc == 1) {
        c.state = Conn::State::Reading;
        set_events(c, EPOLLIN | EPOLLRDHUP);
      } else if (!ssl_wants(c, rc)) {
        count([](MetricsServerCounters& s) { ++s.rejected; });
        return close_conn(fd);
      } else {
        return;
      }
    }
    if (c.state == Conn::State::Reading) {
      char buf[4096];
      while (true) {
        ssize_t n;
        if (c.ssl) {
          int rc = SSL_read(c.ssl, buf, sizeof buf);
          if (rc <= 0) {
            if (ssl_wants(c, rc)) break;
            return close_conn(fd);
          }
          n = rc;
        } else {
          n = ::recv(fd, buf, sizeof buf, 0);
          if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
          if (n <= 0) return close_conn(fd);
        }
        c.in.append(buf, static_cast<std::size_t>(n));
        auto end = c.in.find("\r\n\r\n");
        if (end != std::string::npos) {
          c.in.resize(end + 2);
          respond(c);
          break;
        }
        if (c.in.size() > limits.max_request_bytes) {
          count([](MetricsServerCounters& s) { ++s.rejected; });
          answer(c, 431, "text/plain", "request header fields too large\n", {});
          break;
        }
      }
    }
    if (c.state == Conn::State::Writing) write_some(fd);
  }

  void write_some(int fd) {
    auto it = conns.find(fd);
    if (it == conns.end()) return;
    Conn& c = it->second;
    while (c.out_off < c.out.size()) {
      const char* p = c.out.data() + c.out_off;
      std::size_t left = c.out.size() - c.out_off;
      if (c.ssl) {
        int rc = SSL_write(c.ssl, p, static_cast<int>(std::min<std::size_t>(left, 1 << 20)));
        if (rc <= 0) {
          if (ssl_wants(c, rc)) return;
          return close_conn(fd);
        }
        c.out_off += static_cast<std::size_t>(rc);
      } else {
        ssize_t n = ::send(fd, p, left, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
          set_events(c, EPOLLOUT | EPOLLRDHUP);
          return;
        }
        if (n <= 0) return close_conn(fd);
        c.out_off += static_cast<std::size_t>(n);
      }
    }
    count([](MetricsServerCounters& s) { ++s.served; });
    close_conn(fd);
  }

  void answer(Conn& c, int status, std::string_view type, std::string body,
              const std::vector<std::pair<std::string, std::string>>& headers, bool head = false) {
    const char* reason = status == 200   ? "OK"
                         : status == 400 ? "Bad Request"
                         : status == 401 ? "Unauthorized"
                         : status == 404 ? "Not Found"
                         : status == 405 ? "Method Not Allowed"
                         : status == 429 ? "Too Many Requests"
                         : status == 431 ? "Request Header Fields Too Large"
                                         : "Service Unavailable";
    std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\nContent-Type: " + std::string(type) +
                      "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n";
    for (const auto& [k, v] : headers) out += k + ": " + v + "\r\n";
    out += "\r\n";
    if (!head) out += body;
    c.out = std::move(out);
    c.out_off = 0;
    c.state = Conn::State::Writing;
    c.deadline = SteadyClock::now() + limits.write_timeout;
    c.in.clear();
  }

  // Credentials of the request: ok, or why not (401 / 429).
  int authorize(const std::string& authorization) {
    if (!web.auth()) return 200;
    auto sp = authorization.find(' ');
    if (sp == std::string::npos) return 401;
    std::string scheme = lower(authorization.substr(0, sp));
    std::string cred = authorization.substr(sp + 1);
    while (!cred.empty() && cred.front() == ' ') cred.erase(0, 1);
    if (scheme == "bearer") {
      return !web.bearer_token.empty() && equal_constant_time(cred, web.bearer_token) ? 200 : 401;
    }
    if (scheme != "basic" || web.basic_auth_users.empty()) return 401;
    std::string pair = base64_decode(cred);
    auto colon = pair.find(':');
    if (colon == std::string::npos) return 401;
    std::string user = pair.substr(0, colon), pass = pair.substr(colon + 1);
    const std::string* hash = nullptr;
    for (const auto& [u, h] : web.basic_auth_users) {
      if (u == user) hash = &h;
    }
    if (hash == nullptr) return 401;
    std::string key = sha256(user + '\0' + pass + '\0' + *hash);
    if (auth_cache.count(key)) return 200;
    // bcrypt is slow on purpose and runs on this loop: unknown credentials
    // are checked at most auth_failures_per_second times a second, so a
    // password-guessing client cannot starve the probes.
    auto now = SteadyClock::now();
    if (now - auth_window >= std::chrono::seconds(1)) {
      auth_window = now;
      auth_checks = 0;
    }
    if (auth_checks >= limits.auth_failures_per_second) return 429;
    ++auth_checks;
    crypt_data data{};
    const char* got = ::crypt_rn(pass.c_str(), hash->c_str(), &data, sizeof data);
    if (got == nullptr || !equal_constant_time(got, *hash)) return 401;
    --auth_checks;  // a good password costs nothing against the budget
    if (auth_cache.size() >= 16) auth_cache.clear();
    auth_cache.insert(key);
    return 200;
  }

  void respond(Conn& c) {
    // "GET /path HTTP/1.1\r\nHeader: value\r\n..."
    std::istringstream in(c.in);
    std::string line;
    std::getline(in, line);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::istringstream rl(line);
    std::string method, target, version;
    rl >> method >> target >> version;
    if (method.empty() || target.empty() || version.rfind("HTTP/1.", 0) != 0) {
      count([](MetricsServerCounters& s) { ++s.rejected; });
      return answer(c, 400, "text/plain", "bad request\n", {});
    }
    std::string authorization;
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      if (lower(line.substr(0, colon)) == "authorization") {
        authorization = line.substr(colon + 1);
        while (!authorization.empty() && authorization.front() == ' ') authorization.erase(0, 1);
      }
    }
    std::string path = target.substr(0, target.find('?'));
    const bool head = method == "HEAD";
    if (method != "GET" && !head) return answer(c, 405, "text/plain", "only GET\n", {{"Allow", "GET, HEAD"}});
    if (path == "/healthz") {
      const bool ok = metrics->alive();
      return answer(c, ok ? 200 : 503, "text/plain", ok ? "ok\n" : "reactor heartbeat stale\n", {}, head);
    }
    if (path == "/readyz") {
      const bool ok = metrics->ready();
      return answer(c, ok ? 200 : 503, "text/plain",
                    ok ? "ready\n" : "not ready: events not attached or no observation yet\n", {}, head);
    }
    if (path == "/metrics") {
      int a = authorize(authorization);
      if (a != 200) {
        count([](MetricsServerCounters& s) { ++s.unauthorized; });
        std::vector<std::pair<std::string, std::string>> h;
        if (a == 401) h.emplace_back("WWW-Authenticate", "Basic realm=\"pressured\"");
        if (a == 429) h.emplace_back("Retry-After", "1");
        return answer(c, a, "text/plain", a == 401 ? "unauthorized\n" : "too many authentication attempts\n", h);
      }
      return answer(c, 200, "text/plain; version=0.0.4; charset=utf-8", metrics->render(), {}, head);
    }
    if (path == "/") return answer(c, 200, "text/plain", "pressured: /metrics /healthz /readyz\n", {}, head);
    return answer(c, 404, "text/plain", "not found\n", {}, head);
  }

  void expire() {
    auto now = SteadyClock::now();
    std::vector<int> late;
    for (const auto& [fd, c] : conns) {
      if (c.deadline <= now) late.push_back(fd);
    }
    for (int fd : late) {
      count([](MetricsServerCounters& s) { ++s.timed_out; });  // before the close, as in shed_one()
      close_conn(fd);
    }
  }

  void run() {
    std::vector<epoll_event> evs(64);
    auto next_expiry = SteadyClock::now() + std::chrono::milliseconds(100);
    while (true) {
      // Idle (no connection to time out): sleep until a scrape or stop
      // instead of waking ten times a second.
      const int timeout_ms = conns.empty() ? -1 : 100;
      int n = ::epoll_wait(epoll_fd.get(), evs.data(), static_cast<int>(evs.size()), timeout_ms);
      if (n < 0 && errno != EINTR) {
        spdlog::error("metrics server: epoll_wait: {}", std::strerror(errno));
        return;
      }
      for (int i = 0; i < n; ++i) {
        int fd = evs[static_cast<std::size_t>(i)].data.fd;
        if (fd == stop_fd.get()) return;
        if (fd == listen_fd.get()) {
          accept_all();
          continue;
        }
        on_ready(fd);
      }
      if (SteadyClock::now() >= next_expiry) {
        expire();
        next_expiry = SteadyClock::now() + std::chrono::milliseconds(100);
      }
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
    SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == nullptr) return Error{EIO, "TLS: " + openssl_error()};
    impl->ssl_ctx.reset(ctx);
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    if (SSL_CTX_use_certificate_chain_file(ctx, web.cert_file.c_str()) != 1) {
      return Error{EINVAL, "TLS certificate " + web.cert_file + ": " + openssl_error()};
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, web.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      return Error{EINVAL, "TLS key " + web.key_file + ": " + openssl_error()};
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
      return Error{EINVAL, "TLS key " + web.key_file + " does not match " + web.cert_file};
    }
  }

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
  int err = EADDRNOTAVAIL;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    kernel::Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd) {
      err = errno;
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd.get(), 512) == 0) {
      impl->listen_fd = std::move(fd);
      break;
    }
    err = errno;
  }
  ::freeaddrinfo(res);
  if (!impl->listen_fd) return Error::from_errno(err, what);

  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(impl->listen_fd.get(), reinterpret_cast<sockaddr*>(&ss), &len);
  uint16_t port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                           : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  impl->bound = ListenAddress{addr->host, port};

  impl->epoll_fd.reset(::epoll_create1(EPOLL_CLOEXEC));
  impl->stop_fd.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!impl->epoll_fd || !impl->stop_fd) return Error::from_errno(errno, "metrics server");
  for (int fd : {impl->listen_fd.get(), impl->stop_fd.get()}) {
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

std::string MetricsServer::scheme() const { return impl_->ssl_ctx ? "https" : "http"; }

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
  // Free the port now (the destructor would too): a restart can bind it.
  for (auto it = impl_->conns.begin(); it != impl_->conns.end(); it = impl_->conns.begin()) impl_->close_conn(it->first);
  impl_->listen_fd.reset();
}

}  // namespace pressured
