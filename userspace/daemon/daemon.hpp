#pragma once
// The daemon's reactor handler: on every kernel event or tick it takes fresh
// observations, runs the engine and the eviction policy (include/pressured/
// policy.hpp: it holds every eviction decision and deadline), executes the
// policy's actions through the evictor, reports to metrics and the Kubernetes
// API, and checkpoints what must survive a restart. No I/O of its own beyond the injected seams, so tests drive it
// with a fake observer, a recording evictor and synthetic time.
// See docs/daemon.md.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "daemon/alarms.hpp"
#include "daemon/checkpoint.hpp"
#include "daemon/condition_publisher.hpp"
#include "daemon/disk_reclaim.hpp"
#include "pressured/config.hpp"
#include "pressured/engine.hpp"
#include "pressured/events.hpp"
#include "pressured/evictor.hpp"
#include "pressured/observer.hpp"
#include "pressured/policy.hpp"

namespace pressured {

class Metrics;
namespace k8s {
class Reporter;
}

/// Counters the tests and `demo` read (metrics get the same facts).
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


struct DaemonDeps {
  NodeObserver* observer = nullptr;  // required
  Evictor* evictor = nullptr;        // required: the real one (CgroupEvictor) or a recorder
  Metrics* metrics = nullptr;        // optional
  k8s::Reporter* reporter = nullptr;  // optional: Kubernetes reporting
  EventLoop* loop = nullptr;         // optional: deadlines, posted work, stop
  KernelAlarms* alarms = nullptr;    // optional: memory watches, PID alarm, memcg tracking
  std::string boot_id;               // for the checkpoint
  /// Where the writable layers are (node::detect_containerfs at start): the
  /// containerfs.* thresholds are derived for it from nodefs or imagefs.
  ContainerfsLayout containerfs_layout = ContainerfsLayout::Unknown;
  /// Re-reads the configuration on SIGHUP; an error keeps the old one.
  std::function<Result<Config>()> reload;
  /// Called for SIGTERM/SIGINT (default: loop->stop()).
  std::function<void()> on_stop;
};

class Daemon final : public ReactorHandler {
 public:
  Daemon(Config config, DaemonDeps deps);
  ~Daemon() override;

  /// Loads the checkpoint (if any) and restores the engine state and the
  /// pods being evicted. A corrupt or foreign-boot checkpoint is logged,
  /// counted and ignored.
  void restore_checkpoint();

  // ReactorHandler
  void on_events(std::span<const PressureEvent> events, TimePoint now) override;
  void on_tick(TimePoint now, bool safety_net) override;
  void on_signal(int signo) override;
  /// A soft threshold's grace period or a condition's pressure-transition
  /// period ended (Reactor::wake_at): evaluate now rather than at the next
  /// safety-net tick.
  void on_deadline(TimePoint now) override;
  /// When the next soft grace period ends (what wake_at was given); nullopt: none pending.
  std::optional<TimePoint> next_deadline() const { return next_deadline_; }

  /// One cycle: full observation, engine, actions, checkpoint.
  /// `kernel_time`: the event's kernel timestamp (detection latency).
  void evaluate(TimePoint now, std::string_view source, std::optional<TimePoint> kernel_time);
  /// evaluate(), deciding on a partial refresh of the last snapshot when that
  /// is enough (docs/observation.md, "Freshness of a decision").
  void evaluate_partial_ok(TimePoint now, std::string_view source, std::optional<TimePoint> kernel_time);

  /// Re-reads the configuration (SIGHUP). Returns false when rejected.
  bool reload();

  /// Writes the checkpoint now (also done after every change and at stop).
  void save_checkpoint();

  const DaemonStats& stats() const { return stats_; }
  const Checkpointer& checkpointer() const { return checkpointer_; }
  const Config& config() const { return config_; }
  const Engine& engine() const { return engine_; }
  const EvictionPolicy& policy() const { return policy_; }
  /// The last snapshot (for the demo's display).
  const NodeSnapshot& last_snapshot() const { return last_; }
  /// The last decisions (for the demo's display).
  const Decisions& last_decisions() const { return last_decisions_; }
  /// Moves the kernel alarms (memory watches, PID alarm) to where the current
  /// thresholds and the last snapshot put them (daemon/alarm_plan.hpp).
  void arm_watches();
  /// The armed PID alarm in tasks (0: none).
  uint64_t armed_pid_alarm() const { return alarms_.pid_alarm(); }
  /// The armed level per cgroup path (tests, diagnostics).
  std::map<std::string, uint64_t> armed_watch_levels() const { return alarms_.watch_levels(); }
  /// Memory cgroups whose reclaim activity the reactor accumulates, by cgroup
  /// id: kubepods, the QoS tiers and every pod of the last snapshot (path).
  /// Empty when the reactor cannot track (no BPF).
  const std::map<uint64_t, std::string>& tracked_memcgs() const { return alarms_.tracked(); }
  /// Whether an eviction is in flight (the daemon wants quick progress ticks).
  bool busy() const { return policy_.busy(); }
  /// Set by a bad `--dry-run` style toggle at reload: which evictor to use.
  void set_dry_run_evictor(Evictor* recorder) { dry_evictor_ = recorder; }

 private:
  /// Carries out what the policy decided (evictor, API, metrics, logs).
  void execute(const std::vector<PolicyAction>& actions, TimePoint now);
  void start(const PolicyAction& a);
  void kill_now(const Eviction& e, const char* why);
  void maybe_checkpoint(TimePoint now);
  Checkpointer make_checkpointer() const;
  /// Brings last_ up to date for a decision: a partial refresh
  /// (daemon/decision_view.hpp) for an event between full observations,
  /// else a full observation. False when nothing could be observed.
  bool observe_for_decision(TimePoint now, bool& full);
  /// Tracks kubepods, the tiers and the pods of last_ (untracks pods that left).
  void sync_tracked_memcgs();
  void arm_deadline(const Decisions& d, TimePoint now);
  /// Exports the tracked activity of kubepods and the tiers (metrics).
  void export_kubepods_activity(Metrics& m);
  void start_disk_reclaim();
  Evictor& evictor();

  Config config_;
  DaemonDeps deps_;
  Engine engine_;
  EvictionPolicy policy_;
  DaemonStats stats_;
  NodeSnapshot last_;
  Decisions last_decisions_;
  /// Whether `cgroup_id` is a pod cgroup of the last observation.
  bool is_pod_cgroup(uint64_t cgroup_id) const;
  Checkpointer checkpointer_;
  ConditionPublisher conditions_;
  AlarmReader alarm_reader_;
  ArmedAlarms alarms_;
  std::optional<TimePoint> next_deadline_;  // armed with Reactor::wake_at
  Evictor* dry_evictor_ = nullptr;
  bool partial_refresh_ok_ = false;  // the evaluation under way (event, safety-net tick, deadline) may decide on a partial refresh
  std::optional<TimePoint> last_full_observation_;  // when last_ was last observed in full
  // The policy holds disk evictions until the next evaluation after it ended.
  DiskReclaimRunner disk_reclaim_;
};

}  // namespace pressured
