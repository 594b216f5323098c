#pragma once
// Evictor: the side effect at the end of the data flow (STYLE.md: kernel
// event -> reactor -> snapshot -> engine -> decisions -> evictor/reporters).
// A seam so tests and `--dry-run` can record instead of kill. The real
// implementation (userspace/evict/cgroup_evictor.cpp) signals through pidfds,
// freezes on v1, uses cgroup.kill on v2, and refuses anything outside its
// configured pods root. See docs/daemon.md.

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "pressured/clock.hpp"
#include "pressured/result.hpp"

namespace pressured {

/// The pod to stop: its cgroup (memory hierarchy, absolute path) and who it is.
struct EvictionTarget {
  std::string uid;
  std::string name;        // for logs; may be empty when metadata is unknown
  std::string namespace_;  // for logs; may be empty
  std::string cgroup_path;
  Duration grace_period{0};  // SIGTERM -> SIGKILL delay; 0: kill at once
};

/// What one step of an eviction did. Counts feed metrics and logs.
struct KillReport {
  std::size_t signalled = 0;         // processes signalled in this step
  std::size_t skipped_unsafe = 0;    // pid 1, the daemon itself, kernel threads: never signalled
  std::size_t vanished = 0;          // processes gone between listing and signalling
  bool used_cgroup_kill = false;     // v2 cgroup.kill wrote the final kill
  bool froze = false;                // v1 freezer held the pod during the kill
  bool empty = false;                // the pod cgroup has no process left (or is gone)
  bool cgroup_vanished = false;      // the pod cgroup disappeared
  std::size_t memory_released = 0;   // killed processes whose memory process_mrelease(2) reaped
  bool release_unsupported = false;  // the kernel has no process_mrelease(2) (ENOSYS): off from now on
};

class Evictor {
 public:
  virtual ~Evictor() = default;

  /// Checks `target` may be touched at all (inside the pods root, no escape
  /// through `..` or symlinks). Every other method checks it too; exposed so
  /// the daemon can refuse a decision before logging it as an eviction.
  virtual Result<void> validate(const EvictionTarget& target) const = 0;

  /// Graceful step: SIGTERM to every process of the pod's cgroup tree, so
  /// the workload can shut down within its grace period.
  virtual Result<KillReport> terminate(const EvictionTarget& target) = 0;

  /// Final step: SIGKILL to everything left (v1: while frozen, so nothing can
  /// fork; v2: cgroup.kill when the kernel has it), then waits, bounded, for
  /// the cgroup to become empty.
  virtual Result<KillReport> kill(const EvictionTarget& target) = 0;

  /// True when the pod's cgroup tree holds no process (or no longer exists):
  /// the pod is gone and its memory is being returned.
  virtual Result<bool> is_empty(const EvictionTarget& target) const = 0;
};

/// One recorded call on a RecordingEvictor.
struct RecordedKill {
  std::string step;  // "terminate" or "kill"
  EvictionTarget target;
};

/// The dry-run evictor: validates and records, signals nothing. Pods are
/// reported "empty" only after `kill` was recorded, so the daemon's state
/// machine runs end to end.
class RecordingEvictor final : public Evictor {
 public:
  Result<void> validate(const EvictionTarget&) const override { return {}; }
  Result<KillReport> terminate(const EvictionTarget& target) override {
    calls_.push_back({"terminate", target});
    return KillReport{};
  }
  Result<KillReport> kill(const EvictionTarget& target) override {
    calls_.push_back({"kill", target});
    KillReport r;
    r.empty = true;
    return r;
  }
  Result<bool> is_empty(const EvictionTarget& target) const override {
    for (const auto& c : calls_) {
      if (c.step == "kill" && c.target.cgroup_path == target.cgroup_path) return true;
    }
    return false;
  }
  /// Every call so far, in order.
  const std::vector<RecordedKill>& calls() const { return calls_; }

 private:
  std::vector<RecordedKill> calls_;
};

}  // namespace pressured
