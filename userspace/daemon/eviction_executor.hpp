#pragma once
// Carries out what the eviction policy decided: the evictor's signals (or the
// dry-run recorder's), the API eviction or Event, the log lines, the metrics
// and the daemon's counters. The policy decides; this only acts and reports.

#include <functional>
#include <string>
#include <vector>

#include "daemon/daemon_stats.hpp"
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
/// "pod ns/name (uid)", or "pod <uid>" without metadata.
std::string pod_label(const std::string& ns, const std::string& name, const std::string& uid);
/// The info line that starts an eviction: who, why, the observed value and
/// the threshold, the grace period and the choice's explanation.
std::string eviction_start_line(const Eviction& e, bool dry_run);

class EvictionExecutor {
 public:
  struct Deps {
    Evictor* evictor = nullptr;           // required
    k8s::Reporter* reporter = nullptr;    // optional
    Metrics* metrics = nullptr;           // optional
    DaemonStats* stats = nullptr;         // required
    const DaemonConfig* config = nullptr;  // required; read at each action (reloads apply at once)
    EvictionPolicy* policy = nullptr;     // required: told about refused targets
    std::function<void()> start_disk_reclaim;
  };
  explicit EvictionExecutor(Deps deps)
      : evictor_(deps.evictor), reporter_(deps.reporter), metrics_(deps.metrics), stats_(deps.stats),
        config_(deps.config), policy_(deps.policy), start_disk_reclaim_(std::move(deps.start_disk_reclaim)) {}

  void execute(const std::vector<PolicyAction>& actions, TimePoint now);

  /// A pod killed here and evicted through the API stays on the node until
  /// the API eviction reaches the kubelet, which meanwhile starts its killed
  /// containers again (restartPolicy): memory taken back, and a second victim
  /// chosen for it. Each such pod, while the policy still keeps it as a
  /// victim (until the node no longer shows it; at most kRestartWatch after
  /// its kill, checked at most once a second), is killed again when it has
  /// processes and the policy is done with it, its eviction back in flight
  /// (EvictionPolicy::reopen). Call before deciding.
  void kill_restarted(TimePoint now);
  static constexpr Duration kRestartWatch = std::chrono::minutes(5);
  /// The evictor in use: the dry-run recorder when daemon.dryRun is on and one is set.
  Evictor& evictor();
  void set_dry_run_evictor(Evictor* recorder) { dry_evictor_ = recorder; }

 private:
  void start(const PolicyAction& a, TimePoint now);
  void kill_now(const Eviction& e, const char* why, TimePoint now);

  struct AwaitingApi {
    Eviction eviction;
    TimePoint killed_at{};
    TimePoint next_check{};
  };
  std::vector<std::string> reported_;     // uids evicted through the API, not yet killed here
  std::vector<AwaitingApi> awaiting_api_;  // killed here, evicted through the API, maybe still on the node

  Evictor* evictor_;
  Evictor* dry_evictor_ = nullptr;
  k8s::Reporter* reporter_;
  Metrics* metrics_;
  DaemonStats* stats_;
  const DaemonConfig* config_;
  EvictionPolicy* policy_;
  std::function<void()> start_disk_reclaim_;
};

}  // namespace pressured
