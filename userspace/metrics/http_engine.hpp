#pragma once
// The seam between the metrics port's connection policy (server.cpp: the
// accept, the cap, the deadlines, the counters) and what speaks HTTP on the
// connections it hands over. Two engines sit behind it:
//   - the plain one (plain_engine.cpp), pressured's own HTTP/1.1 server,
//     serves the port when the web configuration asks for neither TLS nor
//     authentication: the default, which maps no TLS library at all;
//   - the TLS one (tls/engine.cpp: libmicrohttpd over GnuTLS, bcrypt), in a
//     module of its own, libpressured_metrics_tls.so, dlopened only when TLS
//     or authentication is configured: GnuTLS initialises itself (and
//     p11-kit) when it is loaded, whether or not a handshake ever happens.
// Everything here runs on the server's one thread; the module is built from
// the same tree as the binary, so C++ types cross the boundary as they are.

#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "metrics/http_request.hpp"
#include "pressured/metrics.hpp"
#include "pressured/result.hpp"

namespace pressured::web {

/// A GET or HEAD of /metrics: the one request authentication guards
/// (probes never need credentials, so nothing they do waits for a check).
inline bool wants_credentials(std::string_view method, std::string_view path) {
  return (method == "GET" || method == "HEAD") && path == "/metrics";
}

/// What an engine tells the port about the connections it was handed, each
/// named by the sequence number it was handed with. Implemented by server.cpp.
class EngineHost {
 public:
  /// A whole request has arrived: from now on the answer's deadline holds,
  /// and the connection is no longer one the cap may shed. Called again
  /// when a suspended connection resumes.
  virtual void request_arrived(uint64_t seq) = 0;
  /// The connection waits for a password check (no deadline runs).
  virtual void suspended(uint64_t seq) = 0;
  /// The connection is closed and its fd released.
  virtual void closed(uint64_t seq) = 0;
  /// An answer was written in full (error answers included).
  virtual void answered() = 0;
  /// A scrape was refused for its credentials (401, 429).
  virtual void unauthorized() = 0;
  /// The answer to a request the engine has authorised.
  virtual Answer answer(std::string_view method, std::string_view path) = 0;
  /// A line of the engine's own log, at debug level.
  virtual void log_debug(std::string_view line) = 0;

 protected:
  ~EngineHost() = default;
};

/// Speaks HTTP on the connections server.cpp hands it.
class HttpEngine {
 public:
  virtual ~HttpEngine() = default;
  /// An fd that becomes readable when run() has work (the serving loop
  /// watches it beside its own).
  virtual int poll_fd() const = 0;
  /// Takes `fd` (non-blocking, with bytes waiting). True: the engine owns
  /// it and reports closed(seq) when it is done with it (maybe before this
  /// returns); false: refused, and the fd is closed already.
  virtual bool add(int fd, const sockaddr* addr, socklen_t addr_len, uint64_t seq) = 0;
  /// Does what its connections are ready for. Called at every turn of the loop.
  virtual void run() = 0;
  /// Milliseconds until run() must be called again without an event; -1: none.
  virtual long long timeout_ms() = 0;
  /// Ends every connection (a password check under way finishes first; the
  /// queued ones are answered 503) and reports each closed.
  virtual void stop() = 0;
};

/// pressured's own HTTP/1.1 engine (plain_engine.cpp): GET and HEAD, one
/// request per connection, requests of at most `max_request_bytes`.
std::unique_ptr<HttpEngine> make_plain_engine(EngineHost& host, std::size_t max_request_bytes);

/// What the TLS module's engine is made from. The PEM files were read by
/// the caller (so their errors name them from the daemon's side).
struct TlsEngineOptions {
  WebConfig web;
  MetricsServerLimits limits;
  std::string cert_pem;
  std::string key_pem;
  int wake_fd = -1;  // an eventfd the serving loop watches: a finished password check writes to it
};

/// The TLS module's one entry point: an engine, or nullptr with `error` set.
using MakeTlsEngine = HttpEngine* (*)(EngineHost& host, const TlsEngineOptions& options, std::string& error);
inline constexpr const char* kTlsModuleFile = "libpressured_metrics_tls.so";
inline constexpr const char* kTlsEngineSymbol = "pressured_metrics_tls_engine_v1";

/// Loads the TLS module (once per process; it stays loaded) and returns its
/// entry point. `path` empty: beside the binary, in <bin>/../lib/pressured/,
/// then where this build tree leaves it. The error names every path tried
/// and why each failed.
Result<MakeTlsEngine> load_tls_module(const std::string& path = {});

}  // namespace pressured::web
