#include "daemon/daemon.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <utility>

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "cgroup/paths.hpp"
#include "daemon/crash_point.hpp"
#include "daemon/cycle_metrics.hpp"
#include "daemon/decision_view.hpp"
#include "daemon/event_triage.hpp"
#include "k8s/reporter.hpp"
#include "pressured/metrics.hpp"

namespace pressured {

namespace {


double seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

Daemon::Daemon(Config config, DaemonDeps deps)
    : config_([&] {
        // Derived before the engine and the checkpoint see the thresholds, so a
        // restart keeps containerfs grace-period timing like any other.
        config.eviction.thresholds =
            with_containerfs_thresholds(std::move(config.eviction.thresholds), deps.containerfs_layout);
        return std::make_shared<LiveConfig>(std::move(config));
      }()),
      deps_(std::move(deps)),
      engine_(config_),
      policy_(config_, [this] {
        PolicyConfig p;
        p.api = deps_.reporter != nullptr;
        p.relief = deps_.reclaim != nullptr;
        char prefix[24];
        std::snprintf(prefix, sizeof prefix, "%lx", static_cast<unsigned long>(std::time(nullptr)));
        p.id_prefix = prefix;
        return p;
      }()),
      checkpointer_(make_checkpointer()),
      conditions_(deps_.reporter == nullptr
                      ? ConditionPublisher::Report()
                      : [r = deps_.reporter](const ConditionPublisher::Conditions& status,
                                             const ConditionPublisher::Conditions& changed) {
                          r->report_conditions(status, changed);
                        },
                  deps_.metrics),
      alarms_(deps_.alarms),
      plugins_(config_, deps_.plugins, deps_.metrics),
      executor_({deps_.evictor, deps_.reporter, deps_.metrics, &stats_, config_.get(), deps_.loop,
                 [this] { evaluate(MonotonicClock().now(), "disk_reclaim", std::nullopt); }}),
      relief_(config_, policy_.relief(), deps_.reclaim, deps_.reclaim_unavailable, deps_.metrics,
              deps_.loop,
              // The run's end is an event: decide again on a full re-read.
              [this] { evaluate(MonotonicClock().now(), "relief", std::nullopt); }) {
  if (deps_.reporter != nullptr) {
    // The worker thread's answers reach the policy as inputs of its next step.
    deps_.reporter->set_eviction_hook([this](const std::string& id, k8s::EvictionResult r) {
      using E = k8s::EvictionResult;
      using R = ApiAnswer::Result;
      on_api_answer(id,
                    r == E::Landed || r == E::Recorded ? R::Landed
                    : r == E::NotNeeded                ? R::NotNeeded
                    : r == E::GaveUp                   ? R::GaveUp
                                                       : R::Dropped,
                    r == E::Recorded);
    });
  }
  if (deps_.metrics) {
    stats_export_ = export_stats(*deps_.metrics, stats_);
    deps_.metrics->set_thresholds(this->config().eviction);
    for (auto k = static_cast<int>(PolicyAction::Kind::Start); k <= static_cast<int>(PolicyAction::Kind::EndApi);
         ++k) {
      deps_.metrics->policy_action(name(static_cast<PolicyAction::Kind>(k)), 0);
    }
  }
}

Daemon::~Daemon() {
  if (deps_.reporter != nullptr) deps_.reporter->set_eviction_hook({});
}

void Daemon::on_api_answer(const std::string& id, ApiAnswer::Result result, bool recorded) {
  if (result == ApiAnswer::Result::Landed) crash_point("api-landed");
  {
    std::lock_guard lk(api_answers_mu_);
    api_answers_.push_back({id, result, recorded});
  }
  // Recorded (and checkpointed) at once, not at the next tick: a restart
  // before then would send it again (harmless: the reporter skips a pod
  // already terminating), so soon is only tidier.
  if (deps_.loop != nullptr) {
    deps_.loop->post([this] { evaluate(MonotonicClock().now(), "api", std::nullopt, Observe::PartialOk); });
  }
}

std::vector<ApiAnswer> Daemon::take_api_answers() {
  std::lock_guard lk(api_answers_mu_);
  return std::exchange(api_answers_, {});
}

void Daemon::restore_checkpoint() {
  if (!checkpointer_.enabled()) return;
  auto loaded = checkpointer_.load();
  switch (loaded.status) {
    case CheckpointLoad::Missing:
      spdlog::info("checkpoint {}: none, starting fresh", config().daemon.state_file);
      return;
    case CheckpointLoad::Corrupt:
      ++stats_.checkpoint_corrupt;
      spdlog::warn("checkpoint ignored (corrupt): {}", loaded.error);
      return;
    case CheckpointLoad::OtherBoot:
      spdlog::info("checkpoint ignored: {}", loaded.error);
      return;
    case CheckpointLoad::Restored:
      break;
  }
  // State of thresholds no longer configured (matched by signal and kind,
  // never by position) is dropped: it would time or hold the wrong threshold.
  if (std::size_t dropped = engine_.restore(loaded.checkpoint.engine); dropped > 0) {
    stats_.checkpoint_dropped_thresholds += dropped;
    spdlog::info("checkpoint: dropped the state of {} threshold(s) no longer configured", dropped);
  }
  PolicyState ps = loaded.checkpoint.policy;
  for (const auto& f : ps.records) {
    if (!f.in_flight()) continue;
    spdlog::info("checkpoint: resuming eviction {} of {} ({}{})", f.eviction.id,
                 pod_label(f.eviction.namespace_, f.eviction.name, f.eviction.uid),
                 f.local == EvictionRecord::Local::Terminating ? "terminating" : "releasing",
                 f.killed ? ", killed" : "");
  }
  for (const auto& r : ps.records) {
    if (r.api == EvictionRecord::Api::Confirmed || r.api == EvictionRecord::Api::None) continue;
    spdlog::info("checkpoint: the API eviction {} of {} was not confirmed: sending it again",
                 r.eviction.id, pod_label(r.eviction.namespace_, r.eviction.name, r.eviction.uid));
  }
  const std::size_t resumed =
      std::count_if(ps.records.begin(), ps.records.end(), [](const EvictionRecord& r) { return r.in_flight(); });
  policy_.restore(std::move(ps));  // a disk reclaim command died with the previous process
  // A cgroup that gave back little is not asked again for relief.backoff, a
  // restart included.
  const std::size_t n = policy_.restore_relief(loaded.checkpoint.relief);
  relief_.restored();
  if (n > 0) {
    spdlog::info("checkpoint: {} cgroup(s) back off from reclaim (until their time, at most relief.backoff)", n);
  }
  report_busy();
  ++stats_.checkpoint_restored;
  conditions_.restored();
  spdlog::info("checkpoint {} restored ({} soft thresholds timing, {} evictions in flight)", config().daemon.state_file,
               engine_.state().threshold_first_observed.size(), resumed);
}

void Daemon::save_checkpoint() { checkpointer_.save(engine_.state(), policy_.state(), policy_.relief().state()); }

void Daemon::maybe_checkpoint(TimePoint now) {
  checkpointer_.maybe_save(engine_.state(), policy_.state(), now, policy_.relief().state());
}

Checkpointer Daemon::make_checkpointer() const {
  Checkpointer c(config().daemon.state_file, deps_.boot_id);
  if (Metrics* m = deps_.metrics) c.on_write([m](bool ok) { m->checkpoint_write(ok); });
  return c;
}

bool Daemon::is_pod_cgroup(uint64_t cgroup_id) const {
  if (cgroup_id == 0) return false;
  return std::any_of(last_.pods.begin(), last_.pods.end(), [&](const Pod& p) { return p.cgroup_id == cgroup_id; });
}

void Daemon::on_events(std::span<const PressureEvent> events, TimePoint now) {
  // Events, ring-buffer losses and resyncs are counted by the reactor (EventStats).
  const EventTriage t = triage_events(events, busy(), [this](uint64_t id) { return is_pod_cgroup(id); });
  for (const PressureEvent* ev : t.oom_kills) report_kernel_oom_kill(*ev);
  for (uint64_t id : t.fired_watches) alarms_.watch_fired(id);
  for (const PressureEvent* ev : t.pid_alarms) {
    spdlog::info("PID alarm {}: the kernel counts {} tasks (alarm {})", ev->type == EventType::PidAlarmUp ? "up" : "down",
                 ev->value, alarms_.pid_alarm());
  }
  if (t.decide || busy()) evaluate(now, t.source, t.earliest_edge, t.resync ? Observe::Full : Observe::PartialOk);
}

void Daemon::report_kernel_oom_kill(const PressureEvent& ev) {
  // An OomVictim's memcg is the victim's own, except with older kernels'
  // mark_victim(pid) (value 1: the allocating task's); a memory.events
  // increase is the watched cgroup's, its value the number of kills.
  const bool victim_memcg = ev.type == EventType::OomVictim && ev.value == 0;
  const uint64_t kills = ev.type == EventType::MemoryEventOomKill ? static_cast<uint64_t>(std::max<int64_t>(ev.value, 0)) : 1;
  const uint64_t fresh = oom_kills_.on_event(ev.cgroup_id, victim_memcg, ev.pid, kills);
  if (fresh == 0) {
    spdlog::debug("kernel OOM kill of pid {} in cgroup id {}: already counted", ev.pid, ev.cgroup_id);
    return;
  }
  const std::optional<QosClass> qos = qos_of_memcg(ev.cgroup_id, oom_kills_.path_of(ev.cgroup_id));
  spdlog::error("kernel OOM kill: pid {} in cgroup id {} ({}): pressured did not act in time", ev.pid, ev.cgroup_id,
                qos ? std::string(name(*qos)) : std::string("not a pod"));
  if (deps_.metrics) {
    for (uint64_t i = 0; i < fresh; ++i) deps_.metrics->kernel_oom_kill(qos);
  }
}

void Daemon::reconcile_oom_kills() {
  if (!last_.oom_kills) {
    oom_kills_.unread();
    return;
  }
  for (const auto& m : oom_kills_.reconcile(*last_.oom_kills)) {
    const std::optional<QosClass> qos = qos_of_memcg(m.cgroup_id, m.path);
    spdlog::error("kernel OOM kill: {} in {} ({}) that no event reported, found in the kernel's counters: pressured "
                  "did not act in time",
                  m.kills == 1 ? std::string("1 process") : fmt::format("{} processes", m.kills), m.path,
                  qos ? std::string(name(*qos)) : std::string("not a pod"));
    stats_.unreported_oom_kills += m.kills;
    if (deps_.metrics) {
      for (uint64_t i = 0; i < m.kills; ++i) deps_.metrics->kernel_oom_kill(qos);
    }
  }
}

std::optional<QosClass> Daemon::qos_of_memcg(uint64_t cgroup_id, const std::string& path) const {
  for (const auto& p : last_.pods) {
    if (cgroup_id != 0 && p.cgroup_id == cgroup_id) return p.qos;
    if (!path.empty() && !p.cgroup_path.empty() && path.size() > p.cgroup_path.size() &&
        path.compare(0, p.cgroup_path.size(), p.cgroup_path) == 0 && path[p.cgroup_path.size()] == '/') {
      return p.qos;
    }
  }
  return std::nullopt;
}

void Daemon::on_deadline(TimePoint now) { evaluate(now, "deadline", std::nullopt, Observe::PartialOk); }

void Daemon::arm_deadline(const Decisions& d, TimePoint now) {
  if (deps_.loop == nullptr) return;
  std::optional<TimePoint> next;
  auto consider = [&next](TimePoint at) {
    if (!next || at < *next) next = at;
  };
  // 1 ms past each end: the engine compares "for the whole period".
  for (const auto& t : d.thresholds) {
    if (t.threshold.kind != ThresholdKind::Soft || !t.met || t.grace_elapsed || !t.first_observed) continue;
    consider(*t.first_observed + t.threshold.grace_period + std::chrono::milliseconds(1));
  }
  // A condition no longer met goes back to False when the pressure-transition
  // period has passed since it was last met: publish that on time too.
  const EngineState& st = engine_.state();  // no copy: read here, on every evaluation
  for (std::size_t c = 0; c < kConditionCount; ++c) {
    const auto& last = st.condition_last_met[c];
    if (!d.conditions[c] || !last || *last >= now) continue;
    consider(*last + config().eviction.pressure_transition_period + std::chrono::milliseconds(1));
  }
  // The policy's own: a grace end, a kill or release timeout, a restart check.
  if (auto p = policy_.next_deadline()) consider(*p);
  if (auto r = relief_.deadline()) consider(*r);  // the end of a relief hold
  if (next == next_deadline_) return;
  next_deadline_ = next;
  deps_.loop->wake_at(next);
}

void Daemon::on_tick(TimePoint now, bool safety_net) {
  if (!safety_net) {
    evaluate(now, "poll", std::nullopt);  // the poll mode (the kubelet-like baseline) reads everything each time
    return;
  }
  auto any_met = [this] {
    return std::any_of(last_decisions_.thresholds.begin(), last_decisions_.thresholds.end(),
                       [](const auto& t) { return t.met; });
  };
  const bool met_before = any_met();
  evaluate(now, "safety_net", std::nullopt, Observe::PartialOk);
  // The reactor counts the polls (EventStats); only the daemon knows a poll found a missed crossing.
  if (any_met() && !met_before) {
    ++stats_.safety_net_detections;
    spdlog::debug("safety net found a threshold crossing no event reported");
  }
}

void Daemon::on_signal(int signo) {
  if (signo == SIGHUP) {
    reload();
    return;
  }
  spdlog::info("received {}, stopping", signo == SIGTERM ? "SIGTERM" : signo == SIGINT ? "SIGINT" : "a signal");
  save_checkpoint();
  if (deps_.on_stop) {
    deps_.on_stop();
  } else if (deps_.loop) {
    deps_.loop->stop();
  }
}

bool Daemon::reload() {
  if (!deps_.reload) {
    spdlog::warn("SIGHUP: no configuration source to reload from");
    return false;
  }
  auto c = deps_.reload();
  if (!c) {
    if (deps_.metrics) deps_.metrics->config_reload(false);
    spdlog::error("config reload rejected, keeping the previous configuration: {}", c.error().message);
    return false;
  }
  Config& n = *c;
  const Config& old = config();
  n.eviction.thresholds = with_containerfs_thresholds(std::move(n.eviction.thresholds), deps_.containerfs_layout);
  // What the running process was built from stays in force until a restart
  // (observation, event sources, the API connection, the metrics server, the
  // log format): the snapshot says what is in force, not what the file wishes.
  std::vector<std::string_view> needs_restart;
  auto keep = [&](auto& fresh, const auto& running, std::string_view section) {
    if (!(fresh == running)) needs_restart.push_back(section);
    fresh = running;
  };
  keep(n.observe, old.observe, "cgroup/pods");
  keep(n.events, old.events, "events");
  keep(n.kubernetes, old.kubernetes, "kubernetes");
  keep(n.metrics, old.metrics, "metrics");
  keep(n.log.format, old.log.format, "log.format");
  keep(n.plugins, old.plugins, "plugins");
  keep(n.daemon.lock_memory, old.daemon.lock_memory, "daemon.lockMemory");
  keep(n.daemon.release_victim_memory, old.daemon.release_victim_memory, "daemon.releaseVictimMemory");
  if (!needs_restart.empty()) {
    spdlog::warn("config reload: changes to {} take effect at the next restart; the running values stay",
                 fmt::join(needs_restart, ", "));
  }
  if (n.daemon.dry_run != old.daemon.dry_run) {
    spdlog::info("reload: dry run {}", n.daemon.dry_run ? "on" : "off");
  }
  const bool new_state_file = n.daemon.state_file != old.daemon.state_file;
  // One swap: the engine, the policy and the executor read this snapshot
  // from their next evaluation (the policy re-derives the grace ends of the
  // evictions in flight from it). `old` is not used after it.
  config_->replace(std::move(n));
  if (new_state_file) {
    checkpointer_ = make_checkpointer();
    save_checkpoint();  // the new file holds the state from now on
  }
  spdlog::set_level(spdlog::level::from_str(config().log.level));
  if (deps_.metrics) {
    deps_.metrics->set_thresholds(config().eviction);
    deps_.metrics->config_reload(true);
  }
  spdlog::info("config reloaded: {} thresholds (cgroup/pods/events/metrics/kubernetes changes need a restart)",
               config().eviction.thresholds.size());
  alarms_.clear_watches();  // re-armed with the new thresholds
  arm_watches();
  return true;
}

void Daemon::arm_watches() {
  if (deps_.alarms == nullptr || deps_.observer == nullptr) return;
  alarms_.apply(plan_alarms(config().eviction.thresholds, last_,
                            alarm_reader_.read(deps_.observer->read_memcg_counters(), *deps_.alarms)));
}

void Daemon::sync_tracked_memcgs() {
  if (deps_.alarms == nullptr || deps_.observer == nullptr || !alarms_.tracking_supported()) return;
  alarms_.apply_tracking(plan_tracking(AlarmReader::scopes(deps_.observer->memcg_scopes()), last_));
}

bool Daemon::observe_for_decision(TimePoint now, Observe observe, bool& full) {
  // An event or a safety-net tick between full observations (at most
  // events.fullObservationInterval apart) re-reads only what the decision
  // uses: the fresh-read guarantee is the same, and an idle node then costs
  // a few signal reads a tick instead of a walk over every pod. While an
  // eviction is in flight that includes its victim, and a lane the policy
  // holds needs no ranking (docs/observation.md, "Decisions while an
  // eviction is in flight"). The poll mode takes a full observation.
  full = true;
  if (observe == Observe::PartialOk && last_full_observation_ &&
      now - *last_full_observation_ < config().events.effective_full_observation_interval()) {
    InFlightView in_flight;
    for (const auto& f : policy_.state().records) {
      if (f.in_flight()) in_flight.victims.push_back(f.eviction.uid);
    }
    for (const Eviction& e : policy_.probes(now)) {
      if (std::find(in_flight.victims.begin(), in_flight.victims.end(), e.uid) == in_flight.victims.end()) {
        in_flight.victims.push_back(e.uid);
      }
    }
    for (std::size_t l = 0; l < kLaneCount; ++l) in_flight.held[l] = policy_.holds_lane(static_cast<Lane>(l), now);
    auto r = refresh_for_decision(*deps_.observer, last_, config().eviction, policy_.excluded(), now, in_flight);
    if (r) {
      full = false;
      ++stats_.incremental_evaluations;
      return true;
    }
    spdlog::debug("partial refresh not enough ({}): full observation", r.error().message);
  }
  auto snap = deps_.observer->observe(now);
  if (!snap) {
    ++stats_.observe_failures;
    spdlog::warn("observation failed: {}", snap.error().message);
    return false;
  }
  last_ = std::move(*snap);
  last_full_observation_ = now;
  ++stats_.full_observations;
  return true;
}

void Daemon::evaluate(TimePoint now, std::string_view source, std::optional<TimePoint> kernel_time, Observe observe) {
  // The policy, the snapshot and the alarms belong to the loop's thread;
  // other threads hand their results over with EventLoop::post.
  if (deps_.loop != nullptr && !deps_.loop->is_loop_thread()) abort_off_loop_thread("Daemon::evaluate", "the event loop's");
  Metrics* m = deps_.metrics;
  if (m) m->heartbeat();

  // Observe: a partial refresh or a full observation.
  bool full = true;
  if (!observe_for_decision(now, observe, full)) return;
  if (full) {
    sync_tracked_memcgs();  // the pod set changes only with a full observation
    reconcile_oom_kills();
  }
  if (m) publish_observation(*m, last_, full);

  // What came of earlier actions: the policy's inputs.
  PolicyInputs in;
  in.disk_reclaim_finished = executor_.take_disk_reclaim_finished();
  in.api_answers = take_api_answers();
  probe_victims(now, in);

  // Decide: the engine, on fresh reads; targets the evictor refuses never reach the policy.
  Decisions d = engine_.evaluate(last_, now, policy_.excluded());
  if (plugins_.enabled()) {
    // Plugins' latest answers (never waited for), then the next questions.
    std::array<bool, kLaneCount> held{};
    for (std::size_t l = 0; l < kLaneCount; ++l) held[l] = policy_.holds_lane(static_cast<Lane>(l), now);
    plugins_.step(now, last_, d, policy_.excluded(), held);
  }
  stamp_wake(d, source, kernel_time);
  conditions_.publish(d, now);
  if (m) publish_decisions(*m, d);
  // Relief: memory candidates may wait (within their budget) for reclaim.
  relief_.carry_out(policy_.relieve(now, last_, d, config().eviction, relief_.take_outcome()));
  in.refused = executor_.refuse_invalid(d.candidates);
  attribute_containers(d, now);

  // Act: the policy's actions, checkpointed first so that a restart resumes a
  // kill or an API eviction instead of choosing a second victim.
  auto actions = policy_.step(now, last_, d, in);
  const bool started = std::any_of(actions.begin(), actions.end(),
                                   [](const PolicyAction& a) { return a.kind == PolicyAction::Kind::Start; });
  if (started) crash_point("decision");
  if (!actions.empty()) maybe_checkpoint(now);
  if (started) crash_point("checkpoint");
  executor_.execute(actions, now);
  if (!started && std::any_of(policy_.state().records.begin(), policy_.state().records.end(), [](const auto& f) {
        return f.local == EvictionRecord::Local::Terminating && !f.killed;
      })) {
    crash_point("grace");
  }
  arm_deadline(d, now);

  // Publish the per-pod series, then re-arm the kernel alarms for what is now.
  if (m && full) publish_pods(*m, last_, alarms_.tracked(), alarms_.tracked_scopes(), deps_.alarms);
  last_decisions_ = std::move(d);
  arm_watches();
  maybe_checkpoint(now);
  report_busy();
}

void Daemon::report_busy() {
  const bool now_busy = busy();
  if (now_busy == reported_busy_) return;
  reported_busy_ = now_busy;
  if (deps_.on_busy_changed) deps_.on_busy_changed(now_busy);
}

void Daemon::stamp_wake(Decisions& d, std::string_view source, std::optional<TimePoint> kernel_time) {
  std::optional<double> latency;
  if (kernel_time) latency = std::max(0.0, seconds(MonotonicClock().now() - *kernel_time));
  if (latency && deps_.metrics) {
    deps_.metrics->detection_latency(source, *latency);
    spdlog::debug("decision from {} {:.3f} ms after the kernel's event", source, *latency * 1e3);
  }
  // What woke this decision goes into the eviction's messages.
  for (auto& c : d.candidates) {
    c.wake_source = source;
    c.detection_latency_seconds = latency;
  }
}

void Daemon::attribute_containers(Decisions& d, TimePoint now) {
  // Only a memory candidate the policy may start now (its lane free): each
  // of its containers' cgroups is read once, for the kubelet's sentences.
  for (auto& c : d.candidates) {
    if (info(c.signal).resource != StarvedResource::Memory || !c.local_storage_rule.empty()) continue;
    const auto lane = lane_of(c.signal);
    if (!lane || policy_.holds_lane(*lane, now)) continue;
    auto pod = std::find_if(last_.pods.begin(), last_.pods.end(), [&](const Pod& p) { return p.uid == c.uid; });
    if (pod == last_.pods.end()) continue;
    c.containers = container_usage(*pod, StarvedResource::Memory, deps_.observer->container_memory(*pod));
  }
}

void Daemon::probe_victims(TimePoint now, PolicyInputs& in) {
  for (const Eviction& e : policy_.probes(now)) {
    auto empty = executor_.evictor().is_empty(target_of(e));
    if (!empty) {
      // Asked at every decision while the victim is in flight: once in the log.
      if (executor_.first_report("probe " + e.id)) {
        spdlog::warn("eviction {}: cannot tell whether {} is empty: {} (logged once for this eviction)", e.id,
                     e.cgroup_path, empty.error().message);
      }
    } else {
      (*empty ? in.exited : in.running).push_back(e.uid);
    }
  }
}

}  // namespace pressured
