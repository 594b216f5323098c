// The metrics port's TLS and authentication engine: libmicrohttpd (HTTP, and
// TLS through GnuTLS) with basic auth against bcrypt hashes and a bearer
// token (auth.cpp). Built as a module of its own, libpressured_metrics_tls.so,
// which server.cpp dlopens only when the web configuration asks for TLS or
// authentication: GnuTLS initialises itself and p11-kit when it is loaded,
// so a port without TLS must not map it.
//
// The connection policy stays server.cpp's (it accepts, holds a connection
// until its first bytes, keeps the cap and the deadlines, counts); this
// engine is handed the connections that have something to say. MHD runs in
// its epoll mode, driven by the server's one thread, so every MHD callback
// and every shutdown() of a connection happen on that thread.

#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <microhttpd.h>

#include "metrics/http_engine.hpp"
#include "metrics/tls/auth.hpp"

namespace pressured::web {

namespace {

// GnuTLS priorities for node_exporter's min_version: TLS 1.2 unless 1.3 is asked.
std::string tls_priorities(const std::string& min_version) {
  return min_version == "VersionTLS13" ? "NORMAL:-VERS-ALL:+VERS-TLS1.3" : "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2";
}

// Per request (MHD's request context): the password check, if one was needed.
struct RequestState {
  std::shared_ptr<AuthJob> job;
};

class TlsEngine final : public HttpEngine {
 public:
  TlsEngine(EngineHost& host, const TlsEngineOptions& o) : host_(host), options_(o) {}
  ~TlsEngine() override { stop(); }

  // Starts MHD; the error says why not (for TLS, with the files named).
  bool start(std::string& error) {
    const WebConfig& web = options_.web;
    auth_ = std::make_unique<Authenticator>(web, options_.limits.auth_failures_per_second, options_.wake_fd);
    if (!auth_->init()) {
      error = "metrics server: no random key for the credentials cache";
      return false;
    }
    priorities_ = tls_priorities(web.min_version);
    unsigned int flags = MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (web.tls()) flags |= MHD_USE_TLS;
    // MHD's own bounds sit above the port's: its cap leaves room for the
    // connections accepted in one turn and those cut but not yet closed (at
    // its cap MHD stops accepting, it never refuses); its idle timeout is a
    // backstop behind the deadlines server.cpp keeps.
    const MetricsServerLimits& lim = options_.limits;
    const auto cap = static_cast<unsigned int>(lim.max_connections + 64);
    const auto idle_s = static_cast<unsigned int>(
        std::chrono::ceil<std::chrono::seconds>(lim.header_timeout + lim.write_timeout).count() + 1);
    std::vector<MHD_OptionItem> opts = {
        {MHD_OPTION_CONNECTION_LIMIT, cap, nullptr},
        {MHD_OPTION_CONNECTION_TIMEOUT, idle_s, nullptr},
        {MHD_OPTION_CONNECTION_MEMORY_LIMIT, static_cast<intptr_t>(lim.max_request_bytes + 4096), nullptr},
        {MHD_OPTION_EXTERNAL_LOGGER, reinterpret_cast<intptr_t>(&TlsEngine::on_log), this},
        {MHD_OPTION_NOTIFY_CONNECTION, reinterpret_cast<intptr_t>(&TlsEngine::on_connection), this},
        {MHD_OPTION_NOTIFY_COMPLETED, reinterpret_cast<intptr_t>(&TlsEngine::on_completed), this},
    };
    if (web.tls()) {
      opts.push_back({MHD_OPTION_HTTPS_MEM_CERT, 0, options_.cert_pem.data()});
      opts.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0, options_.key_pem.data()});
      opts.push_back({MHD_OPTION_HTTPS_PRIORITIES, 0, priorities_.data()});
    }
    opts.push_back({MHD_OPTION_END, 0, nullptr});
    daemon_ = MHD_start_daemon(flags, 0, nullptr, nullptr, &TlsEngine::on_request, this, MHD_OPTION_ARRAY,
                               opts.data(), MHD_OPTION_END);
    if (daemon_ == nullptr) {
      const std::string why = last_log_.empty() ? "libmicrohttpd refused the options" : last_log_;
      error = web.tls() ? "TLS " + web.cert_file + " / " + web.key_file + ": " + why : "metrics server: " + why;
      return false;
    }
    const MHD_DaemonInfo* info = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_EPOLL_FD);
    if (info == nullptr) {
      error = "metrics server: libmicrohttpd has no epoll fd";
      return false;
    }
    epoll_fd_ = info->epoll_fd;
    return true;
  }

  int poll_fd() const override { return epoll_fd_; }

  bool add(int fd, const sockaddr* addr, socklen_t addr_len, uint64_t seq) override {
    handing_over_ = seq;
    handing_ = true;
    handed_started_ = false;
    // MHD owns (and closes) the fd from here, also when it refuses it.
    const bool ok = MHD_add_connection(daemon_, fd, addr, addr_len) == MHD_YES;
    handing_ = false;
    // Refused after it was taken up: MHD reports it closed (counted there).
    return ok || handed_started_;
  }

  void run() override { MHD_run(daemon_); }

  long long timeout_ms() override {
    MHD_UNSIGNED_LONG_LONG t = 0;
    if (MHD_get_timeout(daemon_, &t) != MHD_YES) return -1;
    return static_cast<long long>(std::min<MHD_UNSIGNED_LONG_LONG>(t, 60'000));
  }

  void stop() override {
    // Suspended connections are resumed (answered 503) before MHD stops.
    if (auth_) auth_->stop();
    // Closes the connections (each reported closed).
    if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
    daemon_ = nullptr;
  }

 private:
  // ---- MHD callbacks (all on the serving thread)

  static void on_log(void* cls, const char* fmt, va_list ap) {
    auto* self = static_cast<TlsEngine*>(cls);
    char buf[512];
    va_list copy;
    va_copy(copy, ap);
    std::vsnprintf(buf, sizeof buf, fmt, copy);
    va_end(copy);
    std::string msg(buf);
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    self->last_log_ = msg;
    // MHD answers some malformed and oversized requests itself (400 for a
    // missing Host, 414, 431); its log is where it says so. (Rejections are
    // counted when such connections close.)
    if (std::strncmp(fmt, "Error processing request", 24) == 0) self->host_.answered();
    self->host_.log_debug(msg);
  }

  static void on_connection(void* cls, MHD_Connection* connection, void** /*socket_context*/,
                            MHD_ConnectionNotificationCode code) {
    auto* self = static_cast<TlsEngine*>(cls);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
      if (!self->handing_) return;  // only connections handed over exist here
      self->seqs_[connection] = self->handing_over_;
      self->handed_started_ = true;
    } else {
      auto it = self->seqs_.find(connection);
      if (it == self->seqs_.end()) return;
      const uint64_t seq = it->second;
      self->seqs_.erase(it);
      self->host_.closed(seq);
    }
  }

  static void on_completed(void* cls, MHD_Connection* /*connection*/, void** req_cls,
                           MHD_RequestTerminationCode code) {
    auto* self = static_cast<TlsEngine*>(cls);
    if (code == MHD_REQUEST_TERMINATED_COMPLETED_OK) self->host_.answered();
    delete static_cast<RequestState*>(*req_cls);
    *req_cls = nullptr;
  }

  static MHD_Result on_request(void* cls, MHD_Connection* connection, const char* url, const char* method,
                               const char* /*version*/, const char* /*upload_data*/, size_t* upload_data_size,
                               void** req_cls) {
    auto* self = static_cast<TlsEngine*>(cls);
    if (*upload_data_size != 0) {
      *upload_data_size = 0;  // a body is not read (GET only): answered 405
      return MHD_YES;
    }
    auto* state = static_cast<RequestState*>(*req_cls);
    if (state == nullptr) {
      state = new RequestState;
      *req_cls = state;
    }
    auto seq = self->seqs_.find(connection);
    if (seq != self->seqs_.end()) self->host_.request_arrived(seq->second);
    std::optional<Answer> a = self->route(connection, url, method, *state);
    if (!a) {  // a password check is under way: wait for it without holding the thread
      if (seq != self->seqs_.end()) self->host_.suspended(seq->second);
      MHD_suspend_connection(connection);
      return MHD_YES;
    }
    // MHD sends no body for HEAD itself.
    MHD_Response* r = MHD_create_response_from_buffer(a->body.size(), a->body.data(), MHD_RESPMEM_MUST_COPY);
    if (r == nullptr) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, a->type.c_str());
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");  // one request per connection
    for (const auto& [k, v] : a->headers) MHD_add_response_header(r, k.c_str(), v.c_str());
    MHD_Result ret = MHD_queue_response(connection, a->status, r);
    MHD_destroy_response(r);
    return ret;
  }

  // The router's answer, behind the credentials /metrics needs; nullopt: a
  // password check is under way.
  std::optional<Answer> route(MHD_Connection* connection, std::string_view url, std::string_view method,
                              RequestState& state) {
    if (wants_credentials(method, url)) {
      std::optional<unsigned> a = auth_->authorize(connection, state.job);
      if (!a) return std::nullopt;
      if (*a != 200) {
        host_.unauthorized();
        std::vector<std::pair<std::string, std::string>> h;
        if (*a == 401) h.emplace_back("WWW-Authenticate", "Basic realm=\"pressured\"");
        if (*a == 429) h.emplace_back("Retry-After", "1");
        if (*a == 503) return Answer{*a, "stopping\n", h};
        return Answer{*a, *a == 401 ? "unauthorized\n" : "too many authentication attempts\n", h};
      }
    }
    return host_.answer(method, url);
  }

  EngineHost& host_;
  TlsEngineOptions options_;  // MHD keeps pointers to the PEM strings
  std::string priorities_;
  std::unique_ptr<Authenticator> auth_;
  MHD_Daemon* daemon_ = nullptr;
  int epoll_fd_ = -1;
  std::unordered_map<MHD_Connection*, uint64_t> seqs_;
  uint64_t handing_over_ = 0;  // read by on_connection during MHD_add_connection
  bool handing_ = false;
  bool handed_started_ = false;  // MHD took the connection up before refusing it
  std::string last_log_;  // MHD's last message, for the error of a failed start
};

}  // namespace

}  // namespace pressured::web

extern "C" __attribute__((visibility("default"))) pressured::web::HttpEngine* pressured_metrics_tls_engine_v1(
    pressured::web::EngineHost& host, const pressured::web::TlsEngineOptions& options, std::string& error) {
  auto engine = std::make_unique<pressured::web::TlsEngine>(host, options);
  if (!engine->start(error)) return nullptr;
  return engine.release();
}
