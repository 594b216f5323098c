#pragma once
// What a batch of kernel events asks of the daemon, decided without I/O:
// whether to decide now, what woke the decision and when the kernel saw it,
// and the facts to report (kernel OOM kills, ring-buffer losses, fired
// watches, PID alarm edges). Daemon::on_events reports and acts on it.

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "pressured/events.hpp"

namespace pressured {

struct EventTriage {
  /// A reason to evaluate now. Not one: a watch or alarm going back down,
  /// reclaim ends, a new cgroup, and (no eviction in flight) lifecycle
  /// events of cgroups that are not pods.
  bool decide = false;
  /// What woke the decision: the first edge's source, else the first
  /// relevant event's, else "event".
  std::string_view source = "event";
  /// Kernel time of the earliest edge (detection latency). Batched BPF
  /// records (reclaim begin, kswapd, memstall) are hints, not edges: timing
  /// decisions from them would measure the batching.
  std::optional<TimePoint> earliest_edge;
  /// Events were lost (a ring-buffer overflow): decide on a full observation,
  /// which also reads the kernel's OOM kill counters (a lost kill is counted).
  bool resync = false;
  std::vector<const PressureEvent*> oom_kills;   // OomVictim, MemoryEventOomKill
  std::vector<const PressureEvent*> pid_alarms;  // PidAlarmUp/Down
  std::vector<uint64_t> fired_watches;           // ThresholdUp watch ids
};

/// `busy`: an eviction is in flight (then every lifecycle event counts: the
/// victim's exit is seen at once). `is_pod_cgroup`: a cgroup id of the last
/// observation's pods. The result points into `events`.
EventTriage triage_events(std::span<const PressureEvent> events, bool busy,
                          const std::function<bool(uint64_t cgroup_id)>& is_pod_cgroup);

}  // namespace pressured
