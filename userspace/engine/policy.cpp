// The eviction policy state machine. Pure: no I/O, no clock, no logging; the
// daemon and `simulate` execute and log the actions it returns, and hand
// what came of them to the next step(). Semantics:
// include/pressured/policy.hpp and docs/daemon.md.

#include "pressured/policy.hpp"

#include <algorithm>
#include <cstdio>

namespace pressured {
namespace {

// Below this much memory a victim counts as released (page cache and kernel
// structures linger for a while after the last process exits).
constexpr uint64_t kReleasedFloorBytes = 8ull << 20;

const Pod* find_pod(const NodeSnapshot& s, const std::string& uid) {
  for (const auto& p : s.pods) {
    if (p.uid == uid) return &p;
  }
  return nullptr;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

Lane lane_or_memory(Signal s) { return lane_of(s).value_or(Lane::Memory); }

// Whether `pod` gave back what it held when it was chosen.
bool released(const InFlightEviction& f, const Pod& pod, ContainerfsLayout layout) {
  const StarvedResource r = info(f.eviction.signal).resource;
  const uint64_t now = pod_usage(pod, f.eviction.signal, layout);  // the figure usage_at_decision is
  uint64_t floor = f.eviction.usage_at_decision / 20;
  if (r == StarvedResource::Memory) floor = std::max(kReleasedFloorBytes, floor);
  return now <= floor;
}

}  // namespace

std::optional<Lane> lane_of(Signal signal) {
  switch (info(signal).resource) {
    case StarvedResource::Memory: return Lane::Memory;
    case StarvedResource::EphemeralStorage:
    case StarvedResource::Inodes: return Lane::Disk;
    case StarvedResource::Pids: return Lane::Pids;
    case StarvedResource::None: break;
  }
  return std::nullopt;
}

std::string_view name(Lane lane) {
  switch (lane) {
    case Lane::Memory: return "memory";
    case Lane::Disk: return "disk";
    case Lane::Pids: return "pids";
  }
  return "?";
}

std::string_view name(PolicyAction::Kind kind) {
  using K = PolicyAction::Kind;
  switch (kind) {
    case K::Start: return "evict";
    case K::Escalate: return "escalate";
    case K::GraceEndKill: return "kill";
    case K::StragglerKill: return "rekill";
    case K::Exited: return "exited";
    case K::Released: return "released";
    case K::ReleaseTimeout: return "releaseTimeout";
    case K::Stuck: return "stuck";
    case K::Expired: return "expired";
    case K::Deferred: return "deferred";
    case K::DiskReclaim: return "diskReclaim";
    case K::Terminate: return "terminate";
    case K::ReportApi: return "reportApi";
    case K::ApiConfirmed: return "apiConfirmed";
    case K::ApiUnsent: return "apiUnsent";
    case K::RestartKill: return "restartKill";
    case K::EndApi: return "endApi";
  }
  return "?";
}

std::string_view name(RecordUndone cause) {
  switch (cause) {
    case RecordUndone::None: return "none";
    case RecordUndone::PhaseReverted: return "phase";
    case RecordUndone::ProcessesBack: return "restart";
  }
  return "?";
}

std::string_view name(ApiState state) {
  switch (state) {
    case ApiState::Pending: return "pending";
    case ApiState::Sent: return "sent";
    case ApiState::Confirmed: return "confirmed";
  }
  return "?";
}

PolicyConfig with_daemon_config(PolicyConfig p, const DaemonConfig& daemon) {
  p.release_wait_timeout = daemon.release_wait_timeout;
  p.kill_timeout = daemon.kill_timeout;
  p.soft_kill_margin = daemon.soft_kill_margin;
  p.dry_run = daemon.dry_run;
  p.disk_reclaim = !daemon.disk_reclaim_command.empty();
  p.evict_ahead_of_release = daemon.evict_ahead_of_release;
  p.release_horizon = daemon.release_horizon;
  return p;
}

PolicyConfig policy_config(const DaemonConfig& daemon, bool api) {
  PolicyConfig p;
  p.api = api;
  return with_daemon_config(std::move(p), daemon);
}

EvictionPolicy::EvictionPolicy(PolicyConfig config) : config_(std::move(config)) {}

EvictionPolicy::EvictionPolicy(std::shared_ptr<const LiveConfig> config, PolicyConfig base)
    : config_(with_daemon_config(std::move(base), config->get().daemon)),
      live_(std::move(config)),
      generation_(live_->generation()) {}

void EvictionPolicy::follow() {
  if (!live_ || live_->generation() == generation_) return;
  generation_ = live_->generation();
  config_ = with_daemon_config(std::move(config_), live_->get().daemon);
  rederive_grace_ends();
}

void EvictionPolicy::rederive_grace_ends() {
  // The deadlines still to come follow the configuration now in force: a
  // margin changed meanwhile applies to the eviction in flight.
  for (auto& f : state_.in_flight) {
    if (f.phase != InFlightEviction::Phase::Terminating || f.killed) continue;
    f.kill_at = f.eviction.decided_at + std::chrono::seconds(f.eviction.grace_period_seconds) +
                (f.api ? config_.soft_kill_margin : Duration::zero());
    f.phase_deadline = f.kill_at;
  }
}

std::vector<std::string> EvictionPolicy::excluded() const {
  std::vector<std::string> out = state_.evicted;
  for (const auto& f : state_.in_flight) out.push_back(f.eviction.uid);
  return out;
}

bool EvictionPolicy::in_flight_uid(const std::string& uid) const {
  return std::any_of(state_.in_flight.begin(), state_.in_flight.end(),
                     [&](const auto& f) { return f.eviction.uid == uid; });
}

const InFlightEviction* EvictionPolicy::in_flight(Lane lane) const {
  for (const auto& f : state_.in_flight) {
    if (lane_or_memory(f.eviction.signal) == lane) return &f;
  }
  return nullptr;
}

std::optional<TimePoint> EvictionPolicy::next_deadline() const {
  std::optional<TimePoint> next;
  for (const auto& f : state_.in_flight) {
    const TimePoint at = f.phase == InFlightEviction::Phase::Terminating ? std::min(f.kill_at, f.phase_deadline)
                                                                          : f.phase_deadline;
    if (!next || at < *next) next = at;
  }
  for (const auto& r : state_.api) {
    if (!watched(r, r.next_check)) continue;
    if (!next || r.next_check < *next) next = r.next_check;
  }
  return next;
}

bool EvictionPolicy::holds_lane(Lane lane, TimePoint now) const {
  const InFlightEviction* f = in_flight(lane);
  if (f == nullptr || restored_ || f->phase != InFlightEviction::Phase::Terminating) return false;
  // A killed memory victim may have the next pod evicted ahead of its release: ranked.
  if (config_.evict_ahead_of_release && lane == Lane::Memory && f->killed) return false;
  return !(f->killed && now >= f->phase_deadline);
}

bool EvictionPolicy::watched(const ApiEviction& r, TimePoint at) const {
  // Killed here, done with (not in flight: its own straggler kills apply
  // then), still observed, and within the watch.
  return r.killed_at && contains(state_.evicted, r.eviction.uid) && at - *r.killed_at <= config_.restart_watch;
}

std::vector<Eviction> EvictionPolicy::probes(TimePoint now) const {
  std::vector<Eviction> out;
  for (const auto& f : state_.in_flight) {
    if (f.phase == InFlightEviction::Phase::Terminating) out.push_back(f.eviction);
  }
  for (const auto& r : state_.api) {
    if (watched(r, now) && now >= r.next_check) out.push_back(r.eviction);
  }
  return out;
}

void EvictionPolicy::restore(PolicyState state) {
  state_ = std::move(state);
  restored_ = true;
}

ApiEviction* EvictionPolicy::api_record(const std::string& uid) {
  for (auto& r : state_.api) {
    if (r.eviction.uid == uid) return &r;
  }
  return nullptr;
}

void EvictionPolicy::kill(InFlightEviction& f, TimePoint now) {
  // The stuck deadline counts from the first kill: re-kills do not extend it.
  if (!f.killed) f.phase_deadline = now + config_.kill_timeout;
  f.killed = true;
  f.kill_at = now + config_.rekill_interval;
  // A pod killed here stays on the node until its API eviction reaches the
  // kubelet, which meanwhile restarts its containers: watched from the first kill.
  if (ApiEviction* r = api_record(f.eviction.uid); r != nullptr && !r->killed_at && !f.eviction.static_pod) {
    r->killed_at = now;
    r->next_check = now + config_.restart_check_interval;
  }
}

void EvictionPolicy::finish(std::size_t index, const NodeSnapshot& snapshot) {
  const std::string uid = state_.in_flight[index].eviction.uid;
  state_.in_flight.erase(state_.in_flight.begin() + static_cast<std::ptrdiff_t>(index));
  // In a dry run the pod is still there: offer it again.
  if (!config_.dry_run && find_pod(snapshot, uid) != nullptr && !contains(state_.evicted, uid)) {
    state_.evicted.push_back(uid);
  }
}

void EvictionPolicy::resume(TimePoint now, const NodeSnapshot& snapshot, std::vector<PolicyAction>& out) {
  using K = PolicyAction::Kind;
  rederive_grace_ends();
  for (std::size_t i = 0; i < state_.in_flight.size();) {
    InFlightEviction& f = state_.in_flight[i];
    // A record whose current phase ended more than a whole kill and release
    // cycle ago belongs to another era (the daemon was down): resuming it
    // would act on a situation nobody observed.
    const Duration slack = config_.kill_timeout + config_.release_wait_timeout;
    if (now > f.phase_deadline + slack && now > f.kill_at + slack) {
      PolicyAction a;
      a.kind = K::Expired;
      a.eviction = f.eviction;
      out.push_back(std::move(a));
      finish(i, snapshot);
      continue;
    }
    if (f.phase == InFlightEviction::Phase::Terminating) {
      if (f.killed) {
        // A kill ordered before the restart may never have gone out (the
        // checkpoint is written first): sent again at once if the victim
        // still has processes (progress() tells an empty one from a running one).
        f.kill_at = now;
      } else if (!f.api && now < f.kill_at && find_pod(snapshot, f.eviction.uid) != nullptr) {
        // Likewise its SIGTERM, while its grace lasts: sent at least once (a
        // process that already has it is told again, which changes nothing
        // for it); past the grace, the kill comes at once.
        PolicyAction a;
        a.kind = K::Terminate;
        a.eviction = f.eviction;
        out.push_back(std::move(a));
      }
    }
    ++i;
  }
  // An API eviction handed to the previous process's reporter may have been
  // lost with its queue: sent once more (the reporter skips a pod already
  // terminating, and the Event's name is the eviction's: no second Event).
  for (auto& r : state_.api) {
    if (r.state == ApiState::Sent) r.state = ApiState::Pending;
  }
}

void EvictionPolicy::take_answers(const std::vector<ApiAnswer>& answers, std::vector<PolicyAction>& out) {
  using R = ApiAnswer::Result;
  for (const auto& answer : answers) {
    auto it = std::find_if(state_.api.begin(), state_.api.end(),
                           [&](const ApiEviction& r) { return r.eviction.id == answer.id; });
    if (it == state_.api.end() || it->state != ApiState::Sent) continue;  // answered before a restart, or twice
    if (answer.result == R::Dropped) {
      it->state = ApiState::Pending;  // dispatch() hands it over again
      continue;
    }
    it->state = ApiState::Confirmed;
    // Only the first answer: the answer to ending the pod keeps the record's history.
    if (it->undone == RecordUndone::None) it->recorded = answer.result == R::Landed && answer.recorded;
    PolicyAction a;
    a.kind = PolicyAction::Kind::ApiConfirmed;
    a.eviction = it->eviction;
    a.api_result = answer.result;
    out.push_back(std::move(a));
  }
}

void EvictionPolicy::dispatch(std::vector<PolicyAction>& out) {
  for (std::size_t i = 0; i < state_.api.size();) {
    ApiEviction& r = state_.api[i];
    if (r.state != ApiState::Pending) {
      ++i;
      continue;
    }
    PolicyAction a;
    a.eviction = r.eviction;
    if (!config_.api || config_.dry_run) {
      // Restored under a configuration without reporting.
      a.kind = PolicyAction::Kind::ApiUnsent;
      out.push_back(std::move(a));
      state_.api.erase(state_.api.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    a.kind = r.undone != RecordUndone::None ? PolicyAction::Kind::EndApi : PolicyAction::Kind::ReportApi;
    a.undone = r.undone;
    out.push_back(std::move(a));
    r.state = ApiState::Sent;
    ++i;
  }
}

std::vector<PolicyAction> EvictionPolicy::step(TimePoint now, const NodeSnapshot& snapshot,
                                               const Decisions& decisions, const std::vector<std::string>& exited) {
  PolicyInputs in;
  in.exited = exited;
  return step(now, snapshot, decisions, in);
}

std::vector<PolicyAction> EvictionPolicy::step(TimePoint now, const NodeSnapshot& snapshot,
                                               const Decisions& decisions, const PolicyInputs& inputs) {
  std::vector<PolicyAction> out;
  follow();
  if (restored_) {
    restored_ = false;
    resume(now, snapshot, out);
  }
  if (inputs.disk_reclaim_finished) {
    state_.disk_reclaim_running = false;
    state_.disk_reclaim_done_at = now;
  }
  take_answers(inputs.api_answers, out);
  for (const auto& uid : inputs.refused) {
    if (!contains(state_.evicted, uid)) state_.evicted.push_back(uid);
  }
  // Victims no longer observed are gone for good.
  std::erase_if(state_.evicted, [&](const std::string& uid) { return find_pod(snapshot, uid) == nullptr; });
  progress(now, snapshot, inputs.exited, out);
  watch_restarts(now, snapshot, inputs.running, out);
  check_records(snapshot);
  escalate(now, decisions, out);
  if (!decisions.conditions[static_cast<std::size_t>(Condition::DiskPressure)]) state_.disk_reclaim_done_at.reset();
  decide(now, snapshot, decisions, inputs.refused, out);
  dispatch(out);
  return out;
}

void EvictionPolicy::watch_restarts(TimePoint now, const NodeSnapshot& snapshot, const std::vector<std::string>& running,
                                    std::vector<PolicyAction>& out) {
  // Done with: confirmed by the API, its local eviction over, and either
  // never killed here, gone from the node, or past the watch. Unconfirmed
  // ones wait for their answer.
  std::erase_if(state_.api, [&](const ApiEviction& r) {
    if (r.state != ApiState::Confirmed || in_flight_uid(r.eviction.uid)) return false;
    return !r.killed_at || !contains(state_.evicted, r.eviction.uid) || now - *r.killed_at > config_.restart_watch;
  });
  for (auto& r : state_.api) {
    if (!watched(r, now) || now < r.next_check) continue;
    r.next_check = now + config_.restart_check_interval;
    if (!contains(running, r.eviction.uid) || find_pod(snapshot, r.eviction.uid) == nullptr) continue;
    // Its status record said Failed, and the kubelet started it again: the
    // record is not what the kubelet keeps. The pod is ended through the
    // API (dispatch()), whether or not its lane is free for the local kill.
    if (r.recorded && r.state == ApiState::Confirmed && r.undone == RecordUndone::None) {
      r.undone = RecordUndone::ProcessesBack;
      r.state = ApiState::Pending;
    }
    // In flight again, killed: its lane waits for this memory rather than
    // choosing a second victim for it (a busy lane: checked again next time).
    if (in_flight(lane_or_memory(r.eviction.signal)) != nullptr) continue;
    std::erase(state_.evicted, r.eviction.uid);
    InFlightEviction f;
    f.eviction = r.eviction;
    kill(f, now);
    PolicyAction a;
    a.kind = PolicyAction::Kind::RestartKill;
    a.eviction = f.eviction;
    a.since_kill = now - *r.killed_at;
    state_.in_flight.push_back(std::move(f));
    out.push_back(std::move(a));
  }
}

void EvictionPolicy::check_records(const NodeSnapshot& snapshot) {
  // The pod source's phase is the API's as of its last update: right after
  // the record it may still say Running from before. Only a phase seen
  // Failed and then not Failed is the kubelet writing its own status over
  // the record; an empty phase (a source without one) says nothing.
  for (auto& r : state_.api) {
    if (!r.recorded || r.state != ApiState::Confirmed || r.undone != RecordUndone::None) continue;
    const Pod* pod = find_pod(snapshot, r.eviction.uid);
    if (pod == nullptr || pod->phase.empty()) continue;
    if (pod->phase == "Failed") {
      r.record_seen = true;
    } else if (r.record_seen) {
      r.undone = RecordUndone::PhaseReverted;
      r.state = ApiState::Pending;
    }
  }
}

void EvictionPolicy::progress(TimePoint now, const NodeSnapshot& snapshot, const std::vector<std::string>& exited,
                              std::vector<PolicyAction>& out) {
  using K = PolicyAction::Kind;
  for (std::size_t i = 0; i < state_.in_flight.size();) {
    InFlightEviction& f = state_.in_flight[i];
    const Pod* pod = find_pod(snapshot, f.eviction.uid);
    PolicyAction a;
    a.eviction = f.eviction;
    if (f.phase == InFlightEviction::Phase::Terminating) {
      if (pod == nullptr || contains(exited, f.eviction.uid)) {
        a.kind = K::Exited;
        a.killed_before = f.killed;
        out.push_back(std::move(a));
        f.phase = InFlightEviction::Phase::Releasing;
        f.phase_deadline = now + config_.release_wait_timeout;
        // The snapshot in hand predates the exit: judge the release on the next one.
      } else if (f.killed && now >= f.phase_deadline) {
        a.kind = K::Stuck;
        out.push_back(std::move(a));
        finish(i, snapshot);
        continue;
      } else if (now >= f.kill_at) {
        a.kind = f.killed ? K::StragglerKill : K::GraceEndKill;
        out.push_back(std::move(a));
        kill(f, now);
      }
      ++i;
      continue;
    }
    if (pod == nullptr || released(f, *pod, snapshot.containerfs_layout)) {
      a.kind = K::Released;
      out.push_back(std::move(a));
      finish(i, snapshot);
      continue;
    }
    if (now >= f.phase_deadline) {
      a.kind = K::ReleaseTimeout;
      out.push_back(std::move(a));
      finish(i, snapshot);
      continue;
    }
    ++i;
  }
}

void EvictionPolicy::escalate(TimePoint now, const Decisions& decisions, std::vector<PolicyAction>& out) {
  // A soft victim is killed at once when a hard threshold of its lane is
  // met: it is already chosen, and its memory is the fastest relief. The
  // kubelet waits instead (kubernetes#123872, open; docs/engine.md lists the
  // divergence).
  for (auto& f : state_.in_flight) {
    if (f.phase != InFlightEviction::Phase::Terminating || f.killed || f.eviction.kind != ThresholdKind::Soft) continue;
    const Lane lane = lane_or_memory(f.eviction.signal);
    for (const auto& t : decisions.thresholds) {
      if (t.threshold.kind != ThresholdKind::Hard || !t.met || lane_of(t.threshold.signal) != lane) continue;
      PolicyAction a;
      a.kind = PolicyAction::Kind::Escalate;
      a.trigger = t.threshold.signal;
      f.escalated = true;
      f.eviction.grace_period_seconds = 0;
      kill(f, now);
      a.eviction = f.eviction;
      out.push_back(std::move(a));
      break;
    }
  }
}

bool EvictionPolicy::ahead_of_release(const Eviction& c, const NodeSnapshot& snapshot, TimePoint now,
                                     std::string& why) const {
  if (!config_.evict_ahead_of_release || c.kind != ThresholdKind::Hard ||
      (c.signal != Signal::MemoryAvailable && c.signal != Signal::AllocatableMemoryAvailable)) {
    return false;
  }
  // What the victims in flight still hold comes back; meanwhile the others
  // keep taking memory at the rate the node lost it since the earliest of
  // their decisions, net of what the victims gave back so far.
  double held = 0, given_back = 0, lost_since = 0;
  std::optional<TimePoint> first;
  std::size_t victims = 0;
  for (const auto& f : state_.in_flight) {
    if (lane_or_memory(f.eviction.signal) != Lane::Memory) continue;
    if (!f.killed) return false;  // a soft victim within its grace: escalate() kills it first
    ++victims;
    const Pod* pod = find_pod(snapshot, f.eviction.uid);
    const uint64_t usage = pod == nullptr ? 0 : pod_usage(*pod, f.eviction.signal, snapshot.containerfs_layout);
    held += static_cast<double>(usage);
    given_back += static_cast<double>(f.eviction.usage_at_decision - std::min(usage, f.eviction.usage_at_decision));
    if (!first || f.eviction.decided_at < *first) {
      first = f.eviction.decided_at;
      lost_since = f.eviction.observed - c.observed;
    }
  }
  if (victims == 0 || !first) return false;
  const double elapsed = std::chrono::duration<double>(now - *first).count();
  const double rate = elapsed > 0 ? std::max(0.0, (lost_since + given_back) / elapsed) : 0.0;
  const double horizon = std::chrono::duration<double>(config_.release_horizon).count();
  const double projected = c.observed + held - rate * horizon;
  constexpr double kMiB = 1 << 20;
  char b[320];
  std::snprintf(b, sizeof b,
                "projected available %.0fMi = %.0fMi now + %.0fMi the %zu victim(s) in flight still hold - %.0fMi "
                "the others take in %.0f ms at %.0fMi/s; threshold %.0fMi",
                projected / kMiB, c.observed / kMiB, held / kMiB, victims, rate * horizon / kMiB, horizon * 1e3,
                rate / kMiB, c.threshold_value / kMiB);
  why = b;
  return projected < c.threshold_value;
}

void EvictionPolicy::decide(TimePoint now, const NodeSnapshot& snapshot, const Decisions& decisions,
                            const std::vector<std::string>& refused, std::vector<PolicyAction>& out) {
  using K = PolicyAction::Kind;
  for (const Eviction& c : decisions.candidates) {
    const auto lane = lane_of(c.signal);
    if (!lane || contains(refused, c.uid)) continue;
    PolicyAction a;
    a.eviction = c;
    const bool victim_elsewhere = std::any_of(state_.in_flight.begin(), state_.in_flight.end(),
                                              [&](const auto& f) { return f.eviction.uid == c.uid; });
    std::string projection;
    if (victim_elsewhere ||
        (in_flight(*lane) != nullptr && !ahead_of_release(c, snapshot, now, projection))) {
      // One eviction at a time per lane: the next decision comes from
      // observations taken after the victim's usage is back (the kubelet
      // "evicts more pods than needed" otherwise). Ahead of the release
      // only when the projection says the victims' memory will not be enough.
      a.kind = K::Deferred;
      a.reason = projection.empty() ? "an eviction is in flight" : "an eviction is in flight; " + projection;
      out.push_back(std::move(a));
      continue;
    }
    a.reason = std::move(projection);
    // A pod over its own storage limit is evicted whatever a node-wide
    // reclaim could free (the kubelet does not garbage-collect for it).
    const bool own_limit = !c.local_storage_rule.empty();
    if (*lane == Lane::Disk && state_.disk_reclaim_running && !own_limit) {
      a.kind = K::Deferred;
      a.reason = "the disk reclaim command is running";
      out.push_back(std::move(a));
      continue;
    }
    if (*lane == Lane::Disk && config_.disk_reclaim && !own_limit &&
        (!state_.disk_reclaim_done_at || now - *state_.disk_reclaim_done_at > config_.disk_reclaim_validity)) {
      a.kind = K::DiskReclaim;
      state_.disk_reclaim_running = true;
      out.push_back(std::move(a));
      continue;
    }
    InFlightEviction f;
    f.eviction = c;
    f.eviction.id = config_.id_prefix + "-" + std::to_string(++state_.sequence);
    f.eviction.decided_at = now;
    if (c.kind == ThresholdKind::Hard) f.eviction.grace_period_seconds = 0;
    f.eviction.grace_period_seconds = std::max<int64_t>(0, f.eviction.grace_period_seconds);
    const bool report = config_.api && !config_.dry_run && c.metadata_known && !c.name.empty() &&
                        !c.namespace_.empty();
    const Duration grace = grace_duration(f.eviction.grace_period_seconds);
    if (grace == Duration::zero()) {
      kill(f, now);
    } else {
      f.api = report && !c.static_pod;
      f.kill_at = now + grace + (f.api ? config_.soft_kill_margin : Duration::zero());
      f.phase_deadline = f.kill_at;
    }
    a.kind = K::Start;
    a.eviction = f.eviction;
    a.report = report;
    a.delegate = f.api;
    if (report) {
      ApiEviction r;
      r.eviction = f.eviction;
      if (f.killed && !c.static_pod) {
        r.killed_at = now;
        r.next_check = now + config_.restart_check_interval;
      }
      std::erase_if(state_.api, [&](const ApiEviction& old) { return old.eviction.uid == c.uid; });
      state_.api.push_back(std::move(r));
    }
    state_.in_flight.push_back(std::move(f));
    out.push_back(std::move(a));
  }
}

}  // namespace pressured
