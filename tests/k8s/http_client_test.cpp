// The one HTTP client (k8s/http_client.hpp) that the API server client and
// the kubelet pod source share, against cpp-httplib on 127.0.0.1.
#include "k8s/http_client.hpp"

#include <httplib.h>

#include <openssl/ssl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include <gtest/gtest.h>

namespace pressured::k8s {
namespace {

using namespace std::chrono_literals;

// Serves `srv` (its routes set) on 127.0.0.1, any free port, until destroyed.
class Serving {
 public:
  explicit Serving(httplib::Server& srv) : srv_(srv), port(srv.bind_to_any_port("127.0.0.1")) {
    thread_ = std::thread([this] { srv_.listen_after_bind(); });
    for (int i = 0; i < 200 && !srv_.is_running(); ++i) std::this_thread::sleep_for(5ms);
  }
  ~Serving() {
    srv_.stop();
    thread_.join();
  }
  Serving(const Serving&) = delete;
  Serving& operator=(const Serving&) = delete;

 private:
  httplib::Server& srv_;
  std::thread thread_;

 public:
  const int port;
};

class LocalServer {
 public:
  LocalServer() {
    auto handler = [this](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard lk(mu);
        last = req;
      }
      if (req.path == "/slow") std::this_thread::sleep_for(1500ms);
      if (req.path == "/big") {
        res.set_content(std::string(64 * 1024, 'x'), "text/plain");
        return;
      }
      if (req.path == "/missing") {
        res.status = 404;
        res.set_content("not here", "text/plain");
        return;
      }
      res.set_header("X-Answer", "42");
      res.set_content(req.method + " " + req.body, "text/plain");
    };
    srv.Get(".*", handler);
    srv.Post(".*", handler);
    srv.Patch(".*", handler);
    serving.emplace(srv);
  }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(serving->port) + path;
  }
  httplib::Request seen() {
    std::lock_guard lk(mu);
    return last;
  }

  httplib::Server srv;
  std::mutex mu;
  httplib::Request last;
  std::optional<Serving> serving;  // last: stopped before what its handler uses
};

HttpRequest request(const std::string& url) {
  HttpRequest r;
  r.url = url;
  r.connect_timeout = 1s;
  r.total_timeout = 1s;
  return r;
}

TEST(HttpClient, SendsMethodHeadersAndBodyAndReturnsTheAnswer) {
  LocalServer server;
  auto req = request(server.url("/things"));
  req.method = "PATCH";
  req.body = "{\"a\":1}";
  req.headers = {"Content-Type: application/merge-patch+json", "Authorization: Bearer t0k"};
  auto r = http_request(req);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "PATCH {\"a\":1}");
  EXPECT_EQ(r->headers["x-answer"], "42");  // names lower-cased, values trimmed
  auto seen = server.seen();
  EXPECT_EQ(seen.get_header_value("Authorization"), "Bearer t0k");
  EXPECT_EQ(seen.get_header_value("Content-Type"), "application/merge-patch+json");
  EXPECT_FALSE(seen.has_header("Accept-Encoding"));
}

TEST(HttpClient, HttpErrorsAreAnswersNotErrors) {
  LocalServer server;
  auto r = http_request(request(server.url("/missing")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(r->body, "not here");
}

TEST(HttpClient, OffersCompressionOnlyWhenAsked) {
  LocalServer server;
  auto req = request(server.url("/pods"));
  req.accept_encoding = true;
  ASSERT_TRUE(http_request(req).ok());
  EXPECT_TRUE(server.seen().has_header("Accept-Encoding"));
}

// cpp-httplib gzips a text answer for a client that offers gzip, and sends a
// content provider's answer chunked: the client undoes both.
TEST(HttpClient, DecodesAGzippedChunkedAnswer) {
  const std::string body = [] {
    std::string b;
    for (int i = 0; i < 5000; ++i) b += "pod-" + std::to_string(i) + " ";
    return b;
  }();
  httplib::Server srv;
  srv.Get("/chunked", [&](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("text/plain", [&](std::size_t, httplib::DataSink& sink) {
      for (std::size_t at = 0; at < body.size(); at += 1000) {
        sink.write(body.data() + at, std::min<std::size_t>(1000, body.size() - at));
      }
      sink.done();
      return true;
    });
  });
  Serving serving(srv);
  auto req = request("http://127.0.0.1:" + std::to_string(serving.port) + "/chunked");
  req.accept_encoding = true;
  auto r = http_request(req);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->headers["content-encoding"], "gzip") << "the server did not compress: the test proves nothing";
  EXPECT_EQ(r->headers["transfer-encoding"], "chunked");
  EXPECT_TRUE(r->body == body) << r->body.size() << " bytes";
  EXPECT_FALSE(r->through_libcurl);
}

TEST(HttpClient, RefusesABadUrlOrHeaderBeforeConnecting) {
  auto r = http_request(request("ftp://127.0.0.1/"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, EINVAL);
  EXPECT_EQ(r.error().message, "GET ftp://127.0.0.1/: scheme 'ftp' is not http or https");
  auto req = request("http://127.0.0.1:1/");
  req.headers = {"Authorization: Bearer x\r\nX-Injected: 1"};
  r = http_request(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, EINVAL) << r.error().message;
}

// A proxy in the environment is libcurl's to use: the request goes through
// libcurl, and so through the proxy (here nothing listens there, so it
// fails), unless no_proxy names the host.
TEST(HttpClient, AProxyInTheEnvironmentSendsTheRequestThroughLibcurl) {
  LocalServer server;
  ::setenv("http_proxy", "http://127.0.0.1:1", 1);
  ::unsetenv("no_proxy");
  ::unsetenv("NO_PROXY");
  auto r = http_request(request(server.url("/x")));
  EXPECT_FALSE(r.ok()) << "the request did not go through the proxy";
  ::setenv("no_proxy", "example.com, 127.0.0.1", 1);
  auto direct = http_request(request(server.url("/x")));
  ::unsetenv("http_proxy");
  ::unsetenv("no_proxy");
  ASSERT_TRUE(direct.ok()) << direct.error().message;
  EXPECT_FALSE(direct->through_libcurl);
}

TEST(HttpClient, BoundsTheBody) {
  LocalServer server;
  auto req = request(server.url("/big"));
  req.max_body_bytes = 1024;
  auto r = http_request(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, EFBIG);
  EXPECT_NE(r.error().message.find(server.url("/big") + ": response body larger than 1024 bytes"), std::string::npos)
      << r.error().message;
  EXPECT_EQ(r.error().message.rfind("GET ", 0), 0u) << r.error().message;
  req.max_body_bytes = 64 * 1024;
  r = http_request(req);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->body.size(), 64u * 1024);
}

TEST(HttpClient, TimeoutIsETIMEDOUTAndUnreachableIsEIO) {
  LocalServer server;
  auto req = request(server.url("/slow"));
  req.total_timeout = 200ms;
  auto r = http_request(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ETIMEDOUT) << r.error().message;
  EXPECT_EQ(r.error().message.rfind("GET ", 0), 0u) << r.error().message;
  EXPECT_NE(r.error().message.find(server.url("/slow") + ": "), std::string::npos) << r.error().message;

  r = http_request(request("http://127.0.0.1:1/"));  // nothing listens
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, EIO);
  EXPECT_NE(r.error().message.find("GET http://127.0.0.1:1/: "), std::string::npos) << r.error().message;
}

TEST(HttpClient, StreamEndedByTheCallerIsNotAnError) {
  LocalServer server;
  std::string got;
  int calls = 0;
  std::function<bool(std::string_view)> on_data = [&](std::string_view chunk) {
    got.append(chunk);
    ++calls;
    return got.size() < 8 * 1024;  // enough: end the transfer
  };
  auto req = request(server.url("/big"));
  req.on_data = &on_data;
  auto r = http_request(req);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_GE(got.size(), 8u * 1024);
  EXPECT_LT(got.size(), 64u * 1024);
  EXPECT_TRUE(r->body.empty()) << "a 2xx stream goes to on_data only";
  EXPECT_GE(calls, 1);

  // A non-2xx answer's body is the response, for the caller's error message.
  got.clear();
  req.url = server.url("/missing");
  r = http_request(req);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(r->body, "not here");
}

// TLS: certificates made for the test by openssl(1), a CA and what it signs.
class HttpsClient : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/pressured-https-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    const std::string d = dir_;
    auto leaf = [&](const std::string& name, const std::string& ca, const std::string& san, const std::string& key) {
      std::ofstream(d + "/" + name + ".ext") << "subjectAltName=" << san << "\n";
      return "openssl req -newkey " + key + " -nodes -subj /CN=" + name + " -keyout " + d + "/" + name + ".key -out " +
             d + "/" + name + ".csr && openssl x509 -req -in " + d + "/" + name + ".csr -CA " + d + "/" + ca +
             ".crt -CAkey " + d + "/" + ca + ".key -CAcreateserial -days 1 -extfile " + d + "/" + name + ".ext -out " +
             d + "/" + name + ".crt";
    };
    const std::string ec = "ec -pkeyopt ec_paramgen_curve:P-256";
    std::string cmd = "set -e; exec >/dev/null 2>&1; ";
    for (const char* ca : {"ca", "otherca"}) {
      cmd += "openssl req -x509 -newkey " + ec + " -nodes -days 1 -subj /CN=" + ca + " -keyout " + d + "/" + ca +
             ".key -out " + d + "/" + ca + ".crt; ";
    }
    cmd += leaf("server", "ca", "IP:127.0.0.1,DNS:localhost", "rsa:2048") + "; ";
    cmd += leaf("elsewhere", "ca", "IP:127.0.0.2,DNS:elsewhere.test", ec) + "; ";
    cmd += leaf("client", "ca", "DNS:pressured", ec);
    ASSERT_EQ(std::system(cmd.c_str()), 0) << "openssl is needed to make the test certificates (scripts/setup)";
  }
  static void TearDownTestSuite() { std::system(("rm -rf " + dir_).c_str()); }

  static std::string path(const std::string& name) { return dir_ + "/" + name; }
  static std::string pem(const std::string& name) {
    std::ifstream f(path(name));
    return std::string(std::istreambuf_iterator<char>(f), {});
  }

  // An HTTPS server on 127.0.0.1 with the named certificate; with a client
  // CA it asks for and verifies a client certificate.
  struct Server {
    Server(const std::string& cert, const char* client_ca = nullptr, bool tls13_only = false)
        : srv(path(cert + ".crt").c_str(), path(cert + ".key").c_str(), client_ca) {
      if (tls13_only) SSL_CTX_set_min_proto_version(srv.ssl_context(), TLS1_3_VERSION);
      srv.Get(".*", [](const httplib::Request& req, httplib::Response& res) {
        res.set_content("hello " + req.path, "text/plain");
      });
      serving.emplace(srv);
    }
    std::string url(const std::string& p, const char* host = "127.0.0.1") const {
      return std::string("https://") + host + ":" + std::to_string(serving->port) + p;
    }
    httplib::SSLServer srv;
    std::optional<Serving> serving;
  };

  static inline std::string dir_;
};

TEST_F(HttpsClient, VerifiesTheServerByItsCaAndItsAddressOrName) {
  Server server("server");
  ASSERT_TRUE(server.srv.is_valid());
  auto req = request(server.url("/by-file"));
  req.tls.ca_file = path("ca.crt");
  auto r = http_request(req);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello /by-file");
  EXPECT_FALSE(r->through_libcurl) << "TLS 1.2 is the direct transport's";

  req = request(server.url("/by-data", "localhost"));  // the name, from the DNS entry
  req.tls.ca_data = pem("ca.crt");
  req.tls.ca_file = "/nonexistent";  // inline PEM wins
  r = http_request(req);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->body, "hello /by-data");
}

TEST_F(HttpsClient, AnUntrustedServerIsRefusedNamingTheCa) {
  Server server("server");
  auto req = request(server.url("/"));
  req.tls.ca_file = path("otherca.crt");
  auto r = http_request(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, EIO);
  EXPECT_EQ(r.error().message.rfind("GET " + server.url("/") + ": ", 0), 0u) << r.error().message;
  EXPECT_NE(r.error().message.find("not trusted by " + path("otherca.crt") + ": wrong CA?"), std::string::npos)
      << r.error().message;

  req.tls.ca_file = path("missing.crt");
  r = http_request(req);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("CA " + path("missing.crt")), std::string::npos) << r.error().message;
}

TEST_F(HttpsClient, ACertificateForAnotherAddressOrNameIsRefused) {
  Server server("elsewhere");  // signed by the trusted CA, for 127.0.0.2 and elsewhere.test
  auto req = request(server.url("/"));
  req.tls.ca_file = path("ca.crt");
  auto r = http_request(req);
  ASSERT_FALSE(r.ok()) << "a certificate for 127.0.0.2 was accepted for 127.0.0.1";
  EXPECT_NE(r.error().message.find("does not name 127.0.0.1 among its IP addresses"), std::string::npos)
      << r.error().message;
  req.url = server.url("/", "localhost");
  r = http_request(req);
  ASSERT_FALSE(r.ok()) << "a certificate for elsewhere.test was accepted for localhost";
  EXPECT_NE(r.error().message.find("does not name localhost"), std::string::npos) << r.error().message;

  req.tls.insecure_skip_verify = true;  // what the operator asked for
  r = http_request(req);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, 200);
}

TEST_F(HttpsClient, PresentsTheClientCertificateFromFilesOrData) {
  Server server("server", path("ca.crt").c_str());
  auto req = request(server.url("/"));
  req.tls.ca_file = path("ca.crt");
  EXPECT_FALSE(http_request(req).ok()) << "the server let in a client without a certificate: the test proves nothing";
  req.tls.client_cert_file = path("client.crt");
  req.tls.client_key_file = path("client.key");
  auto r = http_request(req);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, 200);
  req.tls = TlsOptions{};
  req.tls.ca_data = pem("ca.crt");
  req.tls.client_cert_data = pem("client.crt");
  req.tls.client_key_data = pem("client.key");
  r = http_request(req);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, 200);

  req.tls.client_key_data = pem("server.key");  // not the certificate's
  r = http_request(req);
  ASSERT_FALSE(r.ok());
  req.tls.client_key_data.clear();
  r = http_request(req);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("needs its key"), std::string::npos) << r.error().message;
}

// mbedTLS 2.28 speaks TLS 1.2 at most: a server that wants 1.3 is reached
// through libcurl, and remembered, so its next request goes there directly.
TEST_F(HttpsClient, AServerThatSpeaksOnlyTls13IsReachedThroughLibcurl) {
  Server server("server", nullptr, /*tls13_only=*/true);
  ASSERT_TRUE(server.srv.is_valid());
  for (int i = 0; i < 2; ++i) {
    auto req = request(server.url("/new"));
    req.tls.ca_file = path("ca.crt");
    auto r = http_request(req);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->body, "hello /new");
    EXPECT_TRUE(r->through_libcurl);
  }
}

}  // namespace
}  // namespace pressured::k8s

namespace pressured::k8s {
namespace {

// The daemon opens libcurl at its first HTTP request (dlopen): linked, its
// closure (~4 MiB resident) would be mapped at exec on every node and sit on
// top of the BPF load's peak. The binary must not name it.
TEST(HttpClient, TheDaemonOpensLibcurlOnlyWhenItFirstRequests) {
  const std::string bin = std::string(PRESSURED_BINARY_DIR) + "/pressured";
  ASSERT_EQ(::access(bin.c_str(), X_OK), 0) << bin << " not built";
  FILE* p = ::popen(("readelf -d " + bin + " 2>&1").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  ASSERT_EQ(::pclose(p), 0) << out;
  ASSERT_NE(out.find("(NEEDED)"), std::string::npos) << "no dynamic section read: " << out;
  EXPECT_EQ(out.find("libcurl"), std::string::npos) << out;
}

}  // namespace
}  // namespace pressured::k8s
