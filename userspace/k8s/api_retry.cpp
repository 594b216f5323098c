#include "k8s/api_retry.hpp"

#include <algorithm>
#include <cerrno>

#include <spdlog/spdlog.h>

#include "k8s/backoff.hpp"

namespace pressured::k8s {

RetryingApi::RetryingApi(const ApiClient& client, RetryOptions options, Wait wait, std::atomic<uint64_t>& retries,
                         std::atomic<uint64_t>& failures)
    : client_(client), opts_(options), wait_(std::move(wait)), retries_(retries), failures_(failures) {}

std::optional<HttpResponse> RetryingApi::send(ApiAction action, const std::string& what, const ApiRequest& request,
                                              bool retry_429_500) {
  Backoff backoff({.initial = opts_.initial_backoff, .max = opts_.max_backoff});
  for (int attempt = 1; attempt <= opts_.max_attempts; ++attempt) {
    auto r = client_.request(request.method, request.path, request.body, request.content_type);
    const ApiOutcome outcome = r ? api_outcome_from_http_status(static_cast<int>(r->status))
                                 : (r.error().code == ETIMEDOUT ? ApiOutcome::Timeout : ApiOutcome::Unreachable);
    if (metrics_) metrics_->add(stats::kKubernetesApiRequests, {action, outcome});
    if (hook_) hook_(action, outcome);
    long wait_ms = -1;
    if (r) {
      bool retryable = r->status == 429 || r->status >= 500;
      if (!retryable || (!retry_429_500 && (r->status == 429 || r->status == 500))) return *r;
      wait_ms = retry_after_ms(*r);
      spdlog::warn("k8s: {}: HTTP {} (attempt {}/{})", what, r->status, attempt, opts_.max_attempts);
    } else {
      spdlog::warn("k8s: {}: {} (attempt {}/{})", what, r.error().message, attempt, opts_.max_attempts);
    }
    if (attempt == opts_.max_attempts) break;
    ++retries_;
    // The base doubles at every attempt, also those the server's
    // Retry-After timed.
    const Duration base = backoff.next();
    const Duration d = wait_ms >= 0 ? Duration(std::chrono::milliseconds(wait_ms)) : base;
    if (!wait_(std::min(d, opts_.max_backoff))) return std::nullopt;
  }
  ++failures_;
  spdlog::error("k8s: {}: giving up after {} attempts", what, opts_.max_attempts);
  return std::nullopt;
}

}  // namespace pressured::k8s
