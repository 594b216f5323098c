#include "daemon/eviction_executor.hpp"

#include <sys/stat.h>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "k8s/reporter.hpp"
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
  t.grace_period = std::chrono::seconds(e.grace_period_seconds);
  return t;
}

std::string pod_label(const std::string& ns, const std::string& name, const std::string& uid) {
  if (name.empty()) return "pod " + uid;
  return fmt::format("pod {}/{} ({})", ns, name, uid);
}

std::string eviction_start_line(const Eviction& e, bool dry_run) {
  return fmt::format("{}eviction {}: {} qos={} signal={} observed={:.0f} threshold={:.0f} ({}) grace={}s cgroup={}: "
                     "{} Why: {}",
                     dry_run ? "[dry-run] " : "", e.id, pod_label(e.namespace_, e.name, e.uid), name(e.qos),
                     eviction_reason(e), e.observed, e.threshold_value,
                     e.kind == ThresholdKind::Hard ? "hard" : "soft", e.grace_period_seconds, e.cgroup_path,
                     k8s::eviction_message(e), explain_choice(e));
}


Evictor& EvictionExecutor::evictor() {
  if (config_->dry_run && dry_evictor_ != nullptr) return *dry_evictor_;
  return *evictor_;
}

void EvictionExecutor::execute(const std::vector<PolicyAction>& actions, TimePoint now) {
  using K = PolicyAction::Kind;
  for (const auto& a : actions) {
    if (metrics_) metrics_->policy_action(name(a.kind));
    const Eviction& e = a.eviction;
    const std::string who = pod_label(e.namespace_, e.name, e.uid);
    switch (a.kind) {
      case K::Start:
        start(a, now);
        break;
      case K::Escalate:
        spdlog::warn("eviction {}: hard threshold {} met while {} is within its soft grace period: killing it now",
                     e.id, name(a.trigger), who);
        kill_now(e, "escalation", now);
        break;
      case K::GraceEndKill:
        spdlog::info("eviction {}: grace period over, killing what is left of {}", e.id, who);
        kill_now(e, "grace end", now);
        break;
      case K::StragglerKill:
        spdlog::info("eviction {}: {} still has processes after the kill, killing again", e.id, who);
        kill_now(e, "straggler", now);
        break;
      case K::Exited: {
        if (!a.killed_before) ++stats_->victim_exited_early;
        struct stat st {};
        if (::stat(e.cgroup_path.c_str(), &st) != 0) ++stats_->cgroup_vanished;
        const double secs = seconds(now - e.decided_at);
        if (metrics_) {
          metrics_->eviction_completed(e.kind, secs);
          metrics_->local_kill(true);
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
                     seconds(config_->release_wait_timeout));
        break;
      case K::Stuck:
        spdlog::error("eviction {}: {} still has processes {:.1f}s after the kill (uninterruptible sleep?); "
                      "no longer waiting for it, it stays out of ranking",
                      e.id, who, seconds(config_->kill_timeout));
        break;
      case K::Expired:
        spdlog::warn("checkpoint: eviction {} of {} is too old to resume, dropped", e.id, who);
        break;
      case K::Deferred:
        spdlog::debug("decision for {} deferred: {}", e.uid, a.reason);
        break;
      case K::DiskReclaim:
        if (start_disk_reclaim_) start_disk_reclaim_();
        break;
    }
  }
}

void EvictionExecutor::start(const PolicyAction& a, TimePoint now) {
  const Eviction& e = a.eviction;
  const EvictionTarget target = target_of(e);
  auto valid = evictor().validate(target);
  if (!valid) {
    policy_->refused(e.uid);
    ++stats_->refused_targets;
    if (metrics_) metrics_->local_kill(false);
    spdlog::error("eviction {} of {} refused: {}", e.id, pod_label(e.namespace_, e.name, e.uid),
                  valid.error().message);
    return;
  }
  const bool dry = config_->dry_run;
  spdlog::info("{}", eviction_start_line(e, dry));
  if (metrics_) metrics_->eviction(eviction_reason(e), e.qos, e.kind, e.namespace_, e.name, e.uid);
  const bool report = a.report && reporter_ != nullptr;
  if (report && !dry && !e.static_pod) reported_.push_back(e.uid);
  if (e.grace_period_seconds == 0) {
    kill_now(e, "hard", now);  // relief in milliseconds first, then tell the API
    if (report) reporter_->report_eviction(e);
  } else if (a.delegate && report) {
    // The kubelet terminates the pod with its grace period; the policy kills
    // locally only if it is still running at grace + margin.
    reporter_->report_eviction(e);
  } else {
    auto r = evictor().terminate(target);
    if (!r) spdlog::warn("eviction {}: SIGTERM failed: {}", e.id, r.error().message);
    if (report) reporter_->report_eviction(e);  // static pod: the Event only
  }
}

void EvictionExecutor::kill_now(const Eviction& e, const char* why, TimePoint now) {
  auto r = evictor().kill(target_of(e));
  ++stats_->sigkills;
  if (auto it = std::find(reported_.begin(), reported_.end(), e.uid); it != reported_.end()) {
    reported_.erase(it);
    awaiting_api_.push_back({e, now, now + std::chrono::seconds(1)});
  }
  if (!r) {
    if (metrics_) metrics_->local_kill(false);
    spdlog::error("eviction {}: kill ({}) failed: {}", e.id, why, r.error().message);
    return;
  }
  if (r->cgroup_vanished) ++stats_->cgroup_vanished;
  if (r->skipped_unsafe > 0) {
    spdlog::warn("eviction {}: {} process(es) not signalled (pid 1, the daemon, kernel threads)", e.id,
                 r->skipped_unsafe);
  }
}

void EvictionExecutor::kill_restarted(TimePoint now) {
  if (reported_.empty() && awaiting_api_.empty()) return;
  // The policy keeps its victims while the node still shows them (in flight,
  // then done with): outside that, the pod is gone.
  const std::vector<std::string> kept = policy_->excluded();
  auto gone = [&](const std::string& uid) { return std::find(kept.begin(), kept.end(), uid) == kept.end(); };
  // Reported but never killed here (delegated to the API, which terminates
  // them with their grace): forgotten once gone.
  std::erase_if(reported_, gone);
  std::erase_if(awaiting_api_,
                [&](const AwaitingApi& w) { return gone(w.eviction.uid) || now - w.killed_at > kRestartWatch; });
  for (auto& w : awaiting_api_) {
    if (now < w.next_check) continue;
    w.next_check = now + std::chrono::seconds(1);
    // Done with only: while the policy drives the eviction, its own straggler
    // kills apply.
    const auto& done = policy_->state().evicted;
    if (std::find(done.begin(), done.end(), w.eviction.uid) == done.end()) continue;
    auto empty = evictor().is_empty(target_of(w.eviction));
    if (!empty || *empty) continue;
    // In flight again: its lane waits for this memory rather than choosing
    // a second victim for it (a busy lane: checked again next second).
    if (!policy_->reopen(now, w.eviction)) continue;
    const Eviction& e = w.eviction;
    spdlog::warn("eviction {}: {} has processes again {:.1f}s after its kill (the kubelet restarted a container "
                 "before the API eviction reached it): killing them",
                 e.id, pod_label(e.namespace_, e.name, e.uid), seconds(now - w.killed_at));
    ++stats_->restarted_victim_kills;
    kill_now(e, "restarted", now);
  }
}

}  // namespace pressured
