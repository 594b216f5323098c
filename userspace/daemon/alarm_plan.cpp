#include "daemon/alarm_plan.hpp"

#include <algorithm>
#include <cmath>

namespace pressured {

uint64_t watch_hysteresis(double capacity_bytes) {
  return std::max<uint64_t>(8ull << 20, static_cast<uint64_t>(std::max(0.0, capacity_bytes) / 100.0));
}

namespace {

// tasks now + (available - threshold) = capacity - threshold; the signal is
// met when available < threshold, i.e. at capacity - threshold + 1 tasks (at
// exactly capacity - threshold the evaluation would find nothing to do and the
// edge would be spent). Planned even when already crossed: the kernel side
// then reports the fall back and the next rise.
std::optional<uint64_t> plan_pid_alarm(const std::vector<Threshold>& thresholds, const NodeSnapshot& s) {
  const auto& obs = s.signal(Signal::PidAvailable);
  if (obs && obs->stale) return std::nullopt;
  uint64_t want = 0;
  if (!obs || obs->capacity <= 0) return want;
  for (const auto& t : thresholds) {
    if (t.signal != Signal::PidAvailable) continue;
    const double level = std::floor(obs->capacity - t.value.resolve(obs->capacity)) + 1;
    if (level < 1 || level > obs->capacity) continue;
    const auto l = static_cast<uint64_t>(level);
    want = want == 0 ? l : std::min(want, l);
  }
  return want;
}

}  // namespace

AlarmPlan plan_alarms(const std::vector<Threshold>& thresholds, const NodeSnapshot& snapshot,
                      const AlarmReadings& r, Duration predictive_lead) {
  AlarmPlan plan;
  plan.pid_alarm = plan_pid_alarm(thresholds, snapshot);

  // kubepods usage: the page counter, else its working set from
  // allocatableMemory.available.
  std::optional<double> kp_usage;
  if (r.kubepods_usage) {
    kp_usage = static_cast<double>(*r.kubepods_usage);
  } else if (const auto& a = snapshot.signal(Signal::AllocatableMemoryAvailable);
             a && a->capacity > 0 && !a->stale) {
    kp_usage = a->capacity - a->value;
  }
  auto propose = [&plan](const std::string& path, double file_level, double counter_level) {
    if (path.empty() || file_level <= 0 || counter_level <= 0) return;
    const WatchLevels l{static_cast<uint64_t>(file_level), static_cast<uint64_t>(counter_level)};
    auto [it, inserted] = plan.watches.emplace(path, l);
    if (!inserted) {
      it->second.file = std::min(it->second.file, l.file);
      it->second.counter = std::min(it->second.counter, l.counter);
    }
  };
  double hysteresis_capacity = 0;
  for (const auto& t : thresholds) {
    if (t.signal != Signal::MemoryAvailable && t.signal != Signal::AllocatableMemoryAvailable) continue;
    const auto& obs = snapshot.signal(t.signal);
    if (obs && obs->stale) {
      plan.watches_known = false;
      plan.watches.clear();
      return plan;
    }
    if (!obs || obs->capacity <= 0) continue;
    double headroom = obs->value - t.value.resolve(obs->capacity);  // bytes until the threshold
    if (headroom <= 0) continue;
    if (predictive_lead > Duration::zero() && t.kind == ThresholdKind::Hard &&
        headroom / 2 >= static_cast<double>(watch_hysteresis(obs->capacity))) {
      headroom /= 2;
    }
    hysteresis_capacity = std::max(hysteresis_capacity, obs->capacity);
    if (kp_usage) {
      propose(r.kubepods_path, *kp_usage + headroom, *kp_usage + headroom);
    } else if (t.signal == Signal::AllocatableMemoryAvailable) {
      const double level = obs->capacity - obs->value + headroom;
      propose(r.kubepods_path, level, level);
    }
    // memory.available falls just as fast when the memory goes to a process
    // outside kubepods: watch the node scope too.
    if (t.signal == Signal::MemoryAvailable && r.scope_counter_usage) {
      const double counter_level = static_cast<double>(*r.scope_counter_usage) + headroom;
      const double file_level = r.scope_file_usage ? static_cast<double>(*r.scope_file_usage) + headroom : counter_level;
      propose(r.scope_path, file_level, counter_level);
    }
  }
  plan.hysteresis = watch_hysteresis(hysteresis_capacity);
  return plan;
}

std::map<uint64_t, AlarmCgroup> plan_tracking(const std::vector<AlarmCgroup>& scopes, const NodeSnapshot& snapshot) {
  std::map<uint64_t, AlarmCgroup> want;
  for (const auto& c : scopes) {
    if (c.id != 0) want.emplace(c.id, c);
  }
  for (const auto& p : snapshot.pods) {
    if (p.cgroup_id != 0 && !p.cgroup_path.empty()) want.emplace(p.cgroup_id, AlarmCgroup{p.cgroup_id, p.cgroup_path, ""});
  }
  return want;
}

std::optional<TimePoint> engine_wake(const Decisions& d, const EngineState& state,
                                     Duration pressure_transition_period, TimePoint now) {
  std::optional<TimePoint> next;
  auto consider = [&next](TimePoint at) {
    if (!next || at < *next) next = at;
  };
  for (const auto& t : d.thresholds) {
    if (t.threshold.kind != ThresholdKind::Soft || !t.met || t.grace_elapsed || !t.first_observed) continue;
    consider(*t.first_observed + t.threshold.grace_period + std::chrono::milliseconds(1));
  }
  for (std::size_t c = 0; c < kConditionCount; ++c) {
    const auto& last = state.condition_last_met[c];
    if (!d.conditions[c] || !last || *last >= now) continue;
    consider(*last + pressure_transition_period + std::chrono::milliseconds(1));
  }
  return next;
}

}  // namespace pressured
