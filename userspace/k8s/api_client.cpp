#include "k8s/api_client.hpp"

#include <curl/curl.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>

#include <yaml-cpp/yaml.h>

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

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
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

void curl_init_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<std::string*>(user);
  if (s->size() > (8u << 20)) return 0;  // bound responses
  s->append(data, size * n);
  return size * n;
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* h = static_cast<std::map<std::string, std::string>*>(user);
  std::string line(data, size * n);
  auto colon = line.find(':');
  if (colon != std::string::npos) {
    std::string key = line.substr(0, colon);
    for (auto& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    (*h)[key] = trim(line.substr(colon + 1));
  }
  return size * n;
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

ApiClient::ApiClient(ApiServer server, Duration timeout) : server_(std::move(server)), timeout_(timeout) {
  curl_init_once();
}

namespace {

struct StreamSink {
  const std::function<bool(std::string_view)>* on_data = nullptr;
  std::string* body = nullptr;
  long status = 0;
  CURL* curl = nullptr;
  bool aborted = false;
};

size_t on_stream(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<StreamSink*>(user);
  if (s->status == 0) curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &s->status);
  if (s->status < 200 || s->status >= 300) return on_body(data, size, n, s->body);  // an error Status
  if (!(*s->on_data)(std::string_view(data, size * n))) {
    s->aborted = true;
    return 0;
  }
  return size * n;
}

// Called about once a second even while a stream is idle: lets the caller
// end a watch (daemon stop) without waiting for data.
int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* s = static_cast<StreamSink*>(user);
  if (!(*s->on_data)(std::string_view())) {
    s->aborted = true;
    return 1;
  }
  return 0;
}

// Why a TLS handshake failed, in an operator's words.
std::string describe_curl_error(CURLcode rc, const char* errbuf, const ApiServer& s) {
  std::string detail = errbuf[0] != '\0' ? std::string(errbuf) : curl_easy_strerror(rc);
  if (rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE) {
    std::string ca = !s.ca_file.empty() ? s.ca_file : (!s.ca_data.empty() ? "certificate-authority-data" : "the system CAs");
    detail += " (the API server's certificate is not trusted by " + ca + ": wrong CA?)";
  }
  return detail;
}

}  // namespace

Result<HttpResponse> ApiClient::perform(const std::string& method, const std::string& path, const std::string& body,
                                        const std::string& content_type, Duration total_timeout,
                                        const std::function<bool(std::string_view)>* on_data) const {
  CURL* c = curl_easy_init();
  if (c == nullptr) return Error{ENOMEM, "curl_easy_init failed"};
  HttpResponse resp;
  StreamSink sink{on_data, &resp.body, 0, c, false};
  char errbuf[CURL_ERROR_SIZE] = {0};
  std::string url = server_.server + path;
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  auto ms = [](Duration d) { return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()); };
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, ms(total_timeout));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, ms(timeout_));
  if (on_data != nullptr) {
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_stream);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &sink);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  } else {
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &resp.body);
  }
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &resp.headers);
  if (!body.empty()) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  }
  struct curl_slist* hdrs = nullptr;
  hdrs = curl_slist_append(hdrs, "Accept: application/json");
  hdrs = curl_slist_append(hdrs, "User-Agent: pressured");
  if (!body.empty()) hdrs = curl_slist_append(hdrs, ("Content-Type: " + content_type).c_str());
  std::string token = server_.token;
  if (token.empty() && !server_.token_file.empty()) token = trim(slurp(server_.token_file, 64 * 1024));
  if (!token.empty()) hdrs = curl_slist_append(hdrs, ("Authorization: Bearer " + token).c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
  if (!server_.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, server_.ca_file.c_str());
  curl_blob ca{const_cast<char*>(server_.ca_data.data()), server_.ca_data.size(), CURL_BLOB_COPY};
  if (!server_.ca_data.empty()) curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &ca);
  if (!server_.client_cert_file.empty()) curl_easy_setopt(c, CURLOPT_SSLCERT, server_.client_cert_file.c_str());
  if (!server_.client_key_file.empty()) curl_easy_setopt(c, CURLOPT_SSLKEY, server_.client_key_file.c_str());
  curl_blob cert{const_cast<char*>(server_.client_cert_data.data()), server_.client_cert_data.size(), CURL_BLOB_COPY};
  curl_blob key{const_cast<char*>(server_.client_key_data.data()), server_.client_key_data.size(), CURL_BLOB_COPY};
  if (!server_.client_cert_data.empty()) curl_easy_setopt(c, CURLOPT_SSLCERT_BLOB, &cert);
  if (!server_.client_key_data.empty()) curl_easy_setopt(c, CURLOPT_SSLKEY_BLOB, &key);
  if (server_.insecure_skip_verify) {
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  CURLcode rc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp.status);
  curl_slist_free_all(hdrs);
  curl_easy_cleanup(c);
  if (rc != CURLE_OK && !((rc == CURLE_WRITE_ERROR || rc == CURLE_ABORTED_BY_CALLBACK) && sink.aborted)) {
    return Error{rc == CURLE_OPERATION_TIMEDOUT ? ETIMEDOUT : EIO,
                 method + " " + server_.server + path + ": " + describe_curl_error(rc, errbuf, server_)};
  }
  return resp;
}

Result<HttpResponse> ApiClient::request(const std::string& method, const std::string& path, const std::string& body,
                                        const std::string& content_type) const {
  return perform(method, path, body, content_type, timeout_, nullptr);
}

Result<HttpResponse> ApiClient::stream(const std::string& path, Duration total_timeout,
                                       const std::function<bool(std::string_view)>& on_data) const {
  return perform("GET", path, {}, {}, total_timeout, &on_data);
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
