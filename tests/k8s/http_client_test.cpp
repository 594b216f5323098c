// The one HTTP client (k8s/http_client.hpp) that the API server client and
// the kubelet pod source share, against cpp-httplib on 127.0.0.1.
#include "k8s/http_client.hpp"

#include <httplib.h>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

namespace pressured::k8s {
namespace {

using namespace std::chrono_literals;

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
    port = srv.bind_to_any_port("127.0.0.1");
    thread = std::thread([this] { srv.listen_after_bind(); });
    for (int i = 0; i < 200 && !srv.is_running(); ++i) std::this_thread::sleep_for(5ms);
  }
  ~LocalServer() {
    srv.stop();
    thread.join();
  }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port) + path; }
  httplib::Request seen() {
    std::lock_guard lk(mu);
    return last;
  }

  httplib::Server srv;
  int port = 0;
  std::thread thread;
  std::mutex mu;
  httplib::Request last;
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
