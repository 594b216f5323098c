// The libcurl transport: what the direct one cannot do (a server that speaks
// only TLS 1.3, a proxy from the environment) goes through libcurl.
#include "k8s/http_transports.hpp"

#include <curl/curl.h>
#include <dlfcn.h>

#include <cctype>
#include <mutex>

#include "common/text.hpp"

namespace pressured::k8s::detail {

namespace {

// libcurl is opened at its first use, not linked: a daemon whose servers the
// direct transport reaches never maps it (with its closure, OpenSSL, GnuTLS,
// krb5, ldap, ssh2, ...: 6-8 MiB resident; docs/performance.md, "Footprint").
struct CurlApi {
  CURLcode (*global_init)(long flags);
  CURL* (*easy_init)();
  CURLcode (*easy_setopt)(CURL* curl, CURLoption option, ...);
  CURLcode (*easy_getinfo)(CURL* curl, CURLINFO info, ...);
  CURLcode (*easy_perform)(CURL* curl);
  void (*easy_cleanup)(CURL* curl);
  const char* (*easy_strerror)(CURLcode code);
  curl_slist* (*slist_append)(curl_slist* list, const char* s);
  void (*slist_free_all)(curl_slist* list);
};

template <typename F>
bool resolve(void* lib, const char* symbol, F& f, std::string& missing) {
  void* p = ::dlsym(lib, symbol);
  if (p == nullptr) {
    missing += missing.empty() ? symbol : std::string(", ") + symbol;
    return false;
  }
  f = reinterpret_cast<F>(p);
  return true;
}

// Opened once per process (curl_global_init is not thread-safe either: it
// runs here, before the first handle); never closed.
Result<const CurlApi*> curl_api() {
  static std::once_flag once;
  static CurlApi api;
  static std::string error;
  std::call_once(once, [] {
    void* lib = ::dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* why = ::dlerror();
      error = std::string("cannot load libcurl (libcurl.so.4, Debian package libcurl4): ") + (why ? why : "unknown");
      return;
    }
    std::string missing;
    resolve(lib, "curl_global_init", api.global_init, missing);
    resolve(lib, "curl_easy_init", api.easy_init, missing);
    resolve(lib, "curl_easy_setopt", api.easy_setopt, missing);
    resolve(lib, "curl_easy_getinfo", api.easy_getinfo, missing);
    resolve(lib, "curl_easy_perform", api.easy_perform, missing);
    resolve(lib, "curl_easy_cleanup", api.easy_cleanup, missing);
    resolve(lib, "curl_easy_strerror", api.easy_strerror, missing);
    resolve(lib, "curl_slist_append", api.slist_append, missing);
    resolve(lib, "curl_slist_free_all", api.slist_free_all, missing);
    if (!missing.empty()) {
      error = "libcurl.so.4 lacks " + missing;
      return;
    }
    if (CURLcode rc = api.global_init(CURL_GLOBAL_DEFAULT); rc != CURLE_OK) {
      error = std::string("curl_global_init: ") + api.easy_strerror(rc);
    }
  });
  if (!error.empty()) return Error{ELIBACC, error};
  return &api;
}

struct Sink {
  const CurlApi* curl_api = nullptr;
  const HttpRequest* request = nullptr;
  HttpResponse* response = nullptr;
  CURL* curl = nullptr;
  bool aborted = false;   // on_data ended the transfer
  bool too_long = false;  // the body passed max_body_bytes
};

size_t append_body(const char* data, size_t len, Sink* s) {
  if (s->response->body.size() + len > s->request->max_body_bytes) {
    s->too_long = true;
    return 0;
  }
  s->response->body.append(data, len);
  return len;
}

size_t on_write(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<Sink*>(user);
  const size_t len = size * n;
  if (s->request->on_data == nullptr) return append_body(data, len, s);
  if (s->response->status == 0) s->curl_api->easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &s->response->status);
  if (s->response->status < 200 || s->response->status >= 300) return append_body(data, len, s);  // an error body
  if (!(*s->request->on_data)(std::string_view(data, len))) {
    s->aborted = true;
    return 0;
  }
  return len;
}

// Called about once a second even while a stream is idle: lets the caller
// end a watch (daemon stop) without waiting for data.
int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* s = static_cast<Sink*>(user);
  if (!(*s->request->on_data)(std::string_view())) {
    s->aborted = true;
    return 1;
  }
  return 0;
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* h = static_cast<std::map<std::string, std::string>*>(user);
  std::string line(data, size * n);
  auto colon = line.find(':');
  if (colon != std::string::npos) {
    std::string key = line.substr(0, colon);
    for (auto& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    (*h)[key] = trim_space(line.substr(colon + 1));
  }
  return size * n;
}

// Why a request failed, in an operator's words.
std::string describe_curl_error(CURLcode rc, const char* errbuf, const Sink& sink) {
  if (sink.too_long) {
    return "response body larger than " + std::to_string(sink.request->max_body_bytes) + " bytes";
  }
  std::string detail = errbuf[0] != '\0' ? std::string(errbuf) : sink.curl_api->easy_strerror(rc);
  if (rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE) {
    const auto& t = sink.request->tls;
    std::string ca = !t.ca_file.empty() ? t.ca_file : (!t.ca_data.empty() ? "certificate-authority-data" : "the system CAs");
    detail += " (the server's certificate is not trusted by " + ca + ": wrong CA?)";
  }
  return detail;
}

long milliseconds(Duration d) {
  return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

}  // namespace

Result<HttpResponse> curl_request(const HttpRequest& req) {
  auto loaded = curl_api();
  if (!loaded) return Error{loaded.error().code, req.method + " " + req.url + ": " + loaded.error().message};
  const CurlApi& api = **loaded;
  CURL* c = api.easy_init();
  if (c == nullptr) return Error{ENOMEM, "curl_easy_init failed"};
  HttpResponse resp;
  Sink sink{&api, &req, &resp, c, false, false};
  char errbuf[CURL_ERROR_SIZE] = {0};
  api.easy_setopt(c, CURLOPT_URL, req.url.c_str());
  api.easy_setopt(c, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  api.easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  api.easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  api.easy_setopt(c, CURLOPT_TIMEOUT_MS, milliseconds(req.total_timeout));
  api.easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, milliseconds(req.connect_timeout));
  api.easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
  api.easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  if (req.on_data != nullptr) {
    api.easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    api.easy_setopt(c, CURLOPT_XFERINFODATA, &sink);
    api.easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  }
  api.easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  api.easy_setopt(c, CURLOPT_HEADERDATA, &resp.headers);
  if (req.accept_encoding) api.easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");
  if (!req.body.empty()) {
    api.easy_setopt(c, CURLOPT_POSTFIELDS, req.body.data());
    api.easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(req.body.size()));
  }
  struct curl_slist* hdrs = nullptr;
  for (const auto& h : req.headers) hdrs = api.slist_append(hdrs, h.c_str());
  api.easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
  const TlsOptions& tls = req.tls;
  if (!tls.ca_file.empty()) api.easy_setopt(c, CURLOPT_CAINFO, tls.ca_file.c_str());
  curl_blob ca{const_cast<char*>(tls.ca_data.data()), tls.ca_data.size(), CURL_BLOB_COPY};
  if (!tls.ca_data.empty()) api.easy_setopt(c, CURLOPT_CAINFO_BLOB, &ca);
  if (!tls.client_cert_file.empty()) api.easy_setopt(c, CURLOPT_SSLCERT, tls.client_cert_file.c_str());
  if (!tls.client_key_file.empty()) api.easy_setopt(c, CURLOPT_SSLKEY, tls.client_key_file.c_str());
  curl_blob cert{const_cast<char*>(tls.client_cert_data.data()), tls.client_cert_data.size(), CURL_BLOB_COPY};
  curl_blob key{const_cast<char*>(tls.client_key_data.data()), tls.client_key_data.size(), CURL_BLOB_COPY};
  if (!tls.client_cert_data.empty()) api.easy_setopt(c, CURLOPT_SSLCERT_BLOB, &cert);
  if (!tls.client_key_data.empty()) api.easy_setopt(c, CURLOPT_SSLKEY_BLOB, &key);
  if (tls.insecure_skip_verify) {
    api.easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    api.easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  CURLcode rc = api.easy_perform(c);
  api.easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp.status);
  api.slist_free_all(hdrs);
  api.easy_cleanup(c);
  if (rc != CURLE_OK && !((rc == CURLE_WRITE_ERROR || rc == CURLE_ABORTED_BY_CALLBACK) && sink.aborted)) {
    const int code = sink.too_long ? EFBIG : rc == CURLE_OPERATION_TIMEDOUT ? ETIMEDOUT : EIO;
    return Error{code, req.method + " " + req.url + ": " + describe_curl_error(rc, errbuf, sink)};
  }
  resp.through_libcurl = true;
  return resp;
}

}  // namespace pressured::k8s::detail
