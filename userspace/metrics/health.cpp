// Liveness and readiness (see health.hpp).

#include "metrics/health.hpp"

#include <chrono>
#include <utility>

namespace pressured {

namespace {

int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Health::Health(Duration liveness_timeout) : liveness_timeout_(liveness_timeout) {}

void Health::set_events_attached(bool attached) { events_attached_ = attached; }

bool Health::observation_completed() { return !observed_once_.exchange(true); }

void Health::require_pod_source(std::function<bool()> delivered) {
  std::lock_guard lock(pod_source_mu_);
  pod_source_delivered_ = std::move(delivered);
}

void Health::heartbeat() { last_heartbeat_ns_ = steady_now_ns(); }

bool Health::pod_source_synced() const {
  std::lock_guard lock(pod_source_mu_);
  return !pod_source_delivered_ || pod_source_delivered_();
}

bool Health::ready() const { return events_attached_.load() && observed_once_.load() && pod_source_synced(); }

bool Health::alive() const {
  const int64_t last = last_heartbeat_ns_.load();
  if (last == 0) return true;
  return steady_now_ns() - last <= std::chrono::duration_cast<std::chrono::nanoseconds>(liveness_timeout_).count();
}

}  // namespace pressured
