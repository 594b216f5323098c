#pragma once
// The two ends of the kernel alarms around the pure planner
// (daemon/alarm_plan.hpp): AlarmReader turns the observer's page-counter
// reads into the readings a plan needs, ArmedAlarms carries a plan out
// through the KernelAlarms, changing only what moved, and remembers what is
// armed.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "daemon/alarm_plan.hpp"
#include "pressured/events.hpp"
#include "pressured/observer.hpp"

namespace pressured {

class AlarmReader {
 public:
  /// The usage of kubepods and of the node scope, from `counters` (read just
  /// now through the observer) and, at a hierarchy root, the page counter the
  /// BPF charge hook last saw there.
  AlarmReadings read(const MemcgCounters& counters, const KernelAlarms& alarms);
  /// The observer's kubepods and QoS tiers, as cgroups to track.
  static std::vector<AlarmCgroup> scopes(const std::vector<MemcgScope>& scopes);

 private:
  // At a hierarchy root: page counter - children's sum, last seen by BPF (what
  // dying cgroups hold).
  int64_t root_counter_offset_ = 0;
};

class ArmedAlarms {
 public:
  explicit ArmedAlarms(KernelAlarms* alarms) : alarms_(alarms) {}

  /// Moves the memory watches and the PID alarm to the plan: a watch is
  /// re-armed only when its level moves past the plan's hysteresis (so its
  /// up/down state survives evaluations), or when it fired since it was armed.
  void apply(const AlarmPlan& plan);
  /// Tracks what `want` lists and untracks the rest. Once the reactor says it
  /// cannot track (no BPF), it is not asked again.
  void apply_tracking(const std::map<uint64_t, AlarmCgroup>& want);
  /// Clears every memory watch and asks for the PID alarm again at the next
  /// apply (a reload: the thresholds changed).
  void clear_watches();
  /// An up edge of the watch `id` came.
  void watch_fired(WatchId id);

  /// The armed level per cgroup path (usage file).
  std::map<std::string, uint64_t> watch_levels() const;
  /// The armed PID alarm in tasks (0: none).
  uint64_t pid_alarm() const { return pid_alarm_; }
  /// Tracked memory cgroups: id -> path.
  const std::map<uint64_t, std::string>& tracked() const { return tracked_; }
  /// The kubepods/tier subset of tracked(): id -> metrics label.
  const std::map<uint64_t, std::string>& tracked_scopes() const { return tracked_scopes_; }
  bool tracking_supported() const { return !tracking_unsupported_; }

 private:
  void apply_pid_alarm(uint64_t want);

  struct Armed {
    WatchId id = 0;
    WatchLevels level;
    bool fired = false;  // an up edge came since it was armed: re-arm at the next evaluation
  };
  KernelAlarms* alarms_;
  std::map<std::string, Armed> armed_;
  uint64_t pid_alarm_ = 0;
  bool pid_alarm_unsupported_ = false;
  std::map<uint64_t, std::string> tracked_;
  std::map<uint64_t, std::string> tracked_scopes_;
  bool tracking_unsupported_ = false;
};

}  // namespace pressured
