#pragma once
// pressured's one HTTP client: the API server client and the kubelet pod
// source both send their requests through it, so timeouts, TLS settings,
// response bounds and error wording are the same for both. It speaks
// HTTP/1.1 itself, with TLS 1.2 through mbedTLS, and hands to libcurl what
// that cannot do (http_transports.hpp).

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "pressured/clock.hpp"
#include "pressured/result.hpp"

namespace pressured::k8s {

struct HttpResponse {
  long status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names
  /// Sent through libcurl (a TLS 1.3-only server, a proxy), not directly.
  bool through_libcurl = false;
};

/// How to trust the server and who we are to it. Files and inline PEM may
/// both be given; inline PEM wins where both are set.
struct TlsOptions {
  std::string ca_file;
  std::string ca_data;  // PEM
  std::string client_cert_file, client_key_file;
  std::string client_cert_data, client_key_data;  // PEM
  bool insecure_skip_verify = false;
};

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  std::string body;                  // sent when not empty
  std::vector<std::string> headers;  // "Name: value"
  Duration connect_timeout{};        // TCP + TLS
  Duration total_timeout{};          // the whole transfer
  TlsOptions tls;
  /// A body longer than this ends the transfer with an error: a broken or
  /// hostile server cannot make the daemon buffer without bound.
  std::size_t max_body_bytes = 8u << 20;
  /// Offer gzip and deflate and decode them.
  bool accept_encoding = false;
  /// Streaming (a watch): when set, a 2xx body goes here as it arrives (and
  /// an empty chunk about once a second while idle) instead of into the
  /// response; returning false ends the transfer, which is then not an error.
  /// A non-2xx body still goes into the response.
  const std::function<bool(std::string_view)>* on_data = nullptr;
};

/// Sends one request. Network and TLS errors (EIO), timeouts (ETIMEDOUT) and
/// an over-long body (EFBIG) are Errors naming the method and URL; HTTP
/// errors are responses (the caller decides on 4xx/5xx).
Result<HttpResponse> http_request(const HttpRequest& request);

}  // namespace pressured::k8s
