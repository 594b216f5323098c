#include "daemon/daemon.hpp"

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <utility>

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "daemon/alarm_plan.hpp"
#include "daemon/cycle_metrics.hpp"
#include "daemon/decision_view.hpp"
#include "daemon/event_triage.hpp"
#include "daemon/reload_plan.hpp"
#include "k8s/reporter.hpp"
#include "pressured/metrics.hpp"

namespace pressured {

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
      oom_kills_(deps_.metrics, &stats_),
      alarms_(deps_.alarms),
      plugins_(config_, deps_.plugins, deps_.metrics),
      // Its actions are checkpointed first, so that a restart resumes a kill
      // or an API eviction instead of choosing a second victim.
      executor_({deps_.evictor, deps_.reporter, deps_.metrics, &stats_, config_.get(), deps_.loop,
                 [this] { evaluate(MonotonicClock().now(), "disk_reclaim", std::nullopt); },
                 [this](TimePoint now) { maybe_checkpoint(now); }}),
      relief_(config_, policy_.relief(), deps_.reclaim, deps_.reclaim_unavailable, deps_.metrics, deps_.loop,
              // The run's end is an event: decide again on a full re-read.
              [this] { evaluate(MonotonicClock().now(), "relief", std::nullopt); }),
      // The reporter's answers reach the policy as inputs of its next step.
      api_inbox_(deps_.reporter, deps_.loop,
                 [this] { evaluate(MonotonicClock().now(), "api", std::nullopt, Observe::PartialOk); }) {
  if (deps_.metrics) {
    stats_export_ = export_stats(*deps_.metrics, stats_);
    deps_.metrics->set_thresholds(this->config().eviction);
    for (auto k = static_cast<int>(PolicyAction::Kind::Start); k <= static_cast<int>(PolicyAction::Kind::EndApi);
         ++k) {
      deps_.metrics->add(stats::kEvictionPolicyActions, {name(static_cast<PolicyAction::Kind>(k))}, 0);
    }
  }
}

Daemon::~Daemon() = default;

void Daemon::restore_checkpoint() {
  auto loaded = checkpointer_.restore();
  if (loaded.status == CheckpointLoad::Corrupt) ++stats_.checkpoint_corrupt;
  if (loaded.status != CheckpointLoad::Restored) return;
  // State of thresholds no longer configured (matched by signal and kind,
  // never by position) is dropped: it would time or hold the wrong threshold.
  if (std::size_t dropped = engine_.restore(loaded.checkpoint.engine); dropped > 0) {
    stats_.checkpoint_dropped_thresholds += dropped;
    spdlog::info("checkpoint: dropped the state of {} threshold(s) no longer configured", dropped);
  }
  policy_.restore(std::move(loaded.checkpoint.policy));  // a disk reclaim command died with the previous process
  // A cgroup that gave back little is not asked again for relief.backoff, a
  // restart included.
  if (std::size_t n = policy_.restore_relief(loaded.checkpoint.relief); n > 0) {
    spdlog::info("checkpoint: {} cgroup(s) back off from reclaim (until their time, at most relief.backoff)", n);
  }
  relief_.restored();
  report_busy();
  ++stats_.checkpoint_restored;
  conditions_.restored();
  const auto& rs = policy_.state().records;
  spdlog::info("checkpoint {} restored ({} soft thresholds timing, {} evictions in flight)", config().daemon.state_file,
               engine_.state().threshold_first_observed.size(),
               std::count_if(rs.begin(), rs.end(), [](const EvictionRecord& r) { return r.in_flight(); }));
}

void Daemon::save_checkpoint() { checkpointer_.save(engine_.state(), policy_.state(), policy_.relief().state()); }

void Daemon::maybe_checkpoint(TimePoint now) {
  checkpointer_.maybe_save(engine_.state(), policy_.state(), now, policy_.relief().state());
}

Checkpointer Daemon::make_checkpointer() const {
  Checkpointer c(config().daemon.state_file, deps_.boot_id);
  if (Metrics* m = deps_.metrics) c.on_write([m](bool ok) { m->add(stats::kCheckpointWrites, {result_name(ok)}); });
  return c;
}

void Daemon::on_events(std::span<const PressureEvent> events, TimePoint now) {
  // Events, ring-buffer losses and resyncs are counted by the reactor (EventStats).
  const EventTriage t = triage_events(events, busy(), [this](uint64_t id) {
    return id != 0 && std::any_of(last_.pods.begin(), last_.pods.end(), [&](const Pod& p) { return p.cgroup_id == id; });
  });
  for (const PressureEvent* ev : t.oom_kills) oom_kills_.on_event(*ev);
  for (uint64_t id : t.fired_watches) alarms_.watch_fired(id);
  for (const PressureEvent* ev : t.pid_alarms) {
    spdlog::info("PID alarm {}: the kernel counts {} tasks (alarm {})", ev->type == EventType::PidAlarmUp ? "up" : "down",
                 ev->value, alarms_.pid_alarm());
  }
  // A kernel OOM kill is counted with its scope from a full observation's counters.
  const bool full = t.resync || oom_kills_.has_pending();
  if (t.decide || busy()) evaluate(now, t.source, t.earliest_edge, full ? Observe::Full : Observe::PartialOk);
}

void Daemon::on_deadline(TimePoint now) { evaluate(now, "deadline", std::nullopt, Observe::PartialOk); }

void Daemon::arm_deadline(const Decisions& d, TimePoint now) {
  if (deps_.loop == nullptr) return;
  // The engine's (a grace end, a condition's transition period), the
  // policy's (a grace end, a kill or release timeout, a restart check) and
  // the end of a relief hold.
  std::optional<TimePoint> next = engine_wake(d, engine_.state(), config().eviction.pressure_transition_period, now);
  for (auto at : {policy_.next_deadline(), relief_.deadline()}) {
    if (at && (!next || *at < *next)) next = at;
  }
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
    if (deps_.metrics) {
      deps_.metrics->add(stats::kConfigReloads, {result_name(false)});
      deps_.metrics->set(stats::kConfigLastReloadSuccessful, {}, 0);
    }
    spdlog::error("config reload rejected, keeping the previous configuration: {}", c.error().message);
    return false;
  }
  c->eviction.thresholds = with_containerfs_thresholds(std::move(c->eviction.thresholds), deps_.containerfs_layout);
  ReloadPlan plan = plan_reload(config(), std::move(*c));
  if (!plan.needs_restart.empty()) {
    spdlog::warn("config reload: changes to {} take effect at the next restart; the running values stay",
                 fmt::join(plan.needs_restart, ", "));
  }
  if (plan.dry_run_changed) spdlog::info("reload: dry run {}", plan.config.daemon.dry_run ? "on" : "off");
  // One swap: the engine, the policy and the executor read this snapshot
  // from their next evaluation (the policy re-derives the grace ends of the
  // evictions in flight from it).
  config_->replace(std::move(plan.config));
  if (plan.state_file_changed) {
    checkpointer_ = make_checkpointer();
    save_checkpoint();  // the new file holds the state from now on
  }
  spdlog::set_level(spdlog::level::from_str(config().log.level));
  if (deps_.metrics) {
    deps_.metrics->set_thresholds(config().eviction);
    deps_.metrics->add(stats::kConfigReloads, {result_name(true)});
    deps_.metrics->set(stats::kConfigLastReloadSuccessful, {}, 1);
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
                            alarm_reader_.read(deps_.observer->read_memcg_counters(), *deps_.alarms),
                            config().daemon.predictive_lead));
}

void Daemon::evaluate(TimePoint now, std::string_view source, std::optional<TimePoint> kernel_time, Observe observe) {
  // The policy, the snapshot and the alarms belong to the loop's thread;
  // other threads hand their results over with EventLoop::post.
  if (deps_.loop != nullptr && !deps_.loop->is_loop_thread()) abort_off_loop_thread("Daemon::evaluate", "the event loop's");
  Metrics* m = deps_.metrics;
  if (m) m->heartbeat();

  // Observe: a partial refresh or a full observation.
  auto observed = observe_for_decision(*deps_.observer, last_, last_full_observation_, config(), policy_, now,
                                       observe == Observe::PartialOk, stats_);
  if (!observed) return;
  const bool full = *observed;
  if (full && deps_.alarms != nullptr && deps_.observer != nullptr && alarms_.tracking_supported()) {
    // The pod set changes only with a full observation.
    alarms_.apply_tracking(plan_tracking(AlarmReader::scopes(deps_.observer->memcg_scopes()), last_));
  }
  if (full) oom_kills_.reconcile(last_);
  if (m) publish_observation(*m, last_, full);

  // What came of earlier actions: the policy's inputs.
  PolicyInputs in;
  in.disk_reclaim_finished = executor_.take_disk_reclaim_finished();
  in.api_answers = api_inbox_.take();
  executor_.probe(policy_.probes(now), in);

  // Decide: the engine, on fresh reads; targets the evictor refuses never reach the policy.
  Decisions d = engine_.evaluate(last_, now, policy_.excluded());
  if (plugins_.enabled()) {
    // Plugins' latest answers (never waited for), then the next questions.
    plugins_.step(now, last_, d, policy_.excluded(), in_flight_view(policy_, now).held);
  }
  stamp_wake(d, source, kernel_time, m);
  conditions_.publish(d, now);
  if (m) publish_decisions(*m, d);
  // Relief: memory candidates may wait (within their budget) for reclaim.
  relief_.carry_out(policy_.relieve(now, last_, d, config().eviction, relief_.take_outcome()));
  in.refused = executor_.refuse_invalid(d.candidates);
  attribute_containers(d, last_, policy_, *deps_.observer, now);

  // Act: the policy's actions, carried out by the executor (checkpointed first).
  executor_.execute(policy_.step(now, last_, d, in), now, policy_.state());
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

}  // namespace pressured
