#pragma once
// The eviction engine: kubelet eviction semantics as a pure function of
// snapshots and time (shared/seeds/002). It does no I/O and reads no clock:
// the daemon and `simulate` feed it observations and the current time, and
// act on the decisions it returns.

#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pressured/clock.hpp"
#include "pressured/config.hpp"
#include "pressured/snapshot.hpp"

namespace pressured {

/// Where one threshold stands at one evaluation.
struct ThresholdStatus {
  Threshold threshold;
  double observed = 0;         // the signal's value
  double threshold_value = 0;  // the threshold in base units (percent resolved)
  bool met = false;            // met now, min-reclaim hysteresis included
  bool grace_elapsed = false;  // hard: == met; soft: met for its whole grace period
  std::optional<TimePoint> first_observed;  // when it started being met
  bool signal_observed = false;  // false: the signal is not observed, so the threshold cannot be met
  bool stale = false;            // the observation is stale (last good value); still evaluated
};

struct ConditionChange {
  Condition condition;
  bool status;
};

/// One pod to evict, and why.
struct EvictionDecision {
  std::string uid;
  std::string name;
  std::string namespace_;
  QosClass qos = QosClass::BestEffort;
  Signal signal = Signal::MemoryAvailable;
  ThresholdKind kind = ThresholdKind::Hard;
  double observed = 0;
  double threshold_value = 0;
  int64_t grace_period_seconds = 0;
  std::string cgroup_path;
  bool signal_stale = false;  // the deciding observation was stale
};

struct Decisions {
  std::array<bool, kConditionCount> conditions{};  // node conditions after this evaluation
  std::vector<ConditionChange> changes;            // flips since the previous evaluation
  std::vector<ThresholdStatus> thresholds;         // every configured threshold
  std::optional<EvictionDecision> eviction;        // at most one per evaluation
  std::vector<Signal> no_candidates;               // signals that wanted a victim and found none
};

/// The engine's memory between evaluations; checkpointed by the daemon so a
/// restart neither resets soft grace periods nor flips conditions nor evicts twice.
struct EngineState {
  // Index into EvictionConfig::thresholds -> when it was first observed met.
  std::map<std::size_t, TimePoint> threshold_first_observed;
  // Index into EvictionConfig::thresholds -> met (for min-reclaim hysteresis).
  std::map<std::size_t, bool> threshold_met;
  std::array<bool, kConditionCount> conditions{};
  std::array<std::optional<TimePoint>, kConditionCount> condition_last_met{};
  std::vector<std::string> terminating_pods;  // uids evicted and not yet gone
};

/// Pods at or above this priority are critical and never evicted (the
/// kubelet's system-cluster-critical / system-node-critical classes).
inline constexpr int32_t kCriticalPodPriority = 2000000000;

/// True when `pod` may never be evicted: critical, static/mirror, or a
/// DaemonSet pod under `daemonSetPods: never`.
bool never_evicted(const Pod& pod, const EvictionConfig& config);

/// The pod's usage of a starved resource (working set, ephemeral storage,
/// inodes, pids) and its request for it (0 when it has none: inodes, pids).
uint64_t pod_usage(const Pod& pod, StarvedResource resource);
uint64_t pod_request(const Pod& pod, StarvedResource resource);

/// Grace period for evicting `pod` for a threshold of `kind`: 0 for hard; for
/// soft, the pod's terminationGracePeriodSeconds capped by
/// evictionMaxPodGracePeriod when that is above 0.
int64_t eviction_grace_period(const Pod& pod, ThresholdKind kind, const EvictionConfig& config);

/// Ranking and decisions per the kubelet's eviction policy, see docs/engine.md.
class Engine {
 public:
  explicit Engine(EvictionConfig config);

  /// Evaluates every threshold against `snapshot` at time `now` and returns the
  /// node conditions and at most one eviction. `now` must not go backwards.
  Decisions evaluate(const NodeSnapshot& snapshot, TimePoint now);

  /// The pod is gone (its cgroup was removed or the API deleted it): it is no
  /// longer terminating and its uid may be forgotten.
  void pod_gone(const std::string& uid);

  /// Pods evicted and not yet reported gone.
  const std::vector<std::string>& terminating() const { return state_.terminating_pods; }

  const EvictionConfig& config() const { return config_; }

  /// Replaces the configuration (SIGHUP). State for thresholds that still
  /// exist (same signal and kind) is kept.
  void reconfigure(EvictionConfig config);

  /// The engine's memory (checkpointed by the daemon); valid until the next
  /// evaluate(), restore() or reconfigure().
  const EngineState& state() const { return state_; }
  void restore(EngineState state) { state_ = std::move(state); }

 private:
  bool is_terminating(const std::string& uid) const;
  void compute_eviction_order();

  EvictionConfig config_;
  EngineState state_;
  std::vector<std::size_t> eviction_order_;  // threshold indexes, most urgent first
};

/// Orders candidate pods for a starved resource, first to evict first. Pods
/// that may never be evicted (critical, static/mirror, DaemonSet under
/// `never`) and terminating pods are left out. Exposed for `top` and tests.
std::vector<const Pod*> rank_pods(const std::vector<Pod>& pods, StarvedResource resource,
                                  const EvictionConfig& config,
                                  const std::vector<std::string>& terminating = {});

}  // namespace pressured
