#pragma once
// The daemon's cycle, run by the event loop on every kernel event, tick and
// deadline: observe (the observer, or a partial refresh), decide (the engine),
// act (the eviction policy, carried out by the EvictionExecutor), publish
// (metrics, the ConditionPublisher), persist (the Checkpointer) and re-arm
// (plan_alarms, applied through ArmedAlarms; the deadline). Its I/O goes
// through the injected seams, so tests drive it with a fake observer, a
// recording evictor, fake alarms and synthetic time. See docs/daemon.md and
// docs/architecture.md.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/alarms.hpp"
#include "daemon/api_inbox.hpp"
#include "daemon/checkpoint.hpp"
#include "daemon/condition_publisher.hpp"
#include "daemon/eviction_executor.hpp"
#include "daemon/oom_kill_ledger.hpp"
#include "daemon/plugin_stage.hpp"
#include "daemon/relief_driver.hpp"
#include "pressured/config.hpp"
#include "pressured/engine.hpp"
#include "pressured/events.hpp"
#include "pressured/evictor.hpp"
#include "pressured/metrics.hpp"
#include "pressured/observer.hpp"
#include "pressured/policy.hpp"

namespace pressured {

class Metrics;
namespace k8s {
class Reporter;
}

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
  /// Relief (reclaim before memory evictions): the memory.reclaim writer;
  /// null when the kernel cannot (cgroup v1, no memory.reclaim), which
  /// `reclaim_unavailable` says in words for the log.
  ReclaimWriter* reclaim = nullptr;
  std::string reclaim_unavailable = "not configured";
  /// Eviction plugins (plugins.directory set): the host that asks them off
  /// the loop's thread; null: no plugins, nothing of them runs.
  plugins::PluginHost* plugins = nullptr;
  /// Called when busy() changes (an eviction started or the last one ended,
  /// also by a restored checkpoint): the progress ticks run only while busy.
  std::function<void(bool busy)> on_busy_changed;
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
  /// What an evaluation may re-read, by what woke it: a kernel event, a
  /// safety-net tick, a deadline or an API answer may decide on a partial
  /// refresh of the last snapshot when that is enough (docs/observation.md,
  /// "Freshness of a decision"), and so may a progress tick while an
  /// eviction is in flight; the poll mode, start-up and tests observe in full.
  enum class Observe : uint8_t { Full, PartialOk };

  /// One cycle: observation, engine, actions, checkpoint. `source`: what woke
  /// it (metrics, messages); `kernel_time`: the event's kernel timestamp
  /// (detection latency).
  void evaluate(TimePoint now, std::string_view source, std::optional<TimePoint> kernel_time,
                Observe observe = Observe::Full);

  /// Re-reads the configuration (SIGHUP). Returns false when rejected.
  bool reload();

  /// Writes the checkpoint now (also done after every change and at stop).
  void save_checkpoint();

  /// The daemon's own counters (exported into DaemonDeps::metrics when set).
  const DaemonStats& stats() const { return stats_; }
  /// The configuration in force (one snapshot, shared with the engine, the
  /// policy and the executor; a reload replaces it whole).
  const Config& config() const { return config_->get(); }
  const EvictionPolicy& policy() const { return policy_; }
  const ReliefDriver& relief() const { return relief_; }
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
  void set_dry_run_evictor(Evictor* recorder) { executor_.set_dry_run_evictor(recorder); }

 private:
  void maybe_checkpoint(TimePoint now);
  Checkpointer make_checkpointer() const;
  void arm_deadline(const Decisions& d, TimePoint now);
  /// Calls DaemonDeps::on_busy_changed when busy() differs from what it was last told.
  void report_busy();

  // The cycle's parts, each behind its own port: a new feature adds one of
  // these (or a phase of the policy), not a method here.
  std::shared_ptr<LiveConfig> config_;
  DaemonDeps deps_;
  Engine engine_;
  EvictionPolicy policy_;
  DaemonStats stats_;
  StatsExport stats_export_;  // after stats_: released first
  NodeSnapshot last_;
  Decisions last_decisions_;
  Checkpointer checkpointer_;
  ConditionPublisher conditions_;
  AlarmReader alarm_reader_;
  OomKillReporter oom_kills_;
  ArmedAlarms alarms_;
  PluginStage plugins_;
  EvictionExecutor executor_;
  std::optional<TimePoint> next_deadline_;  // armed with Reactor::wake_at
  std::optional<TimePoint> last_full_observation_;  // when last_ was last observed in full
  bool reported_busy_ = false;  // what on_busy_changed was last told
  // Its worker thread posts to the loop and is joined before the rest goes.
  ReliefDriver relief_;
  // Last: the reporter's hook is removed first, so no answer arrives while the rest goes.
  ApiInbox api_inbox_;
};

}  // namespace pressured
