// HTTP/1.1 on the wire (k8s/http_wire.hpp): the URL, the request's bytes and
// the incremental response reader, fed bytes in every split a socket can
// deliver them in.
#include "k8s/http_wire.hpp"

#include <zlib.h>

#include <gtest/gtest.h>

namespace pressured::k8s {
namespace {

TEST(HttpUrl, ReadsSchemeHostPortAndTarget) {
  auto u = parse_http_url("https://10.96.0.1:6443/api/v1/pods?watch=1#frag");
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_TRUE(u->tls);
  EXPECT_EQ(u->host, "10.96.0.1");
  EXPECT_TRUE(u->ip_literal);
  EXPECT_EQ(u->port, 6443);
  EXPECT_EQ(u->target, "/api/v1/pods?watch=1");
  EXPECT_EQ(u->authority(), "10.96.0.1:6443");

  u = parse_http_url("HTTP://kubelet.local");
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_FALSE(u->tls);
  EXPECT_FALSE(u->ip_literal);
  EXPECT_EQ(u->port, 80);
  EXPECT_EQ(u->target, "/");
  EXPECT_EQ(u->authority(), "kubelet.local");

  u = parse_http_url("https://[fd00::1]:10250/pods");
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_EQ(u->host, "fd00::1");
  EXPECT_TRUE(u->ip_literal);
  EXPECT_EQ(u->authority(), "[fd00::1]:10250");

  u = parse_http_url("https://h?x=1");
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_EQ(u->target, "/?x=1");
  EXPECT_EQ(u->port, 443);
}

TEST(HttpUrl, RefusesWhatItCannotReachSayingWhy) {
  auto expect_error = [](const char* url, const char* why) {
    auto u = parse_http_url(url);
    ASSERT_FALSE(u.ok()) << url;
    EXPECT_EQ(u.error().code, EINVAL);
    EXPECT_NE(u.error().message.find(why), std::string::npos) << url << ": " << u.error().message;
  };
  expect_error("10.0.0.1:443/pods", "no scheme");
  expect_error("ftp://h/", "not http or https");
  expect_error("https://user:pw@h/", "user information");
  expect_error("https://h:0/", "port '0'");
  expect_error("https://h:65536/", "port '65536'");
  expect_error("https://h:/", "port ''");
  expect_error("https://h:x/", "port 'x'");
  expect_error("https:///pods", "no host");
  expect_error("https://fd00::1/", "brackets");
  expect_error("https://[fd00::1/", "unclosed");
  expect_error("https://[nope]/", "not an IPv6 address");
  expect_error("https://h/a b", "space or control");
  expect_error("https://h\r\nX: y/", "character");
}

TEST(HttpRequestBytes, CarryHostConnectionHeadersAndALength) {
  auto u = parse_http_url("https://10.0.0.1:6443/api/v1/pods");
  ASSERT_TRUE(u.ok());
  auto r = format_http_request("PATCH", *u, {"Authorization: Bearer t0k", "Content-Type: application/json"}, "{}", false);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r,
            "PATCH /api/v1/pods HTTP/1.1\r\nHost: 10.0.0.1:6443\r\nConnection: close\r\n"
            "Authorization: Bearer t0k\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}");
  r = format_http_request("GET", *u, {}, "", true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r,
            "GET /api/v1/pods HTTP/1.1\r\nHost: 10.0.0.1:6443\r\nAccept-Encoding: gzip, deflate\r\n"
            "Connection: close\r\n\r\n");
  r = format_http_request("POST", *u, {}, "", false);
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->find("Content-Length: 0\r\n"), std::string::npos) << *r;
}

TEST(HttpRequestBytes, RefuseAHeaderThatWouldInjectAnother) {
  auto u = parse_http_url("http://h/");
  ASSERT_TRUE(u.ok());
  auto r = format_http_request("GET", *u, {"Authorization: Bearer a\r\nX-Evil: 1"}, "", false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, EINVAL);
  EXPECT_EQ(r.error().message.find("Bearer"), std::string::npos) << "the credential is not said: " << r.error().message;
  EXPECT_FALSE(format_http_request("GET", *u, {"no colon"}, "", false).ok());
  EXPECT_FALSE(format_http_request("get", *u, {}, "", false).ok());
  EXPECT_FALSE(format_http_request("G ET", *u, {}, "", false).ok());
}

TEST(NoProxy, CoversNamesTheirSubdomainsAndAddressesAsLibcurlDoes) {
  EXPECT_TRUE(no_proxy_covers("*", "10.96.0.1"));
  EXPECT_TRUE(no_proxy_covers("example.com, 10.96.0.1", "10.96.0.1"));
  EXPECT_TRUE(no_proxy_covers("svc.cluster.local", "kubernetes.default.SVC.cluster.local"));
  EXPECT_TRUE(no_proxy_covers(" .cluster.local ,x", "api.cluster.local"));
  EXPECT_FALSE(no_proxy_covers("cluster.local", "notcluster.local")) << "a suffix only at a label boundary";
  EXPECT_FALSE(no_proxy_covers("10.96.0.1", "10.96.0.10"));
  EXPECT_FALSE(no_proxy_covers("", "10.96.0.1"));
  EXPECT_FALSE(no_proxy_covers(",, .", "10.96.0.1"));
}

struct Read {
  bool ok = false;
  std::string error;
  HttpResponseReader::Step step = HttpResponseReader::Step::more;
  long status = 0;
  std::map<std::string, std::string> headers;
  std::string body;
};

// Feeds `wire` in pieces of `piece` bytes (0: all at once), then the end of
// the connection if `close` and the response is not done.
Read read_response(const std::string& wire, std::size_t piece, bool close = true, std::size_t stop_after = 0,
                   bool head = false) {
  Read out;
  HttpResponseReader reader(head);
  HttpResponseReader::Sink sink = [&](std::string_view d) {
    out.body.append(d);
    return stop_after == 0 || out.body.size() < stop_after;
  };
  std::size_t at = 0;
  const std::size_t step = piece == 0 ? std::max<std::size_t>(wire.size(), 1) : piece;
  while (at < wire.size() || (at == 0 && wire.empty())) {
    auto r = reader.feed(std::string_view(wire).substr(at, step), sink);
    at += step;
    if (!r) {
      out.error = r.error().message;
      EXPECT_EQ(r.error().code, EPROTO) << out.error;
      return out;
    }
    out.step = *r;
    if (*r != HttpResponseReader::Step::more) break;
    if (wire.empty()) break;
  }
  if (out.step == HttpResponseReader::Step::more && close) {
    auto r = reader.end_of_input();
    if (!r) {
      out.error = r.error().message;
      return out;
    }
    out.step = *r;
  }
  out.ok = true;
  out.status = reader.status();
  out.headers = reader.headers();
  return out;
}

std::string gzip(const std::string& data) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, data.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string chunked(const std::string& body, std::size_t size) {
  std::string out;
  for (std::size_t i = 0; i < body.size(); i += size) {
    std::string part = body.substr(i, size);
    char hex[32];
    std::snprintf(hex, sizeof hex, "%zx", part.size());
    out += std::string(hex) + (i == 0 ? ";ext=1" : "") + "\r\n" + part + "\r\n";
  }
  return out + "0\r\nX-Trailer: t\r\n\r\n";
}

// Every framing, fed whole and a byte at a time and in odd pieces, gives
// the same status, headers and body.
TEST(HttpResponseReader, ReadsEveryFramingInAnySplit) {
  const std::string body = std::string(5000, 'a') + "{\"kind\":\"PodList\"}" + std::string(3000, 'z');
  const std::string gz = gzip(body);
  struct Case {
    const char* name;
    std::string wire;
    bool close;
  } cases[] = {
      {"length", "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\nX-A:  v \r\n\r\n" + body,
       false},
      {"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: v\r\n\r\n" + chunked(body, 777), false},
      {"close", "HTTP/1.0 200 OK\r\nX-A: v\r\n\r\n" + body, true},
      {"gzip length", "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nX-A: v\r\nContent-Length: " +
                          std::to_string(gz.size()) + "\r\n\r\n" + gz,
       false},
      {"gzip chunked", "HTTP/1.1 200 OK\r\ncontent-encoding: GZIP\r\nx-a: v\r\nTransfer-Encoding: gzip, chunked\r\n\r\n" +
                           chunked(gz, 100),
       false},
      {"interim first", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nX-A: v\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\n\r\n" + body,
       false},
  };
  for (const auto& c : cases) {
    for (std::size_t piece : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{4096}}) {
      SCOPED_TRACE(std::string(c.name) + ", pieces of " + std::to_string(piece));
      Read r = read_response(c.wire, piece, c.close);
      ASSERT_TRUE(r.ok) << r.error;
      EXPECT_EQ(r.step, HttpResponseReader::Step::done);
      EXPECT_EQ(r.status, 200);
      EXPECT_EQ(r.headers["x-a"], "v");
      EXPECT_EQ(r.body.size(), body.size());
      EXPECT_TRUE(r.body == body);
    }
  }
}

TEST(HttpResponseReader, AnswersWithoutABodyEndAtTheirHead) {
  for (const char* wire : {"HTTP/1.1 204 No Content\r\n\r\n", "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
                           "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
                           "HTTP/1.1 204 No Content\r\nContent-Encoding: gzip\r\n\r\n",
                           "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 0\r\n\r\n"}) {
    Read r = read_response(wire, 0, /*close=*/false);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.step, HttpResponseReader::Step::done) << wire;
    EXPECT_TRUE(r.body.empty());
  }
  Read r = read_response("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", 0, false, 0, /*head=*/true);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.step, HttpResponseReader::Step::done);
}

TEST(HttpResponseReader, ASinkThatStopsEndsTheReading) {
  const std::string body(100000, 'x');
  Read r = read_response("HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + body, 4096, false, 10000);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.step, HttpResponseReader::Step::stopped);
  EXPECT_LT(r.body.size(), 20000u);
}

// A small compressed body that inflates to far more than its bound is handed out in
// bounded pieces, so the caller's body limit stops it early.
TEST(HttpResponseReader, ACompressionBombMeetsTheCallersBound) {
  const std::string gz = gzip(std::string(16u << 20, '\0'));
  ASSERT_LT(gz.size(), 32u * 1024);
  std::size_t largest_piece = 0, total = 0;
  HttpResponseReader reader;
  HttpResponseReader::Sink sink = [&](std::string_view d) {
    largest_piece = std::max(largest_piece, d.size());
    total += d.size();
    return total < (1u << 20);
  };
  auto r = reader.feed("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: " + std::to_string(gz.size()) +
                           "\r\n\r\n" + gz,
                       sink);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, HttpResponseReader::Step::stopped);
  EXPECT_LE(largest_piece, 16u * 1024);
  EXPECT_LT(total, 2u << 20);
}

TEST(HttpResponseReader, RefusesMalformedOrCutAnswersSayingWhat) {
  auto expect_error = [](const std::string& wire, const char* why) {
    Read r = read_response(wire, 0);
    ASSERT_FALSE(r.ok) << wire;
    EXPECT_NE(r.error.find(why), std::string::npos) << r.error;
  };
  expect_error("", "without answering");
  expect_error("HTTP/1.1 200 OK\r\nContent-Le", "inside the response head");
  expect_error("SSH-2.0-OpenSSH_9.2\r\n\r\n", "not an HTTP/1.x status line");
  expect_error("HTTP/2 200\r\n\r\n", "not an HTTP/1.x status line");
  expect_error("HTTP/1.1 2000 OK\r\n\r\n", "not an HTTP/1.x status line");
  expect_error("HTTP/1.1 200 OK\r\n folded: x\r\n\r\n", "malformed header");
  expect_error("HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", "malformed header");
  expect_error("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "bad Content-Length");
  expect_error("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", "bad Content-Length");
  expect_error("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", "bad Content-Length");
  expect_error("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", "before the end of the body");
  expect_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size");
  expect_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n0\r\n\r\n", "longer than its size");
  expect_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc", "CRLF");
  expect_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", "before the end of the body");
  expect_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + std::string(2000, '0'), "chunk-size line");
  expect_error("HTTP/1.1 200 OK\r\nContent-Encoding: br\r\n\r\n", "cannot be decoded");
  expect_error("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\n\r\nnope", "does not decode");
  expect_error("HTTP/1.1 101 Switching Protocols\r\n\r\n", "switched protocols");
  const std::string gz = gzip("hello");
  expect_error("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n" + gz.substr(0, gz.size() - 4), "compressed body ended");
}

TEST(HttpResponseReader, BoundsTheHeadAndTheTrailers) {
  HttpResponseReader::Limits small;
  small.max_head_bytes = 256;
  HttpResponseReader reader(false, small);
  HttpResponseReader::Sink sink = [](std::string_view) { return true; };
  std::string head = "HTTP/1.1 200 OK\r\n";
  for (int i = 0; i < 100; ++i) head += "X-Filler-" + std::to_string(i) + ": 0123456789\r\n";
  Result<HttpResponseReader::Step> r = HttpResponseReader::Step::more;
  for (std::size_t at = 0; at < head.size() && r.ok(); at += 10) r = reader.feed(head.substr(at, 10), sink);
  ASSERT_FALSE(r.ok()) << "a head that never ends was buffered whole";
  EXPECT_NE(r.error().message.find("response head larger than 256 bytes"), std::string::npos) << r.error().message;

  HttpResponseReader trailers(false, small);
  std::string wire = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n";
  for (int i = 0; i < 100; ++i) wire += "X-T: 0123456789abcdef\r\n";
  r = trailers.feed(wire, sink);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("trailers larger than 256 bytes"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace pressured::k8s
