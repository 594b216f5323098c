#pragma once
// The eviction engine: kubelet eviction semantics as a pure function of
// snapshots and time (shared/seeds/002). It does no I/O and reads no clock:
// the daemon and `simulate` feed it observations and the current time, and
// act on the decisions it returns.

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pressured/clock.hpp"
#include "pressured/config.hpp"
#include "pressured/snapshot.hpp"
#include "pressured/trend.hpp"

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
  // Predictive hard threshold (daemon.predictiveLead): met by the projection
  // only, not by the value: at `fall_rate` (bytes per second the signal falls)
  // it reaches the threshold in `seconds_to_threshold`, sooner than the lead.
  bool predicted = false;
  double fall_rate = 0;
  double seconds_to_threshold = 0;
};

struct ConditionChange {
  Condition condition;
  bool status;
};

/// The keys the ranking compares for one pod and one starved resource, in
/// the order it compares them (docs/engine.md, "Ranking"). Recorded for the
/// victim and the runner-up of every decision, so that one log line tells
/// why pod A went before pod B.
struct RankKeys {
  bool zero_usage = false;      // uses none of the starved resource: a last resort
  bool daemonset_last = false;  // a DaemonSet pod under `daemonSetPods: evictLast`
  QosClass qos = QosClass::BestEffort;
  bool over_request = false;  // usage above the request (a pod without a request is over it when it uses any)
  int32_t priority = 0;
  uint64_t usage = 0;    // working set, ephemeral storage, inodes or pids
  uint64_t request = 0;  // 0 for inodes and pids (Kubernetes has no such request)
  // `ranking: kubelet`: the keys are the kubelet's (over request, unless the
  // resource is pids; priority; usage - offset, larger first; uid), and
  // `offset` is what the kubelet subtracts from the usage in its last key:
  // the request, or for inodes the ephemeral-storage request (its quirk).
  bool kubelet = false;
  uint64_t offset = 0;
  // `ranking: kubelet`: no stats for the pod on this resource. The kubelet
  // evicts such a pod first: before any other key for memory and disk, after
  // priority for pids (its PID order has priority first: `pid_order`).
  bool no_stats = false;
  bool pid_order = false;
  /// The figure compared last, larger first: usage above the request when
  /// over it, the usage when within.
  uint64_t amount() const { return over_request ? usage - request : usage; }
  /// The kubelet's last key: usage - offset, negative below it (saturated to
  /// the int64 range; comparisons use the exact difference).
  int64_t kubelet_amount() const;
  bool operator==(const RankKeys&) const = default;
};

/// The key that put one pod before another: the first on which they differ.
enum class RankKey : uint8_t { ZeroUsage, DaemonSet, Qos, OverRequest, Priority, Amount, Uid, NoStats };
std::string_view name(RankKey key);
std::optional<RankKey> parse_rank_key(std::string_view text);

/// The runner-up of a decision: the pod that would have gone next.
struct RunnerUp {
  std::string uid;
  std::string name;
  std::string namespace_;  // name and namespace empty: the pod has no metadata
  RankKeys keys;
  bool operator==(const RunnerUp&) const = default;
};

/// Reclaim tried before an eviction (relief, include/pressured/relief.hpp):
/// what it asked for and what came back, for the eviction's messages and its
/// "why" record.
struct ReliefSummary {
  uint64_t id = 0;
  uint64_t asked_bytes = 0;
  uint64_t reclaimed_bytes = 0;
  double seconds = 0;
  bool operator==(const ReliefSummary&) const = default;
};

/// A plugin's part in a decision (docs/plugins.md): which plugin did what to
/// which pod, and why, as the plugin put it.
struct PluginNote {
  std::string plugin;
  std::string action;  // protect, demote, promote, propose, threshold, protect-overridden
  std::string pod;     // namespace/name, or <uid> without metadata
  std::string reason;
  bool operator==(const PluginNote&) const = default;
};

/// One pod to evict, and why. The engine fills in who and why; the policy
/// numbers and times it when it starts the eviction. The same value goes to
/// the evictor (EvictionTarget is built from it), the API reporter, the
/// checkpoint, metrics and logs.
/// A container of the victim as the kubelet's eviction message weighs it:
/// its own usage of the starved resource (memory: its cgroup's working set;
/// ephemeral storage: its writable layer plus its logs) and its own request.
struct ContainerUsage {
  std::string name;
  uint64_t usage = 0;
  uint64_t request = 0;
  // Memory only (ContainerMemory): the usage at the reading before and how
  // long before (growth), and the container's own memory stall time (v2).
  std::optional<uint64_t> previous_usage;
  std::optional<double> previous_age_seconds;
  std::optional<PsiStats> memory_pressure;
  bool operator==(const ContainerUsage&) const = default;
};

/// Which of the victim's containers grew (docs/observation.md, "Per
/// container"): the one that grew most since the reading before, when the
/// containers were read before; else the one furthest over its request.
struct ContainerGrowth {
  enum class Basis : uint8_t { Growth, OverRequest };
  std::string name;
  Basis basis = Basis::Growth;
  uint64_t usage = 0;
  uint64_t request = 0;
  int64_t bytes = 0;     // Growth: usage - previous; OverRequest: usage - request
  double seconds = 0;    // Growth: over how long
  bool operator==(const ContainerGrowth&) const = default;
};

struct Eviction {
  std::string id;  // set by the policy when the eviction starts (logs, Events)
  std::string uid;
  std::string name;
  std::string namespace_;
  std::string cgroup_path;
  QosClass qos = QosClass::BestEffort;
  bool static_pod = false;
  bool metadata_known = false;  // name and namespace come from the API: it can be told
  Signal signal = Signal::MemoryAvailable;
  ThresholdKind kind = ThresholdKind::Hard;
  double observed = 0;
  double threshold_value = 0;
  int64_t grace_period_seconds = 0;
  bool signal_stale = false;        // the deciding observation was stale
  uint64_t usage_at_decision = 0;   // the pod's usage of the starved resource (release floor)
  TimePoint decided_at{};           // set by the policy
  RankKeys keys;                     // the victim's ranking keys at the decision
  std::optional<RunnerUp> runner_up;  // nullopt: the victim was the only candidate
  // Set by the daemon: what woke the evaluation that decided ("psi",
  // "poll", ...) and how long after the kernel's event it decided (nullopt:
  // no kernel event, e.g. a poll). For the operator's messages only.
  std::string wake_source;
  std::optional<double> detection_latency_seconds;
  // A local ephemeral-storage limit decided this eviction instead of a node
  // threshold (docs/engine.md, "Local ephemeral-storage limits"): the rule's
  // name ("emptydirfs.limit", "ephemeralpodfs.limit",
  // "ephemeralcontainerfs.limit") and the kubelet's sentence naming the
  // volume or container. `signal` is then nodefs.available (the disk lane;
  // the release is judged on ephemeral storage), `observed` the usage and
  // `threshold_value` the limit. Empty for node-threshold evictions.
  std::string local_storage_rule;
  std::string local_storage_message;
  // Set when reclaim was tried for this threshold crossing and the node
  // stayed short (docs/engine.md, "Relief before eviction").
  std::optional<ReliefSummary> relief;
  // Plugins (docs/plugins.md): what they changed in this decision, and the
  // plugin threshold that decided it ("plugin/signal"; empty: a node
  // threshold or a local-storage limit decided).
  std::vector<PluginNote> plugin_notes;
  std::string plugin_signal;
  // A predictive hard threshold decided (the signal was still above it): the
  // projection in words, for the eviction's "why". Empty otherwise.
  std::string prediction;
  // The victim's containers, each measured on its own (memory and ephemeral
  // storage only; empty when none could be): the kubelet names those over
  // their request (offending_containers). Memory readings are added by the
  // daemon when the eviction can start (a read of each container's cgroup).
  std::vector<ContainerUsage> containers;
  // Memory evictions of a pod with a pod-level memory request
  // (PodLevelResources): that request, for the kubelet's "Pod X was using"
  // sentence and offending_pod annotations.
  std::optional<uint64_t> pod_level_request;
  // Memory evictions: the container of the victim that grew (with
  // `containers`), and the victim pod's own memory stall time (v2) at the
  // decision: who was hurt as well as who is evicted.
  std::optional<ContainerGrowth> grew;
  std::optional<PsiStats> memory_pressure;
  bool operator==(const Eviction&) const = default;
};

/// Each container of `pod`'s spec that has a reading, with its usage and
/// request of `resource` (the kubelet's evictionMessage accounting): memory
/// from `memory` (matched by runtime id), ephemeral storage from the pod's
/// storage breakdown (writable layer by id plus logs by name, both needed).
/// Pure.
std::vector<ContainerUsage> container_usage(const Pod& pod, StarvedResource resource,
                                            const std::vector<ContainerMemory>& memory = {});

/// What decided an eviction, for logs, metrics and records: the local-storage
/// rule or the plugin threshold when one did, else the signal's name.
std::string_view eviction_reason(const Eviction& e);

/// Sets who `e` evicts: `p`'s identity as the policy, the evictor and the
/// messages need it (uid, name, namespace, QoS, static, metadata, cgroup).
void set_victim_identity(Eviction& e, const Pod& p);

struct Decisions {
  std::array<bool, kConditionCount> conditions{};  // node conditions after this evaluation
  std::vector<ConditionChange> changes;            // flips since the previous evaluation
  std::vector<ThresholdStatus> thresholds;         // every configured threshold
  /// What the engine would evict: at most one pod per lane of resources
  /// (memory, disk, pids), most urgent first. Nothing is committed: the
  /// policy decides what to act on and passes back what is terminating.
  std::vector<Eviction> candidates;
  std::optional<Eviction> eviction;  // the most urgent candidate (candidates.front())
  std::vector<Signal> no_candidates;               // signals that wanted a victim and found none
};

/// The engine's memory between evaluations; checkpointed by the daemon so a
/// restart neither resets soft grace periods nor flips conditions nor evicts twice.
/// A threshold's identity across configuration changes: its signal and kind
/// (a configuration has at most one threshold of each).
struct ThresholdKey {
  Signal signal = Signal::MemoryAvailable;
  ThresholdKind kind = ThresholdKind::Hard;
  auto operator<=>(const ThresholdKey&) const = default;
};

struct EngineState {
  // Threshold -> when it was first observed met.
  std::map<ThresholdKey, TimePoint> threshold_first_observed;
  // Threshold -> met (for min-reclaim hysteresis).
  std::map<ThresholdKey, bool> threshold_met;
  std::array<bool, kConditionCount> conditions{};
  std::array<std::optional<TimePoint>, kConditionCount> condition_last_met{};
  bool operator==(const EngineState&) const = default;
};

/// Pods at or above this priority are critical and never evicted (the
/// kubelet's system-cluster-critical / system-node-critical classes).
inline constexpr int32_t kCriticalPodPriority = 2000000000;

/// True when `pod` may never be evicted: critical, static/mirror, or a
/// DaemonSet pod under `daemonSetPods: never`.
bool never_evicted(const Pod& pod, const EvictionConfig& config);

/// never_evicted, or the pod's requests and limits of `resource` are unknown
/// (its source could not read those quantities): the kubelet could not rank
/// it for that resource, so it is left out of that ranking only.
bool never_evicted_for(const Pod& pod, StarvedResource resource, const EvictionConfig& config);

/// The pod's usage of a starved resource (working set, ephemeral storage,
/// inodes, pids) and its request for it (0 when it has none: inodes, pids).
uint64_t pod_usage(const Pod& pod, StarvedResource resource);
uint64_t pod_request(const Pod& pod, StarvedResource resource);

/// Grace period for evicting `pod` for a threshold of `kind`: 0 for hard; for
/// soft, the current kubelet's (1.32+): min(evictionMaxPodGracePeriod,
/// terminationGracePeriodSeconds), where a result of 0 means the pod's own
/// terminationGracePeriodSeconds and anything below 1 means 1 s; then at most
/// softEvictionGraceCeilingSeconds when that is above 0.
int64_t eviction_grace_period(const Pod& pod, ThresholdKind kind, const EvictionConfig& config);

/// The ranking keys of `pod` for `resource` under `config` (pure). A caller
/// that compares one pod many times, or at several usages, builds them once,
/// moves them with rank::with_usage and compares them with rank::evict_before
/// (userspace/engine/rank_order.hpp).
RankKeys rank_keys(const Pod& pod, StarvedResource resource, const EvictionConfig& config);

/// The key that ranks a pod with `victim` keys before one with `runner_up`
/// keys: the first key, in ranking order, on which they differ (Uid when
/// every key is equal and the uid order decided).
RankKey deciding_key(const RankKeys& victim, const RankKeys& runner_up);

/// The words of an eviction (describe_keys, explain_choice, the message,
/// the log line) are built in engine/eviction_words.hpp.

/// Threshold indexes of `thresholds` in the order the engine acts on them:
/// memory first (the kubelet's byEvictionPriority), hard before soft, then
/// signal order, then configuration order.
std::vector<std::size_t> threshold_eviction_order(const std::vector<Threshold>& thresholds);

/// Ranking and decisions per the kubelet's eviction policy, see docs/engine.md.
class Engine {
 public:
  /// An engine with a configuration of its own (simulate, top, tests).
  explicit Engine(EvictionConfig config);
  /// The daemon's: reads the eviction section of the configuration in force;
  /// a reload (LiveConfig::replace) applies from the next evaluate(), and the
  /// state of thresholds that are gone is dropped then.
  explicit Engine(std::shared_ptr<const LiveConfig> config);

  /// Evaluates every threshold against `snapshot` at time `now` and returns the
  /// node conditions and the pods it would evict (one per lane), leaving out
  /// `excluded` (pods being evicted: EvictionPolicy::excluded()). Commits
  /// nothing about pods. `now` must not go backwards.
  Decisions evaluate(const NodeSnapshot& snapshot, TimePoint now, const std::vector<std::string>& excluded = {});

  const EvictionConfig& config() const { return live_->get().eviction; }

  /// Gives the engine a configuration of its own in place of the one it
  /// read (simulate's events). State for thresholds that still exist (same
  /// signal and kind) is kept.
  void reconfigure(EvictionConfig config);

  /// The engine's memory (checkpointed by the daemon); valid until the next
  /// evaluate(), restore() or reconfigure().
  const EngineState& state() const { return state_; }
  /// Takes a checkpointed state; thresholds that are no longer configured
  /// (by signal and kind) are dropped. Returns how many entries were dropped.
  std::size_t restore(EngineState state);

 private:
  void compute_eviction_order();
  void drop_unconfigured(EngineState& state) const;
  /// Re-derives what comes from the configuration when it was replaced.
  void follow();

  /// Predictive hard threshold: feeds the memory signals' trends and marks
  /// `st` met when the projection reaches its threshold within the lead.
  void predict(const NodeSnapshot& snapshot, TimePoint now, ThresholdStatus& st);

  std::shared_ptr<const LiveConfig> live_;
  uint64_t generation_ = 0;  // of live_ when last derived
  EngineState state_;
  // The memory signals' recent observations (predictive threshold only). Not
  // checkpointed: a restart measures the rate again from two observations.
  SignalTrend memory_trend_, allocatable_trend_;
  std::vector<std::size_t> eviction_order_;  // threshold indexes, most urgent first
};

/// True when `a`, using `a_usage` of the starved resource, comes before `b`,
/// using `b_usage`, in the eviction ranking for `resource` (the order
/// rank_pods sorts by with pod_usage(); eligibility is not checked). A pod's
/// place only improves as its usage grows: ranked at an upper bound of its
/// usage it sorts no later than at its real usage, which lets a caller find
/// the ranking's head while reading only the pods that may be there.
bool evicted_before(const Pod& a, uint64_t a_usage, const Pod& b, uint64_t b_usage, StarvedResource resource,
                    const EvictionConfig& config);

/// Orders candidate pods for a starved resource, first to evict first. Pods
/// that may never be evicted (critical, static/mirror, DaemonSet under
/// `never`) and terminating pods are left out. Exposed for `top` and tests.
std::vector<const Pod*> rank_pods(const std::vector<Pod>& pods, StarvedResource resource,
                                  const EvictionConfig& config,
                                  const std::vector<std::string>& terminating = {});

/// The usage that ranks `pod` for `signal` on a node with `layout`: the
/// starved resource's usage (pod_usage), except for containerfs.* where the
/// containerfs is not nodefs (imagefs or separate layouts): there only the
/// writable layers are on it, so they alone count (the kubelet's rootfs
/// ranking; docs/engine.md, "containerfs").
uint64_t pod_usage(const Pod& pod, Signal signal, ContainerfsLayout layout);

/// rank_keys() with the usage pod_usage(pod, signal, layout) gives.
RankKeys rank_keys(const Pod& pod, Signal signal, ContainerfsLayout layout, const EvictionConfig& config);

/// The kubelet's containerfs thresholds for `layout` (UpdateContainerFsThresholds,
/// docs/engine.md "containerfs derivation rule"): every containerfs.* threshold
/// in `thresholds` is dropped, then each nodefs.* (single, split and
/// separate layouts) or imagefs.* (imagefs layout) threshold is copied to the
/// matching containerfs.* signal with its kind, value, grace period and
/// minimum reclaim. An unknown layout derives none.
std::vector<Threshold> with_containerfs_thresholds(std::vector<Threshold> thresholds, ContainerfsLayout layout);

}  // namespace pressured
