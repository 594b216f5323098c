// Which transport sends a request: the direct one (http_direct.cpp), unless
// the environment names a proxy for the URL or the server is known to speak
// only TLS 1.3; those go through libcurl (http_curl.cpp), which is then
// loaded. A server found to want TLS 1.3 is remembered for the life of the
// process and said once.

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <mutex>
#include <set>

#include "k8s/http_transports.hpp"

namespace pressured::k8s {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

// Whether libcurl would send this URL through a proxy from the environment
// (http_proxy is lower-case only, as in libcurl: HTTP_PROXY can be set by a
// CGI request's Proxy header).
bool proxied(const HttpUrl& url) {
  std::string proxy = url.tls ? env("https_proxy") : env("http_proxy");
  if (proxy.empty() && url.tls) proxy = env("HTTPS_PROXY");
  if (proxy.empty()) proxy = env("all_proxy");
  if (proxy.empty()) proxy = env("ALL_PROXY");
  if (proxy.empty()) return false;
  std::string no_proxy = env("no_proxy");
  if (no_proxy.empty()) no_proxy = env("NO_PROXY");
  return !no_proxy_covers(no_proxy, url.host);
}

std::mutex newer_tls_mu;
std::set<std::string>& newer_tls_servers() {
  static std::set<std::string> s;
  return s;
}

bool wants_newer_tls(const std::string& server) {
  std::lock_guard lk(newer_tls_mu);
  return newer_tls_servers().count(server) != 0;
}

}  // namespace

Result<HttpResponse> http_request(const HttpRequest& req) {
  auto url = parse_http_url(req.url);
  if (!url) return Error{EINVAL, req.method + " " + req.url + ": " + url.error().message};
  const std::string server = url->authority();
  if (proxied(*url) || (url->tls && wants_newer_tls(server))) return detail::curl_request(req);
  auto direct = detail::direct_request(req, *url);
  if (!direct.needs_newer_tls) return std::move(direct.response);
  bool first = false;
  {
    std::lock_guard lk(newer_tls_mu);
    first = newer_tls_servers().insert(server).second;
  }
  if (first) {
    spdlog::warn("k8s: {} refuses TLS 1.2 ({}); its requests go through libcurl (TLS 1.3), which loads about 6 MiB more",
                 server, direct.response.ok() ? "" : direct.response.error().message);
  }
  return detail::curl_request(req);
}

}  // namespace pressured::k8s
