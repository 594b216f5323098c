#pragma once
// Authentication of /metrics (basic auth with bcrypt hashes, a bearer token),
// beside the server that asks for it. bcrypt is slow on purpose, so a check
// runs on a thread of its own while its connection waits suspended; the
// probes (/healthz, /readyz) never ask.

#include <microhttpd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pressured/metrics.hpp"

namespace pressured::web {

// One bcrypt check of a basic-auth password, done by the AuthChecker thread
// while its connection is suspended.
struct AuthJob {
  MHD_Connection* connection = nullptr;
  std::string password;
  std::string hash;
  std::string cache_key;
  enum class Outcome { Pending, Good, Bad, Cancelled };
  std::atomic<Outcome> outcome{Outcome::Pending};
};

class AuthChecker;

/// Decides whether a request to /metrics may have it. Lives on the serving
/// thread (every call but the checker's from there).
class Authenticator {
 public:
  /// `checks_per_second`: bcrypt checks of unknown credentials a second, and
  /// at most as many waiting or running at once. `wake_fd`: an eventfd the
  /// checker writes to when a suspended connection can resume.
  Authenticator(WebConfig web, unsigned checks_per_second, int wake_fd);
  ~Authenticator();
  Authenticator(const Authenticator&) = delete;
  Authenticator& operator=(const Authenticator&) = delete;

  /// False when no random key could be had for the verified-credentials cache.
  bool init();

  /// 200, 401, 429 (too many checks), 503 (stopping); nullopt: a bcrypt
  /// check was handed to the checker and `pending` holds it: suspend the
  /// connection; when it resumes, call again with the same `pending`.
  std::optional<unsigned> authorize(MHD_Connection* connection, std::shared_ptr<AuthJob>& pending);

  /// Finishes the check under way, cancels the queued ones and resumes their
  /// connections (answered 503).
  void stop();

 private:
  std::string keyed_hash(const std::string& user, const std::string& pass, const std::string& hash) const;

  const WebConfig web_;
  const unsigned checks_per_second_;
  std::unique_ptr<AuthChecker> checker_;
  std::vector<std::string> verified_;  // keyed hashes of credentials that verified
  std::array<unsigned char, 32> cache_key_{};
  std::chrono::steady_clock::time_point window_;
  unsigned checks_ = 0;
};

}  // namespace pressured::web
