#pragma once
// One API request, asked again while the answer says "later": network errors,
// timeouts, 429 and 5xx, with the one backoff (k8s/backoff.hpp) and the
// server's Retry-After. Every attempt is counted by action and outcome
// (pressured_kubernetes_api_requests_total); the writers see only the final
// answer, or none when the budget is spent.

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "k8s/api_client.hpp"
#include "pressured/metrics.hpp"

namespace pressured::k8s {

struct RetryOptions {
  int max_attempts = 5;
  Duration initial_backoff{std::chrono::milliseconds(200)};
  Duration max_backoff{std::chrono::seconds(30)};
};

/// One request to the API server: PATCH bodies name their content type.
struct ApiRequest {
  std::string method = "GET";
  std::string path;
  std::string body;
  std::string content_type = "application/json";
};

class RetryingApi {
 public:
  /// Waits between attempts; false ends the retries (the owner is stopping).
  using Wait = std::function<bool(Duration)>;
  /// `retries` and `failures` count the attempts asked again and the
  /// requests given up (the owner's counters, exported by it).
  RetryingApi(const ApiClient& client, RetryOptions options, Wait wait, std::atomic<uint64_t>& retries,
              std::atomic<uint64_t>& failures);

  /// Counts every attempt in `metrics`; set before the first request.
  void set_metrics(Metrics* metrics) { metrics_ = metrics; }
  /// Called once per attempt with its outcome (tests); set before the first request.
  void set_outcome_hook(std::function<void(ApiAction, ApiOutcome)> hook) { hook_ = std::move(hook); }

  /// Sends `request` until an answer that is not "later", or the budget is
  /// spent (nullopt, counted and logged as a failure). `retry_429_500`
  /// false: 429 and 500 are final answers (the Eviction API's refusals,
  /// which the caller answers with its fallback). `what` names the request
  /// in log lines.
  std::optional<HttpResponse> send(ApiAction action, const std::string& what, const ApiRequest& request,
                                   bool retry_429_500 = true);

  const ApiClient& client() const { return client_; }

 private:
  const ApiClient& client_;
  RetryOptions opts_;
  Wait wait_;
  std::atomic<uint64_t>& retries_;
  std::atomic<uint64_t>& failures_;
  Metrics* metrics_ = nullptr;
  std::function<void(ApiAction, ApiOutcome)> hook_;
};

}  // namespace pressured::k8s
