#include "k8s/api_client.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "common/text.hpp"

namespace pressured::k8s {

namespace {

std::string slurp(const std::string& path, std::size_t limit = 1 << 20) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::string s(limit, '\0');
  in.read(s.data(), static_cast<std::streamsize>(limit));
  s.resize(static_cast<std::size_t>(in.gcount()));
  return s;
}

std::string b64decode(const std::string& in) {
  static const std::string chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  int val = 0, bits = -8;
  for (char c : in) {
    auto p = chars.find(c);
    if (p == std::string::npos) continue;  // '=', newlines
    val = (val << 6) + static_cast<int>(p);
    bits += 6;
    if (bits >= 0) {
      out.push_back(static_cast<char>((val >> bits) & 0xFF));
      bits -= 8;
    }
  }
  return out;
}

}  // namespace

Result<ApiServer> in_cluster_config(const std::string& sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0') return Error{ENOENT, "KUBERNETES_SERVICE_HOST is not set: not running in a cluster"};
  ApiServer s;
  std::string h = host;
  if (h.find(':') != std::string::npos) h = "[" + h + "]";  // IPv6
  s.server = "https://" + h + ":" + (port != nullptr && *port ? port : "443");
  s.token_file = sa_dir + "/token";
  s.ca_file = sa_dir + "/ca.crt";
  if (slurp(s.token_file).empty()) return Error{ENOENT, "service account token " + s.token_file + " is missing or empty"};
  return s;
}

Result<ApiServer> load_kubeconfig(const std::string& path) {
  try {
    YAML::Node root = YAML::LoadFile(path);
    std::string dir = std::filesystem::path(path).parent_path().string();
    auto rel = [&](const std::string& p) { return p.empty() || p[0] == '/' || dir.empty() ? p : dir + "/" + p; };
    std::string ctx_name = root["current-context"] ? root["current-context"].as<std::string>() : "";
    YAML::Node ctx;
    for (const auto& c : root["contexts"]) {
      if (ctx_name.empty() || c["name"].as<std::string>() == ctx_name) {
        ctx = c["context"];
        break;
      }
    }
    if (!ctx) return Error{EINVAL, path + ": current context '" + ctx_name + "' not found"};
    std::string cluster_name = ctx["cluster"].as<std::string>();
    std::string user_name = ctx["user"] ? ctx["user"].as<std::string>() : "";
    ApiServer s;
    bool found = false;
    for (const auto& c : root["clusters"]) {
      if (c["name"].as<std::string>() != cluster_name) continue;
      const auto& cl = c["cluster"];
      s.server = cl["server"].as<std::string>();
      if (cl["certificate-authority"]) s.ca_file = rel(cl["certificate-authority"].as<std::string>());
      if (cl["certificate-authority-data"]) s.ca_data = b64decode(cl["certificate-authority-data"].as<std::string>());
      if (cl["insecure-skip-tls-verify"]) s.insecure_skip_verify = cl["insecure-skip-tls-verify"].as<bool>();
      found = true;
    }
    if (!found) return Error{EINVAL, path + ": cluster '" + cluster_name + "' not found"};
    for (const auto& u : root["users"]) {
      if (u["name"].as<std::string>() != user_name) continue;
      const auto& us = u["user"];
      if (us["token"]) s.token = us["token"].as<std::string>();
      if (us["tokenFile"]) s.token_file = rel(us["tokenFile"].as<std::string>());
      if (us["client-certificate"]) s.client_cert_file = rel(us["client-certificate"].as<std::string>());
      if (us["client-key"]) s.client_key_file = rel(us["client-key"].as<std::string>());
      if (us["client-certificate-data"]) s.client_cert_data = b64decode(us["client-certificate-data"].as<std::string>());
      if (us["client-key-data"]) s.client_key_data = b64decode(us["client-key-data"].as<std::string>());
    }
    while (!s.server.empty() && s.server.back() == '/') s.server.pop_back();
    if (s.server.empty()) return Error{EINVAL, path + ": cluster '" + cluster_name + "' has no server"};
    return s;
  } catch (const std::exception& e) {
    return Error{EINVAL, "kubeconfig " + path + ": " + e.what()};
  }
}

ApiClient::ApiClient(ApiServer server, Duration timeout) : server_(std::move(server)), timeout_(timeout) {}

HttpRequest ApiClient::make_request(const std::string& method, const std::string& path, const std::string& body,
                                    const std::string& content_type, Duration total_timeout) const {
  HttpRequest req;
  req.method = method;
  req.url = server_.server + path;
  req.body = body;
  req.headers = {"Accept: application/json", "User-Agent: pressured"};
  if (!body.empty()) req.headers.push_back("Content-Type: " + content_type);
  std::string token = server_.token;
  if (token.empty() && !server_.token_file.empty()) token = trim_space(slurp(server_.token_file, 64 * 1024));
  if (!token.empty()) req.headers.push_back("Authorization: Bearer " + token);
  req.connect_timeout = timeout_;
  req.total_timeout = total_timeout;
  req.tls = TlsOptions{server_.ca_file,          server_.ca_data,          server_.client_cert_file,
                       server_.client_key_file,  server_.client_cert_data, server_.client_key_data,
                       server_.insecure_skip_verify};
  return req;
}

Result<HttpResponse> ApiClient::request(const std::string& method, const std::string& path, const std::string& body,
                                        const std::string& content_type) const {
  return http_request(make_request(method, path, body, content_type, timeout_));
}

Result<HttpResponse> ApiClient::stream(const std::string& path, Duration total_timeout,
                                       const std::function<bool(std::string_view)>& on_data) const {
  HttpRequest req = make_request("GET", path, {}, {}, total_timeout);
  req.on_data = &on_data;
  return http_request(req);
}

Result<HttpResponse> ApiClient::get_large(const std::string& path, std::size_t max_body_bytes) const {
  HttpRequest req = make_request("GET", path, {}, {}, timeout_);
  req.max_body_bytes = max_body_bytes;
  req.accept_encoding = true;
  return http_request(req);
}

long retry_after_ms(const HttpResponse& r) {
  auto it = r.headers.find("retry-after");
  if (it == r.headers.end()) return -1;
  char* end = nullptr;
  long v = std::strtol(it->second.c_str(), &end, 10);
  if (end == it->second.c_str() || v < 0) return -1;
  return std::min(v, 300L) * 1000;
}

}  // namespace pressured::k8s
