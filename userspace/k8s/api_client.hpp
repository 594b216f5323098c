#pragma once
// A small Kubernetes API client over the HTTP client (k8s/http_client.hpp): how to reach the API server
// (in-cluster service account or kubeconfig) and one bounded HTTP request.
// Only what the reporter needs; see docs/kubernetes.md.

#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "k8s/http_client.hpp"
#include "pressured/clock.hpp"
#include "pressured/result.hpp"

namespace pressured::k8s {

struct ApiServer {
  std::string server;      // https://host:port (no trailing slash)
  std::string token;       // bearer token (static), or
  std::string token_file;  // re-read on every request (projected tokens rotate)
  std::string ca_file;
  std::string ca_data;     // PEM
  std::string client_cert_file, client_key_file;
  std::string client_cert_data, client_key_data;  // PEM
  bool insecure_skip_verify = false;
};

/// In-cluster config: KUBERNETES_SERVICE_HOST/PORT and the service account
/// files under `sa_dir` (token, ca.crt). An error when not in a cluster.
Result<ApiServer> in_cluster_config(const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

/// The current context of a kubeconfig file: server, certificate-authority
/// (-data), token / tokenFile, client-certificate(-data) / client-key(-data),
/// insecure-skip-tls-verify. Relative file paths are relative to the file.
Result<ApiServer> load_kubeconfig(const std::string& path);

/// One HTTP request to the API server with a hard timeout. Network errors
/// are Errors; HTTP errors are responses (the caller decides on 4xx/5xx).
class ApiClient {
 public:
  explicit ApiClient(ApiServer server, Duration timeout);
  Result<HttpResponse> request(const std::string& method, const std::string& path, const std::string& body = {},
                               const std::string& content_type = "application/json") const;
  /// A streaming GET (a watch): `on_data` gets the body as it arrives (and
  /// an empty chunk about once a second while idle) and returns false to end
  /// the transfer. Connecting (TCP + TLS) is bounded by
  /// the client's timeout, the whole transfer by `total_timeout`; the answer
  /// carries the status and, for non-2xx, the body. A transfer ended by
  /// `on_data` is not an error.
  Result<HttpResponse> stream(const std::string& path, Duration total_timeout,
                              const std::function<bool(std::string_view)>& on_data) const;
  /// A GET of a large answer (a LIST page): compressed when the server
  /// offers it, the decoded body bounded by `max_body_bytes` (an over-long
  /// body is an Error, see HttpRequest::max_body_bytes).
  Result<HttpResponse> get_large(const std::string& path, std::size_t max_body_bytes) const;
  const ApiServer& server() const { return server_; }

 private:
  HttpRequest make_request(const std::string& method, const std::string& path, const std::string& body,
                           const std::string& content_type, Duration total_timeout) const;
  ApiServer server_;
  Duration timeout_;
};

/// Retry-After (seconds form) in ms, or -1 when absent or unparsable.
long retry_after_ms(const HttpResponse& r);

}  // namespace pressured::k8s
