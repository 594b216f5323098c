#pragma once
// Carries out what the eviction policy decided: the evictor's signals (or the
// dry-run recorder's), the API eviction or Event, the log lines, the metrics
// and the daemon's counters. The policy decides; this only acts and reports.

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "daemon/daemon_stats.hpp"
#include "daemon/disk_reclaim.hpp"
#include "engine/eviction_words.hpp"  // pod_label, eviction_start_line
#include "pressured/config.hpp"
#include "pressured/evictor.hpp"
#include "pressured/policy.hpp"

namespace pressured {

class Metrics;
namespace k8s {
class Reporter;
}

/// The evictor's narrow view of one Eviction: the cgroup and the grace period.
EvictionTarget target_of(const Eviction& e);

/// One way: actions in, effects out (signals, API reports, the disk reclaim
/// command, logs, metrics, counters). It holds no state of an eviction and
/// never calls the policy back; what came of an action reaches the policy as
/// an input of its next step() (the daemon gathers them: victims' emptiness,
/// the reporter's answers, the disk reclaim command's end).
class EvictionExecutor {
 public:
  struct Deps {
    Evictor* evictor = nullptr;           // required
    k8s::Reporter* reporter = nullptr;    // optional
    Metrics* metrics = nullptr;           // optional
    DaemonStats* stats = nullptr;         // required
    const LiveConfig* config = nullptr;    // required; its daemon section is read at each action
    EventLoop* loop = nullptr;            // optional: where the disk reclaim command's end is posted
    /// Posted to the loop when the disk reclaim command ends (an evaluation).
    std::function<void()> on_disk_reclaim_done;
    /// Writes the checkpoint (if it changed): called before any action is
    /// carried out, so that a restart resumes a kill or an API eviction
    /// instead of choosing a second victim.
    std::function<void(TimePoint now)> persist;
  };
  explicit EvictionExecutor(Deps deps)
      : evictor_(deps.evictor), reporter_(deps.reporter), metrics_(deps.metrics), stats_(deps.stats),
        config_(deps.config), on_disk_reclaim_done_(std::move(deps.on_disk_reclaim_done)),
        persist_(std::move(deps.persist)), disk_reclaim_(deps.loop) {}

  /// Removes from `candidates` the ones the evictor refuses (outside the pods
  /// root), counting each refusal, and returns their uids: the policy never
  /// starts what would be taken back. A target is logged once (an error),
  /// not at every decision while it stays a candidate.
  std::vector<std::string> refuse_invalid(std::vector<Eviction>& candidates);

  /// Persists (Deps::persist) when there is anything to do, then carries
  /// out `actions`; `state` is the policy's after the step that returned
  /// them. The crash-consistency test's points (daemon/crash_point.hpp) are
  /// here: decision, checkpoint, grace, and those of each action.
  void execute(const std::vector<PolicyAction>& actions, TimePoint now, const PolicyState& state);

  /// Asks the evictor whether each victim of `probes` (EvictionPolicy::probes)
  /// is empty: into `in.exited` or `in.running`. A victim that cannot be
  /// asked is in neither (logged once per eviction).
  void probe(const std::vector<Eviction>& probes, PolicyInputs& in);

  /// True the first time `key` is reported: a failure that comes back at
  /// every decision (a refused candidate, a victim outside the pods root
  /// resumed from a checkpoint: its kill and its probe, every 50 ms while it
  /// is in flight) is logged once and counted every time. Bounded.
  bool first_report(const std::string& key);

  /// The evictor in use: the dry-run recorder when daemon.dryRun is on and one is set.
  Evictor& evictor();
  void set_dry_run_evictor(Evictor* recorder) { dry_evictor_ = recorder; }

  /// True once for each run of the disk reclaim command that ended since the
  /// last call: the policy's input (PolicyInputs::disk_reclaim_finished).
  bool take_disk_reclaim_finished() { return disk_reclaim_.take_finished(); }

 private:
  void act(const PolicyAction& a, TimePoint now);
  void start(const PolicyAction& a, TimePoint now);
  void kill_now(const Eviction& e, const char* why);
  void start_disk_reclaim();
  const DaemonConfig& daemon_config() const { return config_->get().daemon; }

  Evictor* evictor_;
  Evictor* dry_evictor_ = nullptr;
  k8s::Reporter* reporter_;
  Metrics* metrics_;
  DaemonStats* stats_;
  const LiveConfig* config_;
  std::function<void()> on_disk_reclaim_done_;
  std::function<void(TimePoint)> persist_;
  // Failures already logged (first_report), bounded.
  std::set<std::string> reported_;
  // Last: its thread posts to the loop and is joined first.
  DiskReclaimRunner disk_reclaim_;
};

}  // namespace pressured
