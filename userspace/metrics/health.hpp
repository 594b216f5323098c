#pragma once
// Liveness and readiness, the facts the metrics port's probes answer from
// (/healthz, /readyz) and the pressured_ready gauge shows. They sit beside
// the server, apart from the metrics registry: a probe reads a few atomics
// and never waits on the registry's lock or a render.

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>

#include "pressured/clock.hpp"

namespace pressured {

class Health {
 public:
  /// `liveness_timeout`: how long after the last heartbeat alive() still holds.
  explicit Health(Duration liveness_timeout);
  Health(const Health&) = delete;
  Health& operator=(const Health&) = delete;

  /// Events are attached (BPF, or the PSI/notification fallback), or no longer.
  void set_events_attached(bool attached);

  /// A fresh observation was evaluated. True the first time: readiness may
  /// have changed.
  bool observation_completed();

  /// Readiness also waits for the pod metadata source: `delivered` answers
  /// whether it has delivered a pod list yet (an empty function: no source,
  /// nothing to wait for). Called at every /readyz and scrape, from the
  /// server's thread: cheap, thread-safe, and alive as long as this object.
  void require_pod_source(std::function<bool()> delivered);

  /// The reactor is alive; called every loop iteration.
  void heartbeat();

  /// The pod source has delivered (true without one).
  bool pod_source_synced() const;

  /// /readyz: events attached, an observation evaluated, the pod source delivered.
  bool ready() const;

  /// /healthz: true unless heartbeats started and then stopped for longer
  /// than the liveness timeout.
  bool alive() const;

 private:
  const Duration liveness_timeout_;
  std::atomic<bool> events_attached_{false};
  std::atomic<bool> observed_once_{false};
  std::atomic<int64_t> last_heartbeat_ns_{0};
  mutable std::mutex pod_source_mu_;
  std::function<bool()> pod_source_delivered_;
};

}  // namespace pressured
