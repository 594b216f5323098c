#pragma once
// HTTP/1.1 on the wire, without I/O: the URL the client is given, the request
// it writes, and an incremental reader of the response (status line, headers,
// a body framed by Content-Length, chunked coding or the connection's end,
// gzip/deflate decoding). The direct transport (http_direct.cpp) feeds it
// what it reads; the fuzzer and the tests feed it bytes.
//
// Every length a server controls is bounded: the head, a chunk-size line,
// the trailers; a decoded body is handed out in bounded pieces, so the
// caller's body limit holds against a compression bomb too.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pressured/result.hpp"

namespace pressured::k8s {

struct HttpUrl {
  bool tls = false;   // https
  std::string host;   // without brackets for an IPv6 literal
  bool ip_literal = false;
  uint16_t port = 0;
  std::string target;  // path and query, at least "/"
  /// host[:port] as the Host header carries it (brackets around IPv6).
  std::string authority() const;
};

/// http:// and https:// URLs only; no user information, no fragment kept.
/// Errors (EINVAL) say what is wrong with it (the caller names the URL).
Result<HttpUrl> parse_http_url(std::string_view url);

/// The request's bytes: the request line, Host, Connection: close, the
/// caller's headers, a Content-Length when there is a body (or the method
/// carries one), then the body. A header or target with CR or LF is refused
/// (EINVAL): a token read from a file must not inject a header.
Result<std::string> format_http_request(const std::string& method, const HttpUrl& url,
                                        const std::vector<std::string>& headers, std::string_view body,
                                        bool accept_encoding);

/// Whether a no_proxy list names `host`, as libcurl reads it: "*", or host
/// names (a name covers itself and its subdomains; a leading dot is allowed)
/// and addresses, separated by commas. Case does not matter.
bool no_proxy_covers(std::string_view list, std::string_view host);

class HttpResponseReader {
 public:
  struct Limits {
    std::size_t max_head_bytes = 64 * 1024;      // status line and headers, and the trailers
    std::size_t max_chunk_line_bytes = 1024;     // a chunk-size line with its extensions
  };
  /// Where body bytes go (decoded); returning false stops the reading.
  using Sink = std::function<bool(std::string_view)>;

  explicit HttpResponseReader(bool head_request = false) : HttpResponseReader(head_request, Limits{}) {}
  HttpResponseReader(bool head_request, Limits limits);
  ~HttpResponseReader();
  HttpResponseReader(const HttpResponseReader&) = delete;
  HttpResponseReader& operator=(const HttpResponseReader&) = delete;

  enum class Step { more, done, stopped };
  /// Consumes `data` (all of it, or up to the end of the response). A
  /// malformed response is an Error (EPROTO) saying what was wrong.
  Result<Step> feed(std::string_view data, const Sink& sink);
  /// The connection ended: done when the body ends with it (or had ended),
  /// an Error when the response was cut short.
  Result<Step> end_of_input();

  bool head_complete() const { return state_ > State::head; }
  long status() const { return status_; }
  /// Lower-case names; the last value of a repeated header.
  const std::map<std::string, std::string>& headers() const { return headers_; }

 private:
  enum class State { head, body_length, body_close, chunk_size, chunk_data, chunk_data_end, trailers, done };
  Result<void> parse_head();  // the head in pending_, which it empties
  Result<bool> emit(std::string_view raw, const Sink& sink);  // decode, hand out; false: stopped
  Result<Step> finish();

  const bool head_request_;
  const Limits limits_;
  State state_ = State::head;
  std::string pending_;  // an unfinished head, chunk-size line, CRLF or trailer
  long status_ = 0;
  std::map<std::string, std::string> headers_;
  uint64_t remaining_ = 0;  // of a Content-Length body or a chunk
  struct Inflater;
  std::unique_ptr<Inflater> inflater_;
};

}  // namespace pressured::k8s
