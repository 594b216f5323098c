// The plain metrics port's request parser: what parses, what waits for more
// bytes, and the status each malformed or oversized request is refused with.

#include "metrics/http_request.hpp"

#include <string>

#include <gtest/gtest.h>

namespace pressured::web {
namespace {

using State = ParseOutcome::State;

ParseOutcome parse(const std::string& s, std::size_t max = 8192) { return parse_request(s, max); }

TEST(HttpRequestParser, AProbeParses) {
  const std::string req = "GET /healthz HTTP/1.1\r\nHost: 10.0.0.1:9847\r\nUser-Agent: kube-probe/1.29\r\n\r\n";
  const ParseOutcome p = parse(req);
  ASSERT_EQ(p.state, State::Complete) << p.reason;
  EXPECT_EQ(p.request.method, "GET");
  EXPECT_EQ(p.request.target, "/healthz");
  EXPECT_EQ(p.request.path, "/healthz");
  EXPECT_EQ(p.request.minor_version, 1u);
  EXPECT_EQ(p.length, req.size());
}

TEST(HttpRequestParser, TheQueryIsNotPartOfThePath) {
  const std::string req = "HEAD /metrics?name[]=up HTTP/1.1\r\nHost: x\r\n\r\n";  // the views point into it
  const ParseOutcome p = parse(req);
  ASSERT_EQ(p.state, State::Complete) << p.reason;
  EXPECT_EQ(p.request.method, "HEAD");
  EXPECT_EQ(p.request.target, "/metrics?name[]=up");
  EXPECT_EQ(p.request.path, "/metrics");
}

TEST(HttpRequestParser, Http10NeedsNoHost) {
  const ParseOutcome p = parse("GET / HTTP/1.0\r\n\r\n");
  ASSERT_EQ(p.state, State::Complete) << p.reason;
  EXPECT_EQ(p.request.minor_version, 0u);
}

TEST(HttpRequestParser, OtherMethodsParseForTheRouterToRefuse) {
  const std::string req = "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
  const ParseOutcome p = parse(req);
  ASSERT_EQ(p.state, State::Complete) << p.reason;
  EXPECT_EQ(p.request.method, "POST");
}

TEST(HttpRequestParser, EveryPrefixOfARequestIsIncomplete) {
  const std::string req = "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: text/plain\r\n\r\n";
  for (std::size_t n = 0; n < req.size(); ++n) {
    EXPECT_EQ(parse(req.substr(0, n)).state, State::Incomplete) << n << ": " << req.substr(0, n);
  }
  EXPECT_EQ(parse(req).state, State::Complete);
}

TEST(HttpRequestParser, MalformedRequestsAreRefusedWith400) {
  const char* bad[] = {
      "HELLO\r\n\r\n",                                           // not a request line
      "GET  /healthz HTTP/1.1\r\nHost: x\r\n\r\n",               // two spaces
      "GET /healthz HTTP/1.1 \r\nHost: x\r\n\r\n",               // trailing space
      "GET healthz HTTP/1.1\r\nHost: x\r\n\r\n",                 // not origin-form
      "GET http://x/healthz HTTP/1.1\r\nHost: x\r\n\r\n",        // absolute-form
      "GET /a#b HTTP/1.1\r\nHost: x\r\n\r\n",                    // fragment
      "GET /a\x7f HTTP/1.1\r\nHost: x\r\n\r\n",                  // DEL in the target
      "G(T / HTTP/1.1\r\nHost: x\r\n\r\n",                       // not a token
      "GET / HTTP/1.1\nHost: x\n\n",                             // bare LF
      "GET / HTTP/1.1\r\nHost: x\n\r\n",                         // bare LF in the header
      "GET / HTTP/1.1\r\nHost: x\rY: z\r\n\r\n",                 // bare CR
      "GET / HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n",            // field without colon
      "GET / HTTP/1.1\r\nHost : x\r\n\r\n",                      // space before the colon
      "GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n",         // obs-fold
      "GET / HTTP/1.1\r\n: x\r\nHost: x\r\n\r\n",                // empty field name
      "GET / HTTP/1.1\r\nHost: x\r\nX: a\x01" "b\r\n\r\n",       // control character in a value
      "GET / HTTP/1.1\r\n\r\n",                                  // HTTP/1.1 without Host
      "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",            // two Hosts
      "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n", // bad length
      "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
      "GET / HTTP/1.x\r\nHost: x\r\n\r\n",
      "GET / http/1.1\r\nHost: x\r\n\r\n",
      "\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",                   // empty line first
  };
  for (const char* b : bad) {
    const ParseOutcome p = parse(b);
    EXPECT_EQ(p.state, State::Refused) << b;
    EXPECT_EQ(p.status, 400u) << b << ": " << p.reason;
    EXPECT_FALSE(p.reason.empty());
  }
}

TEST(HttpRequestParser, AMalformedLineIsRefusedBeforeTheRequestEnds) {
  // The request line is judged when it ends, not when the header does.
  EXPECT_EQ(parse("HELLO\r\n").status, 400u);
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nBad Name: x\r\n").status, 400u);
  EXPECT_EQ(parse("GET /\rX").status, 400u);
}

TEST(HttpRequestParser, OnlyHttp1IsSpoken) {
  EXPECT_EQ(parse("GET / HTTP/2.0\r\nHost: x\r\n\r\n").status, 505u);
  EXPECT_EQ(parse("GET / HTTP/0.9\r\n\r\n").status, 505u);
}

TEST(HttpRequestParser, ContentOnAGetIsRefusedWith413) {
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n").status, 413u);
  EXPECT_EQ(parse("HEAD / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n").status, 413u);
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n").state, State::Complete);
}

TEST(HttpRequestParser, TheBoundCoversTheWholeHeaderSection) {
  const std::string req = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  EXPECT_EQ(parse(req, req.size()).state, State::Complete) << "a request of exactly the bound";
  EXPECT_EQ(parse(req, req.size() - 1).status, 431u);
  // Bytes past a complete request (a pipelined second one) do not matter.
  EXPECT_EQ(parse(req + "GET / HTTP/1.1\r\n", req.size()).state, State::Complete);
  const std::string long_line = "GET /" + std::string(9000, 'a');
  EXPECT_EQ(parse(long_line).status, 414u);
  const std::string long_field = "GET / HTTP/1.1\r\nHost: x\r\nX: " + std::string(9000, 'a');
  EXPECT_EQ(parse(long_field).status, 431u);
  EXPECT_EQ(parse(long_field.substr(0, 8000)).state, State::Incomplete);
}

TEST(HttpRequestParser, AnswersCarryLengthDateAndClose) {
  Answer a{405, "only GET\n", {{"Allow", "GET, HEAD"}}};
  const std::string date = http_date(784111777);
  EXPECT_EQ(date, "Sun, 06 Nov 1994 08:49:37 GMT");
  const std::string get = format_answer(a, false, date);
  EXPECT_EQ(get,
            "HTTP/1.1 405 Method Not Allowed\r\nContent-Type: text/plain\r\nContent-Length: 9\r\n"
            "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\nConnection: close\r\nAllow: GET, HEAD\r\n\r\nonly GET\n");
  const std::string head = format_answer(a, true, date);
  EXPECT_EQ(head, get.substr(0, get.size() - a.body.size())) << "HEAD: the same head, no body";
}

}  // namespace
}  // namespace pressured::web
