#pragma once
// NodeSnapshot: what the engine is given to decide on. Produced by the
// observation layer (userspace/cgroup, node, pods) from fresh kernel reads, or
// by `simulate` from a timeline. Plain values; no I/O.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pressured/clock.hpp"
#include "pressured/signals.hpp"

namespace pressured {

/// One signal's observed value. For "<" signals `value` is what is available
/// (bytes, inodes, pids) and `capacity` the total; for PSI signals `value` is
/// the stall percentage (0-100) and capacity is 100.
struct SignalObservation {
  double value = 0;
  double capacity = 0;
  TimePoint observed_at{};
  bool stale = false;  // the read failed; the value is the last good one
};

/// Per-signal observations; nullopt when the signal is not observed at all on
/// this node (no imagefs, no PSI, ...).
using SignalSet = std::array<std::optional<SignalObservation>, kSignalCount>;

struct PodResources {
  uint64_t memory_bytes = 0;
  uint64_t ephemeral_storage_bytes = 0;
  bool operator==(const PodResources&) const = default;
};

struct PodUsage {
  uint64_t memory_working_set_bytes = 0;  // usage - inactive_file
  uint64_t memory_rss_bytes = 0;
  uint64_t memory_cache_bytes = 0;
  uint64_t ephemeral_storage_bytes = 0;   // logs + emptyDir + writable layers
  uint64_t inodes = 0;
  uint64_t pids = 0;
  bool operator==(const PodUsage&) const = default;
};

struct Pod {
  std::string uid;
  std::string name;        // empty when metadata is unknown
  std::string namespace_;  // empty when metadata is unknown
  QosClass qos = QosClass::BestEffort;
  int32_t priority = 0;
  bool critical = false;    // priority >= 2000000000 or a critical annotation
  bool static_pod = false;  // static or mirror pod: never evicted
  bool daemonset = false;   // owned by a DaemonSet
  int64_t termination_grace_period_seconds = 30;
  PodResources requests;
  PodResources limits;
  PodUsage usage;
  bool metadata_known = false;  // false: known from cgroups only
  bool stale = false;           // a usage read failed
  std::string cgroup_path;      // absolute path of the pod cgroup (memory hierarchy)
  uint64_t cgroup_id = 0;       // kernfs inode id, as BPF sees it
};

struct NodeSnapshot {
  TimePoint taken_at{};
  SignalSet signals{};
  std::vector<Pod> pods;

  const std::optional<SignalObservation>& signal(Signal s) const { return signals[static_cast<std::size_t>(s)]; }
  std::optional<SignalObservation>& signal(Signal s) { return signals[static_cast<std::size_t>(s)]; }
};

}  // namespace pressured
