#pragma once
// The daemon's own counters (tests and `demo` read them; metrics get the same
// facts through Metrics).

#include <atomic>
#include <cstdint>

namespace pressured {

struct DaemonStats {
  std::atomic<uint64_t> evaluations{0};
  std::atomic<uint64_t> evictions_started{0};
  std::atomic<uint64_t> evictions_completed{0};    // pod empty
  std::atomic<uint64_t> evictions_failed{0};       // kill errors, refused targets
  std::atomic<uint64_t> refused_targets{0};        // outside the pods root
  std::atomic<uint64_t> sigkills{0};               // final kills sent after the grace period
  std::atomic<uint64_t> release_timeouts{0};       // memory not back within release_wait_timeout
  std::atomic<uint64_t> decisions_deferred{0};     // a decision while an eviction was in flight
  std::atomic<uint64_t> victim_exited_early{0};    // gone before our SIGKILL
  std::atomic<uint64_t> cgroup_vanished{0};
  std::atomic<uint64_t> reloads_ok{0};
  std::atomic<uint64_t> reloads_failed{0};
  std::atomic<uint64_t> checkpoint_corrupt{0};
  std::atomic<uint64_t> checkpoint_restored{0};
  std::atomic<uint64_t> observe_failures{0};
  std::atomic<uint64_t> kernel_oom_kills{0};
  std::atomic<uint64_t> disk_reclaims{0};
  std::atomic<uint64_t> escalations{0};          // soft victims killed at once for a hard threshold
  std::atomic<uint64_t> stuck_evictions{0};      // killed, never emptied: stopped blocking
  std::atomic<uint64_t> expired_evictions{0};    // restored records too old to resume
  std::atomic<uint64_t> checkpoint_dropped_thresholds{0};  // restored state of thresholds no longer configured
  std::atomic<uint64_t> full_observations{0};         // evaluations on a full observation
  std::atomic<uint64_t> incremental_evaluations{0};   // event-driven evaluations on a partial refresh
};


}  // namespace pressured
