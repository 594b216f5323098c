#pragma once
// Where the kernel alarms should sit, as a pure function of the thresholds, the
// last snapshot and a few usage reads: the memory watch levels per cgroup, the
// PID alarm and the memory cgroups whose reclaim activity is tracked. The
// reads come through the observer (AlarmReader) and the plan is carried out by ArmedAlarms
// (daemon/alarms.hpp); this file does no I/O, so every level can be checked
// with numbers alone (tests/daemon/alarm_plan_test.cpp).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pressured/config.hpp"
#include "pressured/engine.hpp"
#include "pressured/snapshot.hpp"

namespace pressured {

/// One memory cgroup the reactor should watch, tracked or not.
struct AlarmCgroup {
  uint64_t id = 0;
  std::string path;
  std::string scope;  // metrics label (kubepods, burstable, besteffort); empty for a pod
};

/// The reads a plan needs beyond the snapshot, taken just before planning.
struct AlarmReadings {
  std::string kubepods_path;  // the kubepods memory cgroup; empty: none
  /// Its page-counter usage (v2 memory.current, v1 memory.usage_in_bytes).
  std::optional<uint64_t> kubepods_usage;
  /// The node scope: the cgroup holding kubepods (the hierarchy root on a real
  /// node, the sandbox root in tests and the demo). Memory charged anywhere
  /// below it moves its page counter. Empty: none.
  std::string scope_path;
  /// Its usage file (at a v1 hierarchy root: computed from statistics).
  std::optional<uint64_t> scope_file_usage;
  /// Its page counter (at a hierarchy root: the children's sum plus what dying
  /// cgroups hold, as last seen by BPF).
  std::optional<uint64_t> scope_counter_usage;
};

/// The two levels of one memory watch: the v1 eventfd compares with the usage
/// file, the BPF charge hook with the page counter (Reactor::set_watch_levels).
struct WatchLevels {
  uint64_t file = 0;
  uint64_t counter = 0;
  bool operator==(const WatchLevels&) const = default;
};

struct AlarmPlan {
  /// False when a watched memory signal's read failed: keep the watches as
  /// they are (`watches` is then empty and means nothing).
  bool watches_known = true;
  /// The lowest level per cgroup: the crossing that comes first. A threshold
  /// already met gets none (the evaluation under way acts on it).
  std::map<std::string, WatchLevels> watches;
  /// How far a level must move before its watch is re-armed (watch_hysteresis).
  uint64_t hysteresis = 0;
  /// The PID alarm in tasks (0: none); nullopt when pid.available failed to
  /// read: keep the alarm as it is.
  std::optional<uint64_t> pid_alarm;
};

/// max(8 MiB, 1% of capacity): how far an alarm level must move to be re-armed.
uint64_t watch_hysteresis(double capacity_bytes);

/// memory.available and allocatableMemory.available thresholds become usage
/// levels (the root memcg's page counter is not charged on v2, so a watch on
/// it would never fire): level = usage now + (available now - threshold), on
/// kubepods, and for memory.available on the node scope too. pid.available
/// thresholds become the task count at which the lowest one is met.
/// With a predictive lead (daemon.predictiveLead), a hard memory threshold's
/// watch sits half way to its level (no nearer than the hysteresis): a fast
/// fall wakes the engine a few times on its way down, which gives it the
/// observations its projection needs, while a node at rest is never woken.
AlarmPlan plan_alarms(const std::vector<Threshold>& thresholds, const NodeSnapshot& snapshot,
                      const AlarmReadings& readings, Duration predictive_lead = Duration::zero());

/// Memory cgroups to track for reclaim activity, by cgroup id: `scopes`
/// (kubepods and its QoS tiers) and every pod of the snapshot with a known cgroup.
std::map<uint64_t, AlarmCgroup> plan_tracking(const std::vector<AlarmCgroup>& scopes, const NodeSnapshot& snapshot);

/// When the engine wants the next evaluation whatever the kernel reports
/// (1 ms past each end: the engine compares "for the whole period"): a met
/// soft threshold's grace end, and a condition no longer met going back to
/// False once `pressure_transition_period` has passed since it was last met.
/// nullopt: none.
std::optional<TimePoint> engine_wake(const Decisions& d, const EngineState& state,
                                     Duration pressure_transition_period, TimePoint now);

}  // namespace pressured
