// Authentication of /metrics: the bearer token, basic auth against bcrypt
// hashes (checked on a thread of their own), and a cache of the credentials
// that verified, under a keyed hash.

#include "metrics/tls/auth.hpp"

#include <crypt.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>

namespace pressured::web {

namespace {

using SteadyClock = std::chrono::steady_clock;

// Equal lengths are compared in full whatever the first difference: the time
// taken says nothing about where a guessed token goes wrong.
bool equal_constant_time(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

bool iequals_prefix(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  }
  return true;
}

}  // namespace

// bcrypt is slow on purpose (cost 12: ~0.3 s of one core). It runs here, on
// its own thread, never on the thread that answers probes; at most `bound`
// checks wait or run at once, the rest are answered 429 at once.
class AuthChecker {
 public:
  AuthChecker(std::size_t bound, int wake_fd) : bound_(bound == 0 ? 1 : bound), wake_fd_(wake_fd) {
    thread_ = std::thread([this] { run(); });
  }
  ~AuthChecker() { stop(); }

  /// False when `bound` checks are already queued or running.
  bool submit(std::shared_ptr<AuthJob> job) {
    std::lock_guard lock(mu_);
    if (stopping_ || queue_.size() + running_ >= bound_) return false;
    queue_.push_back(std::move(job));
    cv_.notify_one();
    return true;
  }

  /// Finishes the check under way, cancels the queued ones and resumes their
  /// connections (the daemon cannot stop with a connection suspended).
  void stop() {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
    for (auto& job : queue_) finish(*job, AuthJob::Outcome::Cancelled);
    queue_.clear();
  }

 private:
  void finish(AuthJob& job, AuthJob::Outcome outcome) {
    job.outcome = outcome;
    MHD_resume_connection(job.connection);
    // MHD marks the connection for resumption above; this wakes the serving
    // loop, whose next MHD_run picks it up.
    uint64_t one = 1;
    if (::write(wake_fd_, &one, sizeof one) < 0) {
      // An eventfd cannot refuse one increment.
    }
  }

  void run() {
    while (true) {
      std::shared_ptr<AuthJob> job;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        job = std::move(queue_.front());
        queue_.pop_front();
        ++running_;
      }
      crypt_data data{};
      const char* got = ::crypt_rn(job->password.c_str(), job->hash.c_str(), &data, sizeof data);
      const bool good = got != nullptr && equal_constant_time(got, job->hash);
      {
        std::lock_guard lock(mu_);
        --running_;
      }
      finish(*job, good ? AuthJob::Outcome::Good : AuthJob::Outcome::Bad);
    }
  }

  const std::size_t bound_;
  const int wake_fd_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<AuthJob>> queue_;
  std::size_t running_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

Authenticator::Authenticator(WebConfig web, unsigned checks_per_second, int wake_fd)
    : web_(std::move(web)), checks_per_second_(checks_per_second) {
  if (!web_.basic_auth_users.empty()) checker_ = std::make_unique<AuthChecker>(checks_per_second_, wake_fd);
}

Authenticator::~Authenticator() { stop(); }

bool Authenticator::init() { return gnutls_rnd(GNUTLS_RND_KEY, cache_key_.data(), cache_key_.size()) == 0; }

void Authenticator::stop() {
  if (checker_) checker_->stop();
}

std::string Authenticator::keyed_hash(const std::string& user, const std::string& pass,
                                    const std::string& hash) const {
  std::string in = user + '\0' + pass + '\0' + hash;
  unsigned char d[32];
  if (gnutls_hmac_fast(GNUTLS_MAC_SHA256, cache_key_.data(), cache_key_.size(), in.data(), in.size(), d) != 0) {
    return {};
  }
  return std::string(reinterpret_cast<char*>(d), sizeof d);
}

std::optional<unsigned> Authenticator::authorize(MHD_Connection* connection, std::shared_ptr<AuthJob>& pending) {
  if (!web_.auth()) return 200;
  if (pending) {  // resumed: the check is done
    const AuthJob& job = *pending;
    switch (job.outcome.load()) {
      case AuthJob::Outcome::Good:
        if (checks_ > 0) --checks_;  // a good password costs nothing against the budget
        if (verified_.size() >= 16) verified_.clear();
        if (!job.cache_key.empty()) verified_.push_back(job.cache_key);
        return 200;
      case AuthJob::Outcome::Bad:
        return 401;
      default:
        return 503;
    }
  }
  const char* header = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  if (header == nullptr) return 401;
  std::string_view h(header);
  if (iequals_prefix(h, "bearer ")) {
    std::string_view token = h.substr(7);
    while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
    return !web_.bearer_token.empty() && equal_constant_time(token, web_.bearer_token) ? 200 : 401;
  }
  if (web_.basic_auth_users.empty()) return 401;
  char* pass_c = nullptr;
  char* user_c = MHD_basic_auth_get_username_password(connection, &pass_c);
  std::string user = user_c ? user_c : "", pass = pass_c ? pass_c : "";
  const bool parsed = user_c != nullptr && pass_c != nullptr;
  if (user_c) MHD_free(user_c);
  if (pass_c) MHD_free(pass_c);
  if (!parsed) return 401;
  const std::string* hash = nullptr;
  for (const auto& [u, hh] : web_.basic_auth_users) {
    if (u == user) hash = &hh;
  }
  if (hash == nullptr) return 401;
  std::string key = keyed_hash(user, pass, *hash);
  if (!key.empty() && std::find(verified_.begin(), verified_.end(), key) != verified_.end()) return 200;
  // Unknown credentials: at most auth_failures_per_second checks a second,
  // and at most that many waiting or running at once.
  auto now = SteadyClock::now();
  if (now - window_ >= std::chrono::seconds(1)) {
    window_ = now;
    checks_ = 0;
  }
  if (checks_ >= checks_per_second_ || !checker_) return 429;
  auto job = std::make_shared<AuthJob>();
  job->connection = connection;
  job->password = std::move(pass);
  job->hash = *hash;
  job->cache_key = std::move(key);
  if (!checker_->submit(job)) return 429;
  ++checks_;
  pending = std::move(job);
  return std::nullopt;
}

}  // namespace pressured::web
