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

// The record's API eviction is no longer tracked (confirmed and done with,
// replaced by a newer one, or not to be sent).
void forget_api(EvictionRecord& r) {
  r.api = EvictionRecord::Api::None;
  r.status = EvictionRecord::Status::None;
  r.undone = RecordUndone::None;
  r.killed_at.reset();
}

// Whether `pod` gave back what it held when it was chosen.
bool released(const EvictionRecord& f, const Pod& pod, ContainerfsLayout layout) {
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

std::string_view name(LanePhase phase) {
  switch (phase) {
    case LanePhase::Idle: return "idle";
    case LanePhase::Relieving: return "relieving";
    case LanePhase::ReclaimingDisk: return "reclaiming_disk";
    case LanePhase::Evicting: return "evicting";
  }
  return "?";
}

std::string_view name(EvictionRecord::Local phase) {
  using L = EvictionRecord::Local;
  switch (phase) {
    case L::Terminating: return "terminating";
    case L::Releasing: return "releasing";
    case L::Done: return "done";
    case L::Stuck: return "stuck";
  }
  return "?";
}

std::string_view name(EvictionRecord::Api phase) {
  using A = EvictionRecord::Api;
  switch (phase) {
    case A::None: return "none";
    case A::Pending: return "pending";
    case A::Sent: return "sent";
    case A::Confirmed: return "confirmed";
  }
  return "?";
}

std::string_view name(EvictionRecord::Status phase) {
  using S = EvictionRecord::Status;
  switch (phase) {
    case S::None: return "none";
    case S::Written: return "written";
    case S::Seen: return "seen";
    case S::Undone: return "undone";
  }
  return "?";
}

Eviction EvictionRecord::local_eviction() const {
  Eviction e = eviction;
  if (escalated) e.grace_period_seconds = 0;
  return e;
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

EvictionPolicy::EvictionPolicy(PolicyConfig config)
    : config_(std::move(config)), relief_(ReliefConfig{}, config_.dry_run) {
  relief_.set_available(config_.relief);
}

EvictionPolicy::EvictionPolicy(std::shared_ptr<const LiveConfig> config, PolicyConfig base)
    : config_(with_daemon_config(std::move(base), config->get().daemon)),
      live_(std::move(config)),
      generation_(live_->generation()),
      relief_generation_(generation_),
      relief_(live_->get().relief, live_->get().daemon.dry_run) {
  relief_.set_available(config_.relief);
}

void EvictionPolicy::follow() {
  if (!live_ || live_->generation() == generation_) return;
  generation_ = live_->generation();
  config_ = with_daemon_config(std::move(config_), live_->get().daemon);
  rederive_grace_ends();
}

void EvictionPolicy::rederive_grace_ends() {
  // The deadlines still to come follow the configuration now in force: a
  // margin changed meanwhile applies to the eviction in flight.
  for (auto& r : state_.records) {
    if (r.local != EvictionRecord::Local::Terminating || r.killed) continue;
    r.kill_at = r.eviction.decided_at + std::chrono::seconds(r.eviction.grace_period_seconds) +
                (r.delegated ? config_.soft_kill_margin : Duration::zero());
    r.phase_deadline = r.kill_at;
  }
}

std::vector<std::string> EvictionPolicy::excluded() const {
  std::vector<std::string> out = state_.refused;
  for (const auto& r : state_.records) {
    if (r.excluded || r.in_flight()) out.push_back(r.eviction.uid);
  }
  return out;
}

bool EvictionPolicy::in_flight_uid(const std::string& uid) const {
  return std::any_of(state_.records.begin(), state_.records.end(),
                     [&](const auto& r) { return r.in_flight() && r.eviction.uid == uid; });
}

bool EvictionPolicy::evicted(const std::string& uid) const {
  return contains(state_.refused, uid) ||
         std::any_of(state_.records.begin(), state_.records.end(),
                     [&](const auto& r) { return r.excluded && r.eviction.uid == uid; });
}

bool EvictionPolicy::busy() const {
  return state_.lane(Lane::Disk) == LanePhase::ReclaimingDisk ||
         std::any_of(state_.records.begin(), state_.records.end(), [](const auto& r) { return r.in_flight(); });
}

const EvictionRecord* EvictionPolicy::in_flight(Lane lane) const {
  for (const auto& r : state_.records) {
    if (r.in_flight() && lane_or_memory(r.eviction.signal) == lane) return &r;
  }
  return nullptr;
}

std::optional<TimePoint> EvictionPolicy::next_deadline() const {
  std::optional<TimePoint> next;
  auto consider = [&next](TimePoint at) {
    if (!next || at < *next) next = at;
  };
  for (const auto& r : state_.records) {
    if (r.local == EvictionRecord::Local::Terminating) consider(std::min(r.kill_at, r.phase_deadline));
    if (r.local == EvictionRecord::Local::Releasing) consider(r.phase_deadline);
    if (watched(r, r.next_check)) consider(r.next_check);
  }
  return next;
}

bool EvictionPolicy::holds_lane(Lane lane, TimePoint now) const {
  const EvictionRecord* f = in_flight(lane);
  if (f == nullptr || restored_ || f->local != EvictionRecord::Local::Terminating) return false;
  // A killed memory victim may have the next pod evicted ahead of its release: ranked.
  if (config_.evict_ahead_of_release && lane == Lane::Memory && f->killed) return false;
  return !(f->killed && now >= f->phase_deadline);
}

bool EvictionPolicy::watched(const EvictionRecord& r, TimePoint at) const {
  // Its API eviction tracked, killed here, done with (not in flight: its own
  // straggler kills apply then), still observed, and within the watch.
  return r.api != EvictionRecord::Api::None && r.killed_at && evicted(r.eviction.uid) &&
         at - *r.killed_at <= config_.restart_watch;
}

std::vector<Eviction> EvictionPolicy::probes(TimePoint now) const {
  std::vector<Eviction> out;
  for (const auto& r : state_.records) {
    if (r.local == EvictionRecord::Local::Terminating) out.push_back(r.local_eviction());
  }
  for (const auto& r : state_.records) {
    if (watched(r, now) && now >= r.next_check) out.push_back(r.eviction);
  }
  return out;
}

void EvictionPolicy::restore(PolicyState state) {
  state_ = std::move(state);
  // The disk reclaim command died with the previous process.
  if (state_.lane(Lane::Disk) == LanePhase::ReclaimingDisk) state_.lanes[static_cast<std::size_t>(Lane::Disk)] = LanePhase::Idle;
  restored_ = true;
  settle();
}

EvictionRecord* EvictionPolicy::api_record(const std::string& uid) {
  for (auto& r : state_.records) {
    if (r.api != EvictionRecord::Api::None && r.eviction.uid == uid) return &r;
  }
  return nullptr;
}

void EvictionPolicy::kill(EvictionRecord& f, TimePoint now) {
  // The stuck deadline counts from the first kill: re-kills do not extend it.
  if (!f.killed) f.phase_deadline = now + config_.kill_timeout;
  f.killed = true;
  f.kill_at = now + config_.rekill_interval;
  // A pod killed here stays on the node until its API eviction reaches the
  // kubelet, which meanwhile restarts its containers: watched from the first kill.
  if (EvictionRecord* r = api_record(f.eviction.uid); r != nullptr && !r->killed_at && !f.eviction.static_pod) {
    r->killed_at = now;
    r->next_check = now + config_.restart_check_interval;
  }
}

void EvictionPolicy::finish(EvictionRecord& r, EvictionRecord::Local end, const NodeSnapshot& snapshot) {
  // In a dry run the pod is still there: offer it again.
  const bool exclude = !config_.dry_run && find_pod(snapshot, r.eviction.uid) != nullptr && !evicted(r.eviction.uid);
  r.local = end;
  r.excluded = exclude;
}

void EvictionPolicy::settle() {
  using A = EvictionRecord::Api;
  std::erase_if(state_.records, [](const EvictionRecord& r) { return !r.in_flight() && !r.excluded && r.api == A::None; });
  for (std::size_t l = 0; l < kLaneCount; ++l) {
    LanePhase& phase = state_.lanes[l];
    if (phase == LanePhase::ReclaimingDisk) continue;  // until the command's end is an input
    if (in_flight(static_cast<Lane>(l)) != nullptr) {
      phase = LanePhase::Evicting;
    } else if (static_cast<Lane>(l) == Lane::Memory && relief_.running()) {
      phase = LanePhase::Relieving;
    } else {
      phase = LanePhase::Idle;
    }
  }
}

ReliefStep EvictionPolicy::relieve(TimePoint now, const NodeSnapshot& snapshot, Decisions& decisions,
                                   const EvictionConfig& eviction, const std::optional<ReliefOutcome>& outcome) {
  // The relief section follows a reload here; the rest of the policy's
  // settings at its step(), as always.
  if (live_ && live_->generation() != relief_generation_) {
    relief_generation_ = live_->generation();
    // The stage keeps its run and its back-off across a reload.
    relief_.reconfigure(live_->get().relief, live_->get().daemon.dry_run);
  }
  ReliefStep st = relief_.step(now, snapshot, decisions, eviction, excluded(), in_flight(Lane::Memory) != nullptr,
                               outcome);
  settle();
  return st;
}

void EvictionPolicy::resume(TimePoint now, const NodeSnapshot& snapshot, std::vector<PolicyAction>& out) {
  using K = PolicyAction::Kind;
  using L = EvictionRecord::Local;
  rederive_grace_ends();
  for (auto& f : state_.records) {
    if (!f.in_flight()) continue;
    // A record whose current phase ended more than a whole kill and release
    // cycle ago belongs to another era (the daemon was down): resuming it
    // would act on a situation nobody observed.
    const Duration slack = config_.kill_timeout + config_.release_wait_timeout;
    if (now > f.phase_deadline + slack && now > f.kill_at + slack) {
      PolicyAction a;
      a.kind = K::Expired;
      a.eviction = f.local_eviction();
      out.push_back(std::move(a));
      finish(f, L::Done, snapshot);
      continue;
    }
    if (f.local == L::Terminating) {
      if (f.killed) {
        // A kill ordered before the restart may never have gone out (the
        // checkpoint is written first): sent again at once if the victim
        // still has processes (progress() tells an empty one from a running one).
        f.kill_at = now;
      } else if (!f.delegated && now < f.kill_at && find_pod(snapshot, f.eviction.uid) != nullptr) {
        // Likewise its SIGTERM, while its grace lasts: sent at least once (a
        // process that already has it is told again, which changes nothing
        // for it); past the grace, the kill comes at once.
        PolicyAction a;
        a.kind = K::Terminate;
        a.eviction = f.local_eviction();
        out.push_back(std::move(a));
      }
    }
  }
  // An API eviction handed to the previous process's reporter may have been
  // lost with its queue: sent once more (the reporter skips a pod already
  // terminating, and the Event's name is the eviction's: no second Event).
  for (auto& r : state_.records) {
    if (r.api == EvictionRecord::Api::Sent) r.api = EvictionRecord::Api::Pending;
  }
}

void EvictionPolicy::take_answers(const std::vector<ApiAnswer>& answers, std::vector<PolicyAction>& out) {
  using R = ApiAnswer::Result;
  using A = EvictionRecord::Api;
  using S = EvictionRecord::Status;
  for (const auto& answer : answers) {
    auto it = std::find_if(state_.records.begin(), state_.records.end(), [&](const EvictionRecord& r) {
      return r.api != A::None && r.eviction.id == answer.id;
    });
    if (it == state_.records.end() || it->api != A::Sent) continue;  // answered before a restart, or twice
    if (answer.result == R::Dropped) {
      it->api = A::Pending;  // dispatch() hands it over again
      continue;
    }
    it->api = A::Confirmed;
    // Only the first answer: the answer to ending the pod keeps the record's history.
    if (it->status != S::Undone) it->status = answer.result == R::Landed && answer.recorded ? S::Written : S::None;
    PolicyAction a;
    a.kind = PolicyAction::Kind::ApiConfirmed;
    a.eviction = it->eviction;
    a.api_result = answer.result;
    out.push_back(std::move(a));
  }
}

void EvictionPolicy::dispatch(std::vector<PolicyAction>& out) {
  using A = EvictionRecord::Api;
  for (auto& r : state_.records) {
    if (r.api != A::Pending) continue;
    PolicyAction a;
    a.eviction = r.eviction;
    if (!config_.api || config_.dry_run) {
      // Restored under a configuration without reporting.
      a.kind = PolicyAction::Kind::ApiUnsent;
      out.push_back(std::move(a));
      forget_api(r);
      continue;
    }
    a.kind = r.status == EvictionRecord::Status::Undone ? PolicyAction::Kind::EndApi : PolicyAction::Kind::ReportApi;
    a.undone = r.undone;
    out.push_back(std::move(a));
    r.api = A::Sent;
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
    if (state_.lane(Lane::Disk) == LanePhase::ReclaimingDisk) state_.lanes[static_cast<std::size_t>(Lane::Disk)] = LanePhase::Idle;
    state_.disk_reclaim_done_at = now;
  }
  take_answers(inputs.api_answers, out);
  for (const auto& uid : inputs.refused) {
    if (!evicted(uid)) state_.refused.push_back(uid);
  }
  // Victims no longer observed are gone for good.
  std::erase_if(state_.refused, [&](const std::string& uid) { return find_pod(snapshot, uid) == nullptr; });
  for (auto& r : state_.records) {
    if (r.excluded && find_pod(snapshot, r.eviction.uid) == nullptr) r.excluded = false;
  }
  progress(now, snapshot, inputs.exited, out);
  watch_restarts(now, snapshot, inputs.running, out);
  check_records(snapshot);
  escalate(now, decisions, out);
  if (!decisions.conditions[static_cast<std::size_t>(Condition::DiskPressure)]) state_.disk_reclaim_done_at.reset();
  decide(now, snapshot, decisions, inputs.refused, out);
  dispatch(out);
  settle();
  return out;
}

void EvictionPolicy::watch_restarts(TimePoint now, const NodeSnapshot& snapshot, const std::vector<std::string>& running,
                                    std::vector<PolicyAction>& out) {
  using A = EvictionRecord::Api;
  using S = EvictionRecord::Status;
  // Done with: confirmed by the API, its local eviction over, and either
  // never killed here, gone from the node, or past the watch. Unconfirmed
  // ones wait for their answer.
  for (auto& r : state_.records) {
    if (r.api != A::Confirmed || in_flight_uid(r.eviction.uid)) continue;
    if (!r.killed_at || !evicted(r.eviction.uid) || now - *r.killed_at > config_.restart_watch) forget_api(r);
  }
  for (auto& r : state_.records) {
    if (!watched(r, now) || now < r.next_check) continue;
    r.next_check = now + config_.restart_check_interval;
    if (!contains(running, r.eviction.uid) || find_pod(snapshot, r.eviction.uid) == nullptr) continue;
    // Its status record said Failed, and the kubelet started it again: the
    // record is not what the kubelet keeps. The pod is ended through the
    // API (dispatch()), whether or not its lane is free for the local kill.
    if ((r.status == S::Written || r.status == S::Seen) && r.api == A::Confirmed) {
      r.status = S::Undone;
      r.undone = RecordUndone::ProcessesBack;
      r.api = A::Pending;
    }
    // In flight again, killed: its lane waits for this memory rather than
    // choosing a second victim for it (a busy lane: checked again next time).
    if (in_flight(lane_or_memory(r.eviction.signal)) != nullptr) continue;
    std::erase(state_.refused, r.eviction.uid);
    for (auto& other : state_.records) {
      if (other.eviction.uid == r.eviction.uid) other.excluded = false;
    }
    r.local = EvictionRecord::Local::Terminating;
    r.killed = false;
    r.delegated = false;
    r.escalated = false;
    kill(r, now);
    PolicyAction a;
    a.kind = PolicyAction::Kind::RestartKill;
    a.eviction = r.local_eviction();
    a.since_kill = now - *r.killed_at;
    out.push_back(std::move(a));
  }
}

void EvictionPolicy::check_records(const NodeSnapshot& snapshot) {
  using S = EvictionRecord::Status;
  // The pod source's phase is the API's as of its last update: right after
  // the record it may still say Running from before. Only a phase seen
  // Failed and then not Failed is the kubelet writing its own status over
  // the record; an empty phase (a source without one) says nothing.
  for (auto& r : state_.records) {
    if ((r.status != S::Written && r.status != S::Seen) || r.api != EvictionRecord::Api::Confirmed) continue;
    const Pod* pod = find_pod(snapshot, r.eviction.uid);
    if (pod == nullptr || pod->phase.empty()) continue;
    if (pod->phase == "Failed") {
      r.status = S::Seen;
    } else if (r.status == S::Seen) {
      r.status = S::Undone;
      r.undone = RecordUndone::PhaseReverted;
      r.api = EvictionRecord::Api::Pending;
    }
  }
}

void EvictionPolicy::progress(TimePoint now, const NodeSnapshot& snapshot, const std::vector<std::string>& exited,
                              std::vector<PolicyAction>& out) {
  using K = PolicyAction::Kind;
  using L = EvictionRecord::Local;
  for (auto& f : state_.records) {
    if (!f.in_flight()) continue;
    const Pod* pod = find_pod(snapshot, f.eviction.uid);
    PolicyAction a;
    a.eviction = f.local_eviction();
    if (f.local == L::Terminating) {
      if (pod == nullptr || contains(exited, f.eviction.uid)) {
        a.kind = K::Exited;
        a.killed_before = f.killed;
        out.push_back(std::move(a));
        f.local = L::Releasing;
        f.phase_deadline = now + config_.release_wait_timeout;
        // The snapshot in hand predates the exit: judge the release on the next one.
      } else if (f.killed && now >= f.phase_deadline) {
        a.kind = K::Stuck;
        out.push_back(std::move(a));
        finish(f, L::Stuck, snapshot);
      } else if (now >= f.kill_at) {
        a.kind = f.killed ? K::StragglerKill : K::GraceEndKill;
        out.push_back(std::move(a));
        kill(f, now);
      }
      continue;
    }
    if (pod == nullptr || released(f, *pod, snapshot.containerfs_layout)) {
      a.kind = K::Released;
      out.push_back(std::move(a));
      finish(f, L::Done, snapshot);
      continue;
    }
    if (now >= f.phase_deadline) {
      a.kind = K::ReleaseTimeout;
      out.push_back(std::move(a));
      finish(f, L::Done, snapshot);
    }
  }
}

void EvictionPolicy::escalate(TimePoint now, const Decisions& decisions, std::vector<PolicyAction>& out) {
  // A soft victim is killed at once when a hard threshold of its lane is
  // met: it is already chosen, and its memory is the fastest relief. The
  // kubelet waits instead (kubernetes#123872, open; docs/engine.md lists the
  // divergence).
  for (auto& f : state_.records) {
    if (f.local != EvictionRecord::Local::Terminating || f.killed || f.eviction.kind != ThresholdKind::Soft) continue;
    const Lane lane = lane_or_memory(f.eviction.signal);
    for (const auto& t : decisions.thresholds) {
      if (t.threshold.kind != ThresholdKind::Hard || !t.met || lane_of(t.threshold.signal) != lane) continue;
      PolicyAction a;
      a.kind = PolicyAction::Kind::Escalate;
      a.trigger = t.threshold.signal;
      f.escalated = true;
      kill(f, now);
      a.eviction = f.local_eviction();
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
  for (const auto& f : state_.records) {
    if (!f.in_flight() || lane_or_memory(f.eviction.signal) != Lane::Memory) continue;
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
    std::string projection;
    if (in_flight_uid(c.uid) || (in_flight(*lane) != nullptr && !ahead_of_release(c, snapshot, now, projection))) {
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
    if (*lane == Lane::Disk && state_.lane(Lane::Disk) == LanePhase::ReclaimingDisk && !own_limit) {
      a.kind = K::Deferred;
      a.reason = "the disk reclaim command is running";
      out.push_back(std::move(a));
      continue;
    }
    if (*lane == Lane::Disk && config_.disk_reclaim && !own_limit &&
        (!state_.disk_reclaim_done_at || now - *state_.disk_reclaim_done_at > config_.disk_reclaim_validity)) {
      a.kind = K::DiskReclaim;
      state_.lanes[static_cast<std::size_t>(Lane::Disk)] = LanePhase::ReclaimingDisk;
      out.push_back(std::move(a));
      continue;
    }
    EvictionRecord f;
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
      f.delegated = report && !c.static_pod;
      f.kill_at = now + grace + (f.delegated ? config_.soft_kill_margin : Duration::zero());
      f.phase_deadline = f.kill_at;
    }
    if (report) {
      // One API eviction tracked per pod: this one replaces an older one's.
      for (auto& old : state_.records) {
        if (old.eviction.uid == c.uid) forget_api(old);
      }
      f.api = EvictionRecord::Api::Pending;
      if (f.killed && !c.static_pod) {
        f.killed_at = now;
        f.next_check = now + config_.restart_check_interval;
      }
    }
    a.kind = K::Start;
    a.eviction = f.eviction;
    a.report = report;
    a.delegate = f.delegated;
    state_.records.push_back(std::move(f));
    out.push_back(std::move(a));
  }
}

}  // namespace pressured
