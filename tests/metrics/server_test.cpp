// The metrics port under abuse, on 127.0.0.1 only and bounded in time:
// slow-loris and thousands of idle connections must not starve /healthz;
// requests that never finish are cut; TLS and authentication follow the web
// configuration file. The port's policy holds whichever engine speaks HTTP
// behind it, so the abuse tests run against both: pressured's own (no web
// configuration) and the TLS module's (here with a bearer token over plain
// HTTP, so that the same probes reach it: /healthz needs no credentials).

#include <arpa/inet.h>
#include <crypt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>

#include "metrics/exposition.hpp"
#include "metrics/http_engine.hpp"
#include "pressured/metrics.hpp"

namespace pressured {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

MetricsOptions options() {
  MetricsOptions o;
  o.node = "node-a";
  return o;
}

int connect_loopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// A probe as the kubelet makes it: 2 s to connect and answer.
int probe(uint16_t port, const std::string& path = "/healthz") {
  httplib::Client cli("127.0.0.1", port);
  cli.set_connection_timeout(2, 0);
  cli.set_read_timeout(2, 0);
  cli.set_write_timeout(2, 0);
  auto res = cli.Get(path.c_str());
  return res ? res->status : 0;
}

std::string temp_dir() {
  char tmpl[] = "/tmp/pressured-web-XXXXXX";
  return ::mkdtemp(tmpl);
}

// Which engine serves the port: pressured's own, or the TLS module's.
enum class Engine { Own, Module };

WebConfig web_for(Engine e) {
  WebConfig w;
  if (e == Engine::Module) w.bearer_token = "0123456789abcdef0123";  // authentication: the module's engine
  return w;
}

std::string engine_name(const ::testing::TestParamInfo<Engine>& i) {
  return i.param == Engine::Own ? "Own" : "Module";
}

class MetricsServerAbuse : public ::testing::TestWithParam<Engine> {};
INSTANTIATE_TEST_SUITE_P(Engines, MetricsServerAbuse, ::testing::Values(Engine::Own, Engine::Module), engine_name);
class MetricsServerStatsExport : public ::testing::TestWithParam<Engine> {};
INSTANTIATE_TEST_SUITE_P(Engines, MetricsServerStatsExport, ::testing::Values(Engine::Own, Engine::Module),
                         engine_name);
class MetricsServerRoutes : public ::testing::TestWithParam<Engine> {};
INSTANTIATE_TEST_SUITE_P(Engines, MetricsServerRoutes, ::testing::Values(Engine::Own, Engine::Module), engine_name);

// One exchange as it is on the wire: `request` sent as given, everything
// read until the server closes (bounded: 5 s without a byte).
// Everything the server sends on `fd` until it closes (bounded: `quiet_s`
// seconds without a byte); closes `fd`.
std::string read_until_close(int fd, int quiet_s) {
  timeval tv{quiet_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) got.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return got;
}

std::string wire_exchange(uint16_t port, const std::string& request) {
  int fd = connect_loopback(port);
  if (fd < 0) return {};
  (void)::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  return read_until_close(fd, 5);
}

int status_of(const std::string& answer) {
  if (answer.rfind("HTTP/1.1 ", 0) != 0 || answer.size() < 12) return 0;
  return std::atoi(answer.substr(9, 3).c_str());
}

// A probe as `probe` makes it, on a raw socket, that also says whether its
// thread was taken off its core (an involuntary context switch) between
// creating the socket and sending the request: the one window in which a
// server shedding connections that have sent nothing cannot tell a probe from
// a churner. Counted by the kernel (getrusage), so the test needs no clock.
struct RawProbe {
  int status = 0;  // 0: no answer
  bool preempted = false;
};

RawProbe raw_probe(uint16_t port) {
  RawProbe r;
  rusage before{}, after{};
  ::getrusage(RUSAGE_THREAD, &before);
  const int fd = connect_loopback(port);
  const std::string request = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  const ssize_t sent = fd < 0 ? -1 : ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  ::getrusage(RUSAGE_THREAD, &after);
  r.preempted = after.ru_nivcsw != before.ru_nivcsw;
  if (fd < 0) return r;
  if (sent != static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return r;
  }
  r.status = status_of(read_until_close(fd, 2));  // the kubelet's probe timeout
  return r;
}

// A header's value in an answer ("" when absent); names compared as sent.
std::string header_of(const std::string& answer, const std::string& name) {
  const std::string key = "\r\n" + name + ": ";
  const std::size_t end = answer.find("\r\n\r\n");
  const std::size_t at = answer.find(key);
  if (at == std::string::npos || at > end) return {};
  const std::size_t from = at + key.size();
  return answer.substr(from, answer.find("\r\n", from) - from);
}

std::string body_of(const std::string& answer) {
  const std::size_t end = answer.find("\r\n\r\n");
  return end == std::string::npos ? std::string() : answer.substr(end + 4);
}

TEST_P(MetricsServerAbuse, SlowLorisAndIdleConnectionsCannotStarveHealthz) {
  // Room for the idle connections (both ends live in this process).
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  rlim_t want = std::min<rlim_t>(rl.rlim_max, 8192);
  rl.rlim_cur = std::max(rl.rlim_cur, want);
  ::setrlimit(RLIMIT_NOFILE, &rl);
  ::getrlimit(RLIMIT_NOFILE, &rl);
  const std::size_t idle_count = std::min<std::size_t>(3000, rl.rlim_cur > 200 ? (rl.rlim_cur - 100) / 2 : 0);
  ASSERT_GE(idle_count, 1000u) << "RLIMIT_NOFILE too small for the test: " << rl.rlim_cur;

  Metrics m(options());
  auto s = MetricsServer::start(m, "127.0.0.1:0", web_for(GetParam()));
  ASSERT_TRUE(s.ok()) << s.error().message;
  const uint16_t port = (*s)->port();

  // Two slow-loris clients: one header byte every 500 ms, for at most 8 s.
  std::atomic<bool> done{false};
  std::vector<std::thread> loris;
  for (int i = 0; i < 2; ++i) {
    loris.emplace_back([&] {
      const std::string req = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
      auto end = std::chrono::steady_clock::now() + 8s;
      int fd = connect_loopback(port);
      std::size_t i = 0;
      while (!done && std::chrono::steady_clock::now() < end) {
        if (fd < 0 || ::send(fd, &req[i % req.size()], 1, MSG_NOSIGNAL) != 1) {
          if (fd >= 0) ::close(fd);
          fd = connect_loopback(port);  // cut: come back, as an attacker would
        }
        ++i;
        std::this_thread::sleep_for(500ms);
      }
      if (fd >= 0) ::close(fd);
    });
  }
  // Thousands of idle connections that never send a byte.
  std::vector<int> idle;
  for (std::size_t i = 0; i < idle_count; ++i) {
    int fd = connect_loopback(port);
    if (fd >= 0) idle.push_back(fd);
  }
  EXPECT_GE(idle.size(), idle_count * 9 / 10);

  int ok = 0;
  const int probes = 10;
  for (int i = 0; i < probes; ++i) {
    if (probe(port) == 200) ++ok;
    std::this_thread::sleep_for(200ms);
  }
  done = true;
  for (auto& t : loris) t.join();
  for (int fd : idle) ::close(fd);
  EXPECT_EQ(ok, probes) << "every liveness probe must be answered";
  auto st = (*s)->stats();
  EXPECT_GT(st.shed, 0u) << "the idle connections were shed at the cap";
  EXPECT_LE(st.open, MetricsServerLimits{}.max_connections);
  EXPECT_EQ(probe(port), 200);
}

TEST_P(MetricsServerAbuse, IncompleteAndOversizedRequestsAreCut) {
  Metrics m(options());
  MetricsServerLimits lim;
  lim.header_timeout = 300ms;
  auto s = MetricsServer::start(m, "127.0.0.1:0", web_for(GetParam()), lim);
  ASSERT_TRUE(s.ok()) << s.error().message;
  const uint16_t port = (*s)->port();
  int fd = connect_loopback(port);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::send(fd, "GET /healthz HTTP/1.1\r\n", 23, MSG_NOSIGNAL), 23);
  timeval tv{3, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[64];
  // The receive timeout bounds the wait: recv() returns 0 only if the server
  // closed the connection, -1 (EAGAIN) if it kept it open past 3 s.
  EXPECT_EQ(::recv(fd, buf, sizeof buf, 0), 0) << "closed without an answer";
  ::close(fd);
  EXPECT_GE((*s)->stats().timed_out, 1u);

  fd = connect_loopback(port);
  ASSERT_GE(fd, 0);
  std::string big = "GET /healthz HTTP/1.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n";
  (void)::send(fd, big.data(), big.size(), MSG_NOSIGNAL);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string got;
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) got.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  EXPECT_EQ(got.rfind("HTTP/1.1 431", 0), 0u) << got;
  EXPECT_EQ(probe(port), 200);
}

std::string bcrypt(const std::string& password) {
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  if (::crypt_gensalt_rn("$2b$", 4, nullptr, 0, salt, sizeof salt) == nullptr) return {};
  crypt_data data{};
  const char* h = ::crypt_rn(password.c_str(), salt, &data, sizeof data);
  return h ? h : "";
}

TEST(MetricsServerAuth, BasicAuthWithBcryptAndBearerToken) {
  std::string d = temp_dir();
  std::string hash = bcrypt("s3cret");
  ASSERT_EQ(hash.size(), 60u);
  std::ofstream(d + "/token") << "0123456789abcdef0123\n";
  std::ofstream(d + "/web.yml") << "basic_auth_users:\n  prom: " << hash << "\nbearer_token_file: token\n";
  auto web = load_web_config(d + "/web.yml");
  ASSERT_TRUE(web.ok()) << web.error().message;
  EXPECT_TRUE(web->auth());
  EXPECT_FALSE(web->tls());
  Metrics m(options());
  auto s = MetricsServer::start(m, "127.0.0.1:0", *web);
  ASSERT_TRUE(s.ok()) << s.error().message;
  httplib::Client cli("127.0.0.1", (*s)->port());
  cli.set_read_timeout(5, 0);
  auto r = cli.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(r->get_header_value("WWW-Authenticate"), "Basic realm=\"pressured\"");
  EXPECT_EQ(probe((*s)->port(), "/healthz"), 200) << "probes need no credentials";
  cli.set_basic_auth("prom", "wrong");
  r = cli.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  cli.set_basic_auth("prom", "s3cret");
  r = cli.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("pressured_build_info"), std::string::npos);
  httplib::Client bearer("127.0.0.1", (*s)->port());
  bearer.set_bearer_token_auth("0123456789abcdef0123");
  r = bearer.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  bearer.set_bearer_token_auth("0123456789abcdef0124");
  r = bearer.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_GE((*s)->stats().unauthorized, 3u);
  fs::remove_all(d);
}

TEST(MetricsServerAuth, PasswordGuessingIsRateLimited) {
  std::string d = temp_dir();
  std::ofstream(d + "/web.yml") << "basic_auth_users:\n  prom: " << bcrypt("s3cret") << "\n";
  auto web = load_web_config(d + "/web.yml");
  ASSERT_TRUE(web.ok()) << web.error().message;
  Metrics m(options());
  MetricsServerLimits lim;
  lim.auth_failures_per_second = 2;
  auto s = MetricsServer::start(m, "127.0.0.1:0", *web, lim);
  ASSERT_TRUE(s.ok());
  int limited = 0;
  for (int i = 0; i < 6; ++i) {
    httplib::Client cli("127.0.0.1", (*s)->port());
    cli.set_basic_auth("prom", "guess" + std::to_string(i));
    auto r = cli.Get("/metrics");
    ASSERT_TRUE(r);
    if (r->status == 429) ++limited;
  }
  EXPECT_GE(limited, 3);
  fs::remove_all(d);
}

TEST(MetricsServerAuth, TlsWithTheConfiguredCertificate) {
  std::string d = temp_dir();
  std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 -keyout " + d +
                    "/key.pem -out " + d + "/cert.pem >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "openssl is needed to make a test certificate";
  std::ofstream(d + "/web.yml") << "tls_server_config:\n  cert_file: cert.pem\n  key_file: " << d << "/key.pem\n";
  auto web = load_web_config(d + "/web.yml");
  ASSERT_TRUE(web.ok()) << web.error().message;
  EXPECT_TRUE(web->tls());
  Metrics m(options());
  auto s = MetricsServer::start(m, "127.0.0.1:0", *web);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ((*s)->scheme(), "https");
  httplib::SSLClient cli("127.0.0.1", (*s)->port());
  cli.set_ca_cert_path((d + "/cert.pem").c_str());
  cli.enable_server_certificate_verification(true);
  cli.set_read_timeout(5, 0);
  auto r = cli.Get("/metrics");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(probe((*s)->port()), 0) << "plain HTTP is refused on a TLS port";
  httplib::SSLClient again("127.0.0.1", (*s)->port());
  again.enable_server_certificate_verification(false);
  auto h = again.Get("/healthz");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  fs::remove_all(d);
}

// A key that is not the certificate's, or a min_version below TLS 1.2, is
// refused at start with the file named, never served half-configured.
TEST(MetricsServerAuth, TlsMisconfigurationIsAnErrorAtStart) {
  std::string d = temp_dir();
  std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=a -keyout " + d + "/a.key -out " + d +
                    "/a.pem >/dev/null 2>&1 && openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=b -keyout " +
                    d + "/b.key -out " + d + "/b.pem >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "openssl is needed to make test certificates";
  std::ofstream(d + "/web.yml") << "tls_server_config:\n  cert_file: a.pem\n  key_file: b.key\n";
  auto web = load_web_config(d + "/web.yml");
  ASSERT_TRUE(web.ok()) << web.error().message;
  Metrics m(options());
  auto s = MetricsServer::start(m, "127.0.0.1:0", *web);
  ASSERT_FALSE(s.ok()) << "a certificate with another's key was accepted";
  EXPECT_NE(s.error().message.find("a.pem"), std::string::npos) << s.error().message;

  std::ofstream(d + "/web.yml") << "tls_server_config:\n  cert_file: a.pem\n  key_file: a.key\n  min_version: VersionTLS13\n";
  web = load_web_config(d + "/web.yml");
  ASSERT_TRUE(web.ok()) << web.error().message;
  EXPECT_EQ(web->min_version, "VersionTLS13");
  s = MetricsServer::start(m, "127.0.0.1:0", *web);
  ASSERT_TRUE(s.ok()) << s.error().message;
  httplib::SSLClient cli("127.0.0.1", (*s)->port());
  cli.enable_server_certificate_verification(false);
  cli.set_read_timeout(5, 0);
  auto r = cli.Get("/healthz");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  const std::string s_client = "openssl s_client -connect 127.0.0.1:" + std::to_string((*s)->port()) +
                               " </dev/null >/dev/null 2>&1 ";
  EXPECT_EQ(std::system((s_client + "-tls1_3").c_str()), 0) << "a TLS 1.3 handshake";
  EXPECT_NE(std::system((s_client + "-tls1_2").c_str()), 0) << "TLS 1.2 refused under min_version: VersionTLS13";

  std::ofstream(d + "/web.yml") << "tls_server_config:\n  cert_file: a.pem\n  key_file: a.key\n  min_version: VersionTLS10\n";
  web = load_web_config(d + "/web.yml");
  ASSERT_FALSE(web.ok());
  EXPECT_NE(web.error().message.find("min_version"), std::string::npos) << web.error().message;
  fs::remove_all(d);
}

TEST(MetricsServerAuth, WebConfigErrorsAreClear) {
  std::string d = temp_dir();
  auto write = [&](const std::string& text) {
    std::ofstream(d + "/web.yml") << text;
    return load_web_config(d + "/web.yml");
  };
  auto expect_error = [&](const std::string& text, const std::string& needle) {
    auto r = write(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
  };
  expect_error("basic_auth_users:\n  prom: plaintext\n", "bcrypt");
  expect_error("tls_server_config:\n  cert_file: /nonexistent.pem\n  key_file: /nonexistent.key\n", "nonexistent");
  expect_error("tls_server_config:\n  cert_file: a.pem\n", "both");
  expect_error("basic_auth_user:\n  prom: x\n", "unknown key");
  expect_error("basic_auth_users:\n  a: x\n  a: y\n", "duplicate");
  expect_error("tls_server_config:\n  client_ca_file: ca.pem\n", "not supported");
  expect_error("bearer_token_file: /nonexistent/token\n", "token");
  EXPECT_FALSE(load_web_config(d + "/missing.yml").ok());
  auto empty = write("");
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->auth());
  fs::remove_all(d);
}

std::string bcrypt_cost(const std::string& password, unsigned long cost) {
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  if (::crypt_gensalt_rn("$2b$", cost, nullptr, 0, salt, sizeof salt) == nullptr) return {};
  crypt_data data{};
  const char* h = ::crypt_rn(password.c_str(), salt, &data, sizeof data);
  return h ? h : "";
}

// Password guessing must never delay a probe. bcrypt at cost 13 takes about
// half a second of a core per check, and eight clients guess without pause;
// every probe must still be answered within the DaemonSet's probe timeout
// (2 s, deploy/base/daemonset.yaml): a liveness bound the kubelet applies, not a
// measured speed. The probes start only once a guess has been checked, so
// that the checks run while the probes do.
TEST(MetricsServerAuth, PasswordGuessingNeverDelaysProbes) {
  std::string d = temp_dir();
  const std::string hash = bcrypt_cost("s3cret", 13);
  ASSERT_EQ(hash.size(), 60u);
  std::ofstream(d + "/web.yml") << "basic_auth_users:\n  prom: " << hash << "\n";
  auto web = load_web_config(d + "/web.yml");
  ASSERT_TRUE(web.ok()) << web.error().message;
  Metrics m(options());
  auto s = MetricsServer::start(m, "127.0.0.1:0", *web);
  ASSERT_TRUE(s.ok()) << s.error().message;
  const uint16_t port = (*s)->port();

  std::atomic<bool> done{false};
  std::atomic<int> checked{0}, limited{0};
  std::vector<std::thread> guessers;
  const auto give_up = std::chrono::steady_clock::now() + 60s;  // bounds the test if probes hang
  for (int g = 0; g < 8; ++g) {
    guessers.emplace_back([&, g] {
      for (int i = 0; !done && std::chrono::steady_clock::now() < give_up; ++i) {
        httplib::Client cli("127.0.0.1", port);
        cli.set_read_timeout(30, 0);
        cli.set_basic_auth("prom", "guess-" + std::to_string(g) + "-" + std::to_string(i));
        auto r = cli.Get("/metrics");
        if (r && r->status == 401) ++checked;
        if (r && r->status == 429) ++limited;
      }
    });
  }
  // Bounded wait for the first finished check: the guessing is under way.
  for (int i = 0; i < 300 && checked == 0; ++i) std::this_thread::sleep_for(100ms);
  ASSERT_GT(checked.load(), 0) << "no password check finished";
  const int checked_before = checked;
  // Probes until three more checks have finished (bounded by the count).
  // The kubelet probes every few seconds; these come every 100 ms.
  int ok = 0, probes = 0;
  for (; probes < 300 && checked - checked_before < 3; ++probes) {
    if (probe(port, probes % 2 ? "/readyz" : "/healthz") / 100 != 0) ++ok;  // answered (readyz is 503 here)
    std::this_thread::sleep_for(100ms);
  }
  const int checked_during = checked - checked_before;
  done = true;
  (*s)->stop();  // the queued checks are cancelled: the guessers' last requests end now
  for (auto& t : guessers) t.join();
  EXPECT_EQ(ok, probes) << "every probe must be answered while passwords are checked";
  EXPECT_GE(checked_during, 3) << "checks ran while the probes did";
  EXPECT_GT(limited.load(), 0) << "the checks are bounded: the rest are refused at once";
  fs::remove_all(d);
}

// Connection churn (clients that connect in bursts, send nothing, and go)
// must not cost a probe its connection: over the cap the server sheds the
// oldest connections still sending their request, never one whose request
// has arrived, and a probe sends its request as soon as it connects. Each
// churner keeps its last burst open, so together they hold twice the cap
// and the server sheds all along. "As soon as it connects" holds only while
// the probing thread keeps its core: one taken off it between connect() and
// send() on a loaded machine looks like a churner's connection for that
// long, and may be shed. Such a probe is excused, and only such a one.
TEST_P(MetricsServerAbuse, ConnectionChurnDoesNotResetProbes) {
  Metrics m(options());
  auto s = MetricsServer::start(m, "127.0.0.1:0", web_for(GetParam()));
  ASSERT_TRUE(s.ok()) << s.error().message;
  const uint16_t port = (*s)->port();
  const std::size_t cap = MetricsServerLimits{}.max_connections;

  std::atomic<bool> done{false};
  std::vector<std::thread> churners;
  const auto give_up = std::chrono::steady_clock::now() + 60s;
  for (int t = 0; t < 2; ++t) {
    churners.emplace_back([&] {
      std::vector<int> last, burst;
      while (!done && std::chrono::steady_clock::now() < give_up) {
        for (std::size_t i = 0; i < cap; ++i) {
          int fd = connect_loopback(port);
          if (fd >= 0) burst.push_back(fd);
        }
        for (int fd : last) ::close(fd);
        last.swap(burst);
        burst.clear();
        std::this_thread::sleep_for(1ms);  // leave the probing thread a core
      }
      for (int fd : last) ::close(fd);
    });
  }
  // Bounded wait until the cap is reached and connections are being shed.
  for (int i = 0; i < 300 && (*s)->stats().shed == 0; ++i) std::this_thread::sleep_for(10ms);
  const uint64_t shed_before = (*s)->stats().shed;
  // Probes until 200 are done and another cap's worth of connections has been
  // shed meanwhile (bounded by the count, and by the churners' minute: a server
  // that answers no probe costs each one the 2 s timeout); 5 ms apart, so that
  // the churners get the cores too.
  int ok = 0, probes = 0, excused = 0;
  for (; probes < 3000 && std::chrono::steady_clock::now() < give_up &&
         (probes < 200 || (*s)->stats().shed - shed_before < cap);
       ++probes) {
    const RawProbe r = raw_probe(port);
    if (r.status == 200) {
      ++ok;
    } else if (r.preempted) {
      ++excused;
    }
    std::this_thread::sleep_for(5ms);
  }
  const uint64_t shed_during = (*s)->stats().shed - shed_before;
  done = true;
  for (auto& t : churners) t.join();
  RecordProperty("probes_excused", excused);
  EXPECT_EQ(ok + excused, probes) << "no probe is reset by other clients' connections unless its thread lost its "
                                     "core between connect() and send() (" << excused << " such of " << probes << ")";
  EXPECT_GT(ok, probes / 2) << "most probes kept their core and were answered: the test checked something";
  EXPECT_GE(shed_during, cap) << "the cap was under pressure while the probes ran";
}

// A probe that also says whether its SYN had to be sent again: a SYN the
// server's kernel dropped (its accept queue full) is retried only a second
// later, and twice is past the kubelet's timeout. Counted from TCP_INFO, so
// the test needs no clock. Returns the HTTP status (0: no answer).
struct ProbeOutcome {
  int status = 0;
  uint32_t syn_retransmits = 0;
};

ProbeOutcome probe_counting_syns(uint16_t port) {
  ProbeOutcome out;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return out;
  timeval tv{5, 0};  // a bound on a stuck test, not a measure
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    tcp_info ti{};
    socklen_t len = sizeof ti;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0) out.syn_retransmits = ti.tcpi_total_retrans;
    const std::string req = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
      std::string got;
      char buf[512];
      for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) got.append(buf, static_cast<std::size_t>(n));
      if (got.rfind("HTTP/1.1 ", 0) == 0 && got.size() >= 12) out.status = std::atoi(got.substr(9, 3).c_str());
    }
  }
  ::close(fd);
  return out;
}

// A flood of connections opened and closed at once (nothing sent) must not
// keep a probe waiting behind it: pressured takes the whole accept queue at
// every turn, so a probe that arrives amid the flood is answered at the next
// one, and its SYN finds room (a dropped SYN is sent again only a second
// later, past the kubelet's timeout).
//
// The flood keeps up to 512 connections (at most half the kernel's queue)
// waiting for pressured, and no more: how fast one thread drains a queue
// that many threads fill is a matter of who gets the cores, which the
// machine's load decides, not the server. A server that stops taking the
// queue (at its cap, say) stalls the flood with dead connections queued,
// and the probes queued behind them go unanswered.
TEST_P(MetricsServerAbuse, OpenAndCloseFloodDoesNotDropProbeSyns) {
  int somaxconn = 0;
  std::ifstream("/proc/sys/net/core/somaxconn") >> somaxconn;
  ASSERT_GE(somaxconn, 256) << "net.core.somaxconn caps every accept queue too low for the test";
  Metrics m(options());
  auto s = MetricsServer::start(m, "127.0.0.1:0", web_for(GetParam()));
  ASSERT_TRUE(s.ok()) << s.error().message;
  const uint16_t port = (*s)->port();
  const uint64_t window = std::min<uint64_t>(static_cast<uint64_t>(somaxconn) / 2, 512);

  std::atomic<bool> done{false};
  std::atomic<uint64_t> churned{0};
  std::vector<std::thread> churners;
  const auto give_up = std::chrono::steady_clock::now() + 120s;
  for (int t = 0; t < 4; ++t) {
    churners.emplace_back([&] {
      while (!done && std::chrono::steady_clock::now() < give_up) {
        if (churned.load() >= (*s)->stats().accepted + window) {
          std::this_thread::sleep_for(100us);
          continue;
        }
        int fd = connect_loopback(port);
        if (fd >= 0) {
          ::close(fd);
          ++churned;
        }
      }
    });
  }
  // Bounded wait until the flood runs.
  for (int i = 0; i < 300 && churned < window; ++i) std::this_thread::sleep_for(10ms);
  // Stops at the first probe left unanswered (each waits up to 5 s).
  const int probes = 300;
  int answered = 0, retried = 0;
  for (int i = 0; i < probes && answered == i; ++i) {
    ProbeOutcome o = probe_counting_syns(port);
    if (o.status == 200) ++answered;
    if (o.syn_retransmits > 0) ++retried;
    std::this_thread::sleep_for(2ms);
  }
  done = true;
  for (auto& t : churners) t.join();
  EXPECT_GE(churned.load(), window + static_cast<uint64_t>(probes)) << "the flood ran while the probes did";
  EXPECT_EQ(answered, probes) << "every probe is answered";
  EXPECT_EQ(retried, 0) << "probes whose SYN the kernel dropped (the accept queue was full) and sent again";
}

// A burst of connections opened at once (non-blocking connects from one
// thread: on loopback each handshake completes in the connect call, far
// faster than any server accepts) lands whole in the port's accept queue,
// so none of them (and no probe among them) has its SYN dropped and sent
// again a second later. Counted per socket from TCP_INFO.
TEST_P(MetricsServerAbuse, ABurstOfConnectionsCostsNoSynRetransmission) {
  const std::size_t burst = 1000;
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < burst + 256 && rl.rlim_max >= burst + 256) {
    rl.rlim_cur = burst + 256;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  ASSERT_GE(rl.rlim_cur, burst + 256) << "RLIMIT_NOFILE too small for the test: " << rl.rlim_cur;
  int somaxconn = 0;
  std::ifstream("/proc/sys/net/core/somaxconn") >> somaxconn;
  ASSERT_GE(static_cast<std::size_t>(somaxconn), burst) << "net.core.somaxconn caps every accept queue below the burst";

  Metrics m(options());
  auto s = MetricsServer::start(m, "127.0.0.1:0", web_for(GetParam()));
  ASSERT_TRUE(s.ok()) << s.error().message;
  const uint16_t port = (*s)->port();
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

  std::vector<int> fds;
  for (std::size_t i = 0; i < burst; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 && errno != EINPROGRESS) {
      ::close(fd);
      continue;
    }
    fds.push_back(fd);
  }
  const ProbeOutcome p = probe_counting_syns(port);
  // A SYN that was dropped is sent again after 1 s, then 3 s more: wait for
  // each connect to finish (bounded), then read its count.
  std::size_t retried = 0, unfinished = 0;
  for (int fd : fds) {
    pollfd pf{fd, POLLOUT, 0};
    if (::poll(&pf, 1, 5000) <= 0) ++unfinished;
    tcp_info ti{};
    socklen_t len = sizeof ti;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 && ti.tcpi_total_retrans > 0) ++retried;
    ::close(fd);
  }
  EXPECT_EQ(fds.size(), burst);
  EXPECT_EQ(retried, 0u) << "connections whose SYN the kernel dropped (the accept queue was full); "
                         << unfinished << " still connecting after 5 s";
  EXPECT_EQ(p.status, 200);
  EXPECT_EQ(p.syn_retransmits, 0u);
  EXPECT_EQ(probe(port), 200);
}

// The server's own stats, exported into the Metrics it serves (as the daemon
// does), read back from /metrics as a scraper reads them.
TEST_P(MetricsServerStatsExport, ConnectionsAnswersAndRejectionsAreServed) {
  Metrics m(options());
  auto s = MetricsServer::start(m, "127.0.0.1:0", web_for(GetParam()));
  ASSERT_TRUE(s) << s.error().message;
  const StatsExport handle = export_stats(m, (*s)->counters());
  const uint16_t port = (*s)->port();
  EXPECT_EQ(probe(port), 200);
  // Not HTTP: pressured's own engine answers 400 (an answer, and a
  // rejection: no request it could answer); libmicrohttpd closes without
  // an answer to a request line without a target (a rejection only).
  const std::string got = wire_exchange(port, "HELLO\r\n\r\n");
  if (GetParam() == Engine::Own) {
    EXPECT_EQ(status_of(got), 400) << got;
  } else {
    EXPECT_EQ(got, "") << "closed unanswered";
  }

  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(5, 0);
  if (GetParam() == Engine::Module) cli.set_bearer_token_auth("0123456789abcdef0123");
  auto res = cli.Get("/metrics");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  auto e = testing::parse_exposition(res->body);
  // One thread serves, so the earlier answers were counted before this
  // connection was taken up.
  EXPECT_EQ(e.value("pressured_metrics_server_connections_total"), 3.0);
  EXPECT_EQ(e.value("pressured_metrics_server_answers_total"), GetParam() == Engine::Own ? 2.0 : 1.0);
  EXPECT_EQ(e.value("pressured_metrics_server_rejected_requests_total"), 1.0);
  EXPECT_EQ(e.value("pressured_metrics_server_unauthorized_requests_total"), 0.0);
  EXPECT_EQ(e.value("pressured_metrics_server_shed_connections_total"), 0.0);
  EXPECT_EQ(e.value("pressured_metrics_server_timed_out_connections_total"), 0.0);
  EXPECT_GE(e.value("pressured_metrics_server_open_connections").value_or(0), 1.0) << "this scrape's own";
  EXPECT_EQ(e.types["pressured_metrics_server_open_connections"], "gauge");
  EXPECT_EQ((*s)->stats().rejected, 1u);
}

// What is answered, by either engine: the three paths and the index, 404
// elsewhere, 405 with Allow for any other method, HEAD as GET without its
// body, and every answer closes its connection.
TEST_P(MetricsServerRoutes, PathsMethodsAndHead) {
  Metrics m(options());
  auto s = MetricsServer::start(m, "127.0.0.1:0", web_for(GetParam()));
  ASSERT_TRUE(s) << s.error().message;
  const uint16_t port = (*s)->port();
  const std::string auth =
      GetParam() == Engine::Module ? "Authorization: Bearer 0123456789abcdef0123\r\n" : std::string();
  const auto get = [&](const std::string& method, const std::string& target, const std::string& extra = "") {
    return wire_exchange(port, method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth + extra + "\r\n");
  };
  std::string a = get("GET", "/healthz");
  EXPECT_EQ(status_of(a), 200) << a;
  EXPECT_EQ(body_of(a), "ok\n");
  EXPECT_EQ(header_of(a, "Connection"), "close") << a;
  a = get("GET", "/readyz");
  EXPECT_EQ(status_of(a), 503) << "no observation yet: " << a;
  a = get("GET", "/");
  EXPECT_EQ(status_of(a), 200) << a;
  a = get("GET", "/nothing-here");
  EXPECT_EQ(status_of(a), 404) << a;
  EXPECT_EQ(header_of(a, "Connection"), "close") << a;
  const std::string full = get("GET", "/metrics?ignored=1");
  ASSERT_EQ(status_of(full), 200) << full;
  EXPECT_NE(body_of(full).find("pressured_build_info"), std::string::npos);
  EXPECT_EQ(header_of(full, "Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(header_of(full, "Content-Length"), std::to_string(body_of(full).size()));
  const std::string head = get("HEAD", "/metrics");
  EXPECT_EQ(status_of(head), 200) << head;
  EXPECT_EQ(body_of(head), "") << "HEAD has no body";
  EXPECT_EQ(header_of(head, "Content-Type"), header_of(full, "Content-Type"));
  for (const std::string method : {"POST", "PUT", "DELETE", "OPTIONS", "PATCH", "BREW"}) {
    a = get(method, "/metrics", method == "POST" ? "Content-Length: 5\r\n\r\nhello" : "");
    EXPECT_EQ(status_of(a), 405) << method << ": " << a;
    EXPECT_EQ(header_of(a, "Allow"), "GET, HEAD") << method << ": " << a;
  }
  EXPECT_EQ(probe(port), 200);
}

// pressured's own engine, fed what a strict parser must refuse: each gets
// its status and the connection closes, counted as answered and rejected;
// nothing stops the port answering the next probe.
TEST(MetricsServerOwn, MalformedAndOversizedRequestsAreRefused) {
  Metrics m(options());
  MetricsServerLimits lim;
  lim.max_request_bytes = 1024;
  auto s = MetricsServer::start(m, "127.0.0.1:0", {}, lim);
  ASSERT_TRUE(s) << s.error().message;
  const uint16_t port = (*s)->port();
  const std::pair<std::string, int> cases[] = {
      {"HELLO\r\n\r\n", 400},
      {"GET /healthz HTTP/1.1\nHost: x\n\n", 400},                      // bare LF
      {"GET /healthz HTTP/1.1\r\n\r\n", 400},                           // no Host
      {"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},     // two Hosts
      {"GET /healthz HTTP/1.1\r\nHost : x\r\n\r\n", 400},               // space before the colon
      {"GET /healthz HTTP/1.1\r\nHost: x\r\nX: a\r\n folded\r\n\r\n", 400},
      {"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {std::string("GET /healthz HTTP/1.1\r\nHost: x\r\nX: \0\r\n\r\n", 40), 400},  // NUL in a value
      {"GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n", 505},
      {"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody", 413},
      {"GET /" + std::string(2000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n", 414},
      {"GET /healthz HTTP/1.1\r\nHost: x\r\nX: " + std::string(2000, 'a') + "\r\n\r\n", 431},
      {"GET /healthz HTTP/1.1\r\nHost: x\r\nX: " + std::string(20000, 'a') + "\r\n\r\n", 431},
  };
  for (const auto& [request, want] : cases) {
    const std::string got = wire_exchange(port, request);
    EXPECT_EQ(status_of(got), want) << request.substr(0, 80) << " -> " << got;
    EXPECT_EQ(header_of(got, "Connection"), "close") << got;
  }
  // Read to its close, so that its answer is counted when the stats are read.
  EXPECT_EQ(status_of(wire_exchange(port, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")), 200);
  const MetricsServerStats st = (*s)->stats();
  const auto n = static_cast<uint64_t>(std::size(cases));
  EXPECT_EQ(st.rejected, n) << "no request pressured could answer";
  EXPECT_EQ(st.served, n + 1) << "each refusal is an answer, and so is the probe";
  EXPECT_EQ(st.timed_out, 0u);
  EXPECT_EQ(st.shed, 0u);
}

// A request that arrives in pieces is answered once whole; one whose
// client closes before the end is counted rejected, never answered.
TEST(MetricsServerOwn, RequestsInPiecesAndHalfRequests) {
  Metrics m(options());
  auto s = MetricsServer::start(m, "127.0.0.1:0");
  ASSERT_TRUE(s) << s.error().message;
  const uint16_t port = (*s)->port();
  int fd = connect_loopback(port);
  ASSERT_GE(fd, 0);
  const std::string req = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  for (char c : req) {
    ASSERT_EQ(::send(fd, &c, 1, MSG_NOSIGNAL), 1);
    std::this_thread::sleep_for(2ms);
  }
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string got;
  char buf[512];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) got.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  EXPECT_EQ(status_of(got), 200) << got;
  EXPECT_EQ(body_of(got), "ok\n");

  fd = connect_loopback(port);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::send(fd, "GET /healthz HT", 15, MSG_NOSIGNAL), 15);
  ::shutdown(fd, SHUT_WR);  // the client gives up halfway
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  EXPECT_EQ(::recv(fd, buf, sizeof buf, 0), 0) << "closed without an answer";
  ::close(fd);
  EXPECT_EQ(status_of(wire_exchange(port, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")), 200);
  const MetricsServerStats st = (*s)->stats();
  EXPECT_EQ(st.rejected, 1u);
  EXPECT_EQ(st.served, 2u);
}

// An answer the client does not read is cut at the write deadline, counted
// as timed out, and the port answers the next probe. The client's receive
// buffer is made small and the answer twice the largest send buffer the
// kernel gives a socket (net.ipv4.tcp_wmem), so that it cannot all leave
// before the deadline (each pod's series are about 600 bytes).
TEST(MetricsServerOwn, AnAnswerNotReadInTimeIsCut) {
  long wmem_min = 0, wmem_default = 0, wmem_max = 0;
  std::ifstream("/proc/sys/net/ipv4/tcp_wmem") >> wmem_min >> wmem_default >> wmem_max;
  ASSERT_GT(wmem_max, 0) << "net.ipv4.tcp_wmem unreadable";
  const int count = static_cast<int>(2 * wmem_max / 600 + 1000);
  MetricsOptions o = options();
  o.top_pods = static_cast<uint32_t>(count);
  Metrics m(o);
  std::vector<PodMemorySample> pods;
  for (int i = 0; i < count; ++i) {
    PodMemorySample p;
    p.namespace_ = "tenant-" + std::to_string(i % 50);
    p.pod = "a-rather-long-pod-name-for-a-large-answer-" + std::to_string(i);
    p.uid = "00000000-0000-0000-0000-" + std::to_string(100000000000 + i);
    p.working_set_bytes = 1e6 + i;
    p.memory_request_bytes = 2e6;
    pods.push_back(p);
  }
  m.update_pods(pods);
  MetricsServerLimits lim;
  lim.write_timeout = 300ms;
  auto s = MetricsServer::start(m, "127.0.0.1:0", {}, lim);
  ASSERT_TRUE(s) << s.error().message;
  const uint16_t port = (*s)->port();
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  int small = 4096;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const std::string req = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  // Bounded wait for the deadline to pass and the cut to be counted.
  for (int i = 0; i < 300 && (*s)->stats().timed_out == 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ((*s)->stats().timed_out, 1u) << "the unread answer was cut";
  // What had left before the cut is there to read, then the end.
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::size_t got = 0;
  char buf[65536];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) got += static_cast<std::size_t>(n);
  ::close(fd);
  EXPECT_GT(got, 0u);
  EXPECT_LT(got, m.render().size()) << "not the whole answer (" << count << " pods)";
  EXPECT_EQ((*s)->stats().served, 0u);
  EXPECT_EQ(status_of(wire_exchange(port, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")), 200);
}

// The point of the own engine: a port without TLS or authentication maps
// neither GnuTLS nor libmicrohttpd (GnuTLS initialises itself and p11-kit
// when loaded). Checked in fresh processes (the death-test child re-executes
// this binary): the module, once loaded, stays for the process's life. The
// second child is the check's own control: with authentication the module
// and GnuTLS are mapped, and the check sees them.
bool mapped(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find(name) != std::string::npos) return true;
  }
  return false;
}

void serve_one_probe_and_exit(const WebConfig& web) {
  Metrics m(options());
  auto s = MetricsServer::start(m, "127.0.0.1:0", web);
  if (!s) {
    std::fprintf(stderr, "start: %s\n", s.error().message.c_str());
    std::_Exit(2);
  }
  const int status = probe((*s)->port());
  const bool tls = mapped("libgnutls") || mapped("libmicrohttpd") || mapped(web::kTlsModuleFile);
  (*s)->stop();
  std::fprintf(stderr, "probe %d, TLS libraries mapped: %s\n", status, tls ? "yes" : "no");
  std::_Exit(status != 200 ? 3 : tls ? 10 : 0);
}

TEST(MetricsServerFootprint, APortWithoutTlsOrAuthenticationMapsNoTlsLibrary) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ASSERT_FALSE(mapped("libgnutls")) << "the test binary itself links GnuTLS: the check would see nothing";
  EXPECT_EXIT(serve_one_probe_and_exit(WebConfig{}), ::testing::ExitedWithCode(0), "TLS libraries mapped: no");
  EXPECT_EXIT(serve_one_probe_and_exit(web_for(Engine::Module)), ::testing::ExitedWithCode(10),
              "TLS libraries mapped: yes");
}

std::string readelf_dynamic(const std::string& path) {
  FILE* p = ::popen(("readelf -d " + path + " 2>&1").c_str(), "r");
  if (p == nullptr) return {};
  std::string out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  ::pclose(p);
  return out;
}

// The daemon's binary names neither libmicrohttpd nor GnuTLS (nor libcrypt,
// whose bcrypt only authentication needs): they come with the module. The
// module's own entries are read the same way, so the check reads names.
TEST(MetricsServerFootprint, TheDaemonLinksNoTlsLibrary) {
  const std::string bin = std::string(PRESSURED_BINARY_DIR) + "/pressured";
  ASSERT_EQ(::access(bin.c_str(), X_OK), 0) << bin << " not built";
  const std::string daemon = readelf_dynamic(bin);
  ASSERT_NE(daemon.find("(NEEDED)"), std::string::npos) << "no dynamic section read: " << daemon;
  EXPECT_EQ(daemon.find("libmicrohttpd"), std::string::npos) << daemon;
  EXPECT_EQ(daemon.find("libgnutls"), std::string::npos) << daemon;
  EXPECT_EQ(daemon.find("libcrypt.so"), std::string::npos) << daemon;
  const std::string module = readelf_dynamic(std::string(PRESSURED_BINARY_DIR) + "/" + web::kTlsModuleFile);
  EXPECT_NE(module.find("libmicrohttpd"), std::string::npos) << module;
  EXPECT_NE(module.find("libgnutls"), std::string::npos) << module;
}

// A module that cannot be loaded is an error naming where it was looked
// for and why it failed there; the build's own loads.
TEST(MetricsServerFootprint, AModuleThatCannotBeLoadedIsNamed) {
  auto r = web::load_tls_module("/nonexistent/lib/pressured/libpressured_metrics_tls.so");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("/nonexistent/lib/pressured/libpressured_metrics_tls.so"), std::string::npos)
      << r.error().message;
  const std::string d = temp_dir();
  std::ofstream(d + "/libpressured_metrics_tls.so") << "not an ELF file\n";
  r = web::load_tls_module(d + "/libpressured_metrics_tls.so");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find(d + "/libpressured_metrics_tls.so"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("TLS"), std::string::npos) << r.error().message;
  fs::remove_all(d);
  auto ok = web::load_tls_module(std::string(PRESSURED_BINARY_DIR) + "/" + web::kTlsModuleFile);
  EXPECT_TRUE(ok.ok()) << ok.error().message;
}

}  // namespace
}  // namespace pressured
