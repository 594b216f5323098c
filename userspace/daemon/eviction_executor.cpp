#include "daemon/eviction_executor.hpp"

#include "daemon/crash_point.hpp"

#include <sys/stat.h>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "k8s/reporter.hpp"
#include "engine/eviction_words.hpp"
#include "node/attribution.hpp"
#include "pressured/metrics.hpp"

namespace pressured {

namespace {
double seconds(Duration d) { return std::chrono::duration<double>(d).count(); }
}  // namespace

EvictionTarget target_of(const Eviction& e) {
  EvictionTarget t;
  t.uid = e.uid;
  t.name = e.name;
  t.namespace_ = e.namespace_;
  t.cgroup_path = e.cgroup_path;
  t.grace_period = grace_duration(e.grace_period_seconds);
  return t;
}

std::vector<std::string> EvictionExecutor::refuse_invalid(std::vector<Eviction>& candidates) {
  std::vector<std::string> refused;
  std::erase_if(candidates, [&](const Eviction& e) {
    auto valid = evictor().validate(target_of(e));
    if (valid) return false;
    ++stats_->refused_targets;
    if (metrics_) metrics_->add(stats::kLocalKills, {result_name(false)});
    // The same candidate comes back at every decision under pressure (every
    // 50 ms at most): its refusal is logged once, and counted every time.
    if (first_report("refused " + e.uid + " " + e.cgroup_path)) {
      spdlog::error("eviction of {} refused: {} (logged once; every refusal is counted in "
                    "pressured_eviction_refused_targets_total)",
                    pod_label(e.namespace_, e.name, e.uid), valid.error().message);
    }
    refused.push_back(e.uid);
    return true;
  });
  return refused;
}

bool EvictionExecutor::first_report(const std::string& key) {
  if (reported_.size() >= 1024) reported_.clear();
  return reported_.insert(key).second;
}

Evictor& EvictionExecutor::evictor() {
  if (daemon_config().dry_run && dry_evictor_ != nullptr) return *dry_evictor_;
  return *evictor_;
}

void EvictionExecutor::execute(const std::vector<PolicyAction>& actions, TimePoint now, const PolicyState& state) {
  const bool started = std::any_of(actions.begin(), actions.end(),
                                   [](const PolicyAction& a) { return a.kind == PolicyAction::Kind::Start; });
  if (started) crash_point("decision");
  if (!actions.empty() && persist_) persist_(now);
  if (started) crash_point("checkpoint");
  for (const auto& a : actions) act(a, now);
  if (!started && std::any_of(state.records.begin(), state.records.end(), [](const EvictionRecord& r) {
        return r.local == EvictionRecord::Local::Terminating && !r.killed;
      })) {
    crash_point("grace");
  }
}

void EvictionExecutor::probe(const std::vector<Eviction>& probes, PolicyInputs& in) {
  for (const Eviction& e : probes) {
    auto empty = evictor().is_empty(target_of(e));
    if (!empty) {
      // Asked at every decision while the victim is in flight: once in the log.
      if (first_report("probe " + e.id)) {
        spdlog::warn("eviction {}: cannot tell whether {} is empty: {} (logged once for this eviction)", e.id,
                     e.cgroup_path, empty.error().message);
      }
    } else {
      (*empty ? in.exited : in.running).push_back(e.uid);
    }
  }
}

void EvictionExecutor::act(const PolicyAction& a, TimePoint now) {
  using K = PolicyAction::Kind;
  {
    if (metrics_) metrics_->add(stats::kEvictionPolicyActions, {name(a.kind)});
    const Eviction& e = a.eviction;
    const std::string who = pod_label(e.namespace_, e.name, e.uid);
    switch (a.kind) {
      case K::Start:
        start(a, now);
        break;
      case K::Escalate:
        spdlog::warn("eviction {}: hard threshold {} met while {} is within its soft grace period: killing it now",
                     e.id, name(a.trigger), who);
        kill_now(e, "escalation");
        break;
      case K::GraceEndKill:
        spdlog::info("eviction {}: grace period over, killing what is left of {}", e.id, who);
        kill_now(e, "grace end");
        break;
      case K::StragglerKill:
        spdlog::info("eviction {}: {} still has processes after the kill, killing again", e.id, who);
        kill_now(e, "straggler");
        break;
      case K::Exited: {
        if (!a.killed_before) ++stats_->victim_exited_early;
        struct stat st {};
        if (::stat(e.cgroup_path.c_str(), &st) != 0) ++stats_->cgroup_vanished;
        const double secs = seconds(now - e.decided_at);
        if (metrics_) {
          metrics_->observe(stats::kEvictionLatency, {e.kind}, secs);
          metrics_->add(stats::kLocalKills, {result_name(true)});
        }
        spdlog::info("eviction {}: {} has no process left after {:.3f}s", e.id, who, secs);
        break;
      }
      case K::Released:
        spdlog::info("eviction {} done ({} released) after {:.3f}s; next decision from fresh observations", e.id,
                     lane_of(e.signal) == Lane::Memory ? "memory" : "usage",
                     seconds(now - e.decided_at));
        break;
      case K::ReleaseTimeout:
        spdlog::warn("eviction {}: {} still holds its usage after {:.1f}s; deciding again", e.id, who,
                     seconds(daemon_config().release_wait_timeout));
        break;
      case K::Stuck:
        spdlog::error("eviction {}: {} still has processes {:.1f}s after the kill (uninterruptible sleep?); "
                      "no longer waiting for it, it stays out of ranking",
                      e.id, who, seconds(daemon_config().kill_timeout));
        break;
      case K::Expired:
        spdlog::warn("checkpoint: eviction {} of {} is too old to resume, dropped", e.id, who);
        break;
      case K::Deferred:
        spdlog::debug("decision for {} deferred: {}", e.uid, a.reason);
        break;
      case K::DiskReclaim:
        start_disk_reclaim();
        break;
      case K::Terminate: {
        spdlog::info("eviction {}: resumed after a restart, sending {} its SIGTERM", e.id, who);
        auto r = evictor().terminate(target_of(e));
        if (!r) spdlog::warn("eviction {}: SIGTERM failed: {}", e.id, r.error().message);
        crash_point("signal");
        break;
      }
      case K::ReportApi:
        if (reporter_ == nullptr) break;  // the policy sends only with a reporter
        spdlog::info("eviction {}: API eviction of {} handed to the reporter", e.id, who);
        reporter_->report_eviction(e);
        crash_point("api-queued");
        break;
      case K::ApiConfirmed: {
        using R = ApiAnswer::Result;
        if (a.api_result == R::GaveUp) {
          spdlog::error("eviction {}: the API eviction of {} failed for good; the kubelet may restart its containers",
                        e.id, who);
        } else {
          spdlog::info("eviction {}: API eviction of {} {}", e.id, who,
                       a.api_result == R::Landed ? "accepted" : "not needed (gone, recreated or terminating)");
        }
        break;
      }
      case K::ApiUnsent:
        spdlog::warn("eviction {}: API eviction of {} not sent: Kubernetes reporting is off now (dry run or no "
                     "kubernetes section)",
                     e.id, who);
        break;
      case K::RestartKill:
        spdlog::warn("eviction {}: {} has processes again {:.1f}s after its kill (the kubelet restarted a container "
                     "before the API eviction reached it): killing them",
                     e.id, who, seconds(a.since_kill));
        ++stats_->restarted_victim_kills;
        kill_now(e, "restarted");
        break;
      case K::EndApi:
        if (reporter_ == nullptr) break;  // the policy sends only with a reporter
        spdlog::warn("eviction {}: the kubelet undid the eviction record of {} ({}): ending the pod through the "
                     "Eviction API",
                     e.id, who,
                     a.undone == RecordUndone::PhaseReverted ? "its phase is no longer Failed"
                                                             : "its processes are back after the kill");
        reporter_->end_pod(e, a.undone);
        crash_point("api-queued");
        break;
    }
  }
}

void EvictionExecutor::start(const PolicyAction& a, TimePoint /*now*/) {
  const Eviction& e = a.eviction;
  const EvictionTarget target = target_of(e);
  const bool dry = daemon_config().dry_run;
  spdlog::info("{}", eviction_start_line(e, dry));
  if (!a.reason.empty()) {
    spdlog::info("eviction {}: started ahead of the release of the memory eviction(s) in flight: {}", e.id, a.reason);
  }
  if (metrics_) metrics_->eviction(eviction_reason(e), e.qos, e.kind, e.namespace_, e.name, e.uid);
  if (metrics_ && e.grew) metrics_->add(stats::kEvictionContainers, {e.grew->name});
  if (e.grace_period_seconds == 0) {
    kill_now(e, "hard");  // relief in milliseconds first; the API eviction (a ReportApi) follows
  } else if (!a.delegate) {
    // Delegated: the kubelet terminates the pod with its grace period; the
    // policy kills locally only if it is still running at grace + margin.
    auto r = evictor().terminate(target);
    if (!r) spdlog::warn("eviction {}: SIGTERM failed: {}", e.id, r.error().message);
    crash_point("signal");
  }
}

void EvictionExecutor::kill_now(const Eviction& e, const char* why) {
  auto r = evictor().kill(target_of(e));
  ++stats_->sigkills;
  if (!r) {
    if (metrics_) metrics_->add(stats::kLocalKills, {result_name(false)});
    if (first_report("kill " + e.id)) {
      spdlog::error("eviction {}: kill ({}) failed: {} (logged once for this eviction; every failure is counted in "
                    "pressured_local_kills_total)",
                    e.id, why, r.error().message);
    }
    return;
  }
  if (r->cgroup_vanished) ++stats_->cgroup_vanished;
  stats_->victim_memory_released += r->memory_released;
  if (r->release_unsupported) {
    spdlog::warn("daemon.releaseVictimMemory: the kernel has no process_mrelease(2) (Linux 5.15+): victims' memory "
                 "comes back when they exit");
  }
  spdlog::debug("eviction {}: SIGKILL sent to {} process(es) ({}), memory of {} reaped", e.id, r->signalled, why,
                r->memory_released);
  if (r->skipped_unsafe > 0) {
    spdlog::warn("eviction {}: {} process(es) not signalled (pid 1, the daemon, kernel threads)", e.id,
                 r->skipped_unsafe);
  }
  crash_point("kill");
}

void EvictionExecutor::start_disk_reclaim() {
  const auto& argv = daemon_config().disk_reclaim_command;
  spdlog::info("disk pressure: running the reclaim command '{}' before evicting", argv.empty() ? "" : argv[0]);
  disk_reclaim_.start(argv, daemon_config().disk_reclaim_timeout, on_disk_reclaim_done_);
}

}  // namespace pressured
