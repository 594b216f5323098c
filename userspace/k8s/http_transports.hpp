#pragma once
// The two ways http_request sends a request (http_client.cpp chooses):
//  - direct: pressured's own HTTP/1.1 over a socket, and TLS 1.2 through
//    mbedTLS (small: about 0.6 MiB resident against libcurl's 6-8);
//  - libcurl, opened at its first use, for what the direct way cannot do: a
//    server that speaks only TLS 1.3 (mbedTLS 2.28 has no 1.3), or a proxy
//    set in the environment.

#include "k8s/http_client.hpp"
#include "k8s/http_wire.hpp"

namespace pressured::k8s::detail {

struct DirectOutcome {
  Result<HttpResponse> response{Error{}};
  /// The server refused the handshake for its protocol version: it wants a
  /// TLS newer than 1.2. Nothing was sent.
  bool needs_newer_tls = false;
};

DirectOutcome direct_request(const HttpRequest& request, const HttpUrl& url);
Result<HttpResponse> curl_request(const HttpRequest& request);

}  // namespace pressured::k8s::detail
