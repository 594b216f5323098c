#include "daemon/alarms.hpp"

#include <algorithm>
#include <cerrno>

#include <spdlog/spdlog.h>

namespace pressured {

namespace {

uint64_t distance(uint64_t a, uint64_t b) { return a > b ? a - b : b - a; }

}  // namespace

AlarmReadings AlarmReader::read(const MemcgCounters& counters, const KernelAlarms& alarms) {
  AlarmReadings r;
  r.kubepods_path = counters.kubepods_path;
  r.kubepods_usage = counters.kubepods_usage;
  r.scope_path = counters.scope_path;
  r.scope_file_usage = counters.scope_file_usage;
  if (r.scope_path.empty()) return r;
  if (!counters.scope_is_root) {
    r.scope_counter_usage = r.scope_file_usage;
    return r;
  }
  // The children's sum misses what dying (removed, still charged) cgroups
  // hold; the BPF charge hook reads the real counter, but only on charges:
  // after a large free (an eviction) its last sample is too high until the
  // next charge. So: the children's sum, read now, plus the difference taken
  // from a sample only when it is nearly as fresh as that sum.
  const auto& children = counters.children_usage;
  const auto seen = alarms.watched_counter(r.scope_path, std::chrono::milliseconds(20));
  if (seen && children) root_counter_offset_ = static_cast<int64_t>(*seen) - static_cast<int64_t>(*children);
  if (children) {
    r.scope_counter_usage =
        static_cast<uint64_t>(std::max<int64_t>(0, static_cast<int64_t>(*children) + root_counter_offset_));
  }
  return r;
}

std::vector<AlarmCgroup> AlarmReader::scopes(const std::vector<MemcgScope>& scopes) {
  std::vector<AlarmCgroup> out;
  out.reserve(scopes.size());
  for (const auto& s : scopes) out.push_back({s.id, s.path, s.name});
  return out;
}

void ArmedAlarms::apply(const AlarmPlan& plan) {
  if (alarms_ == nullptr) return;
  if (plan.pid_alarm) apply_pid_alarm(*plan.pid_alarm);
  if (!plan.watches_known) return;  // a failed read: keep the watches as they are

  for (auto it = armed_.begin(); it != armed_.end();) {
    if (plan.watches.count(it->first) == 0) {
      if (it->second.id != 0) (void)alarms_->clear_watch(it->second.id);
      spdlog::debug("watch on {} cleared", it->first);
      it = armed_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [path, level] : plan.watches) {
    auto cur = armed_.find(path);
    if (cur != armed_.end() && cur->second.fired && cur->second.id != 0) {
      // An up edge came, yet the threshold is not crossed (the page counter
      // also moves with page cache the kubelet's formula counts as free): the
      // kernel side now sits "above" and would stay silent. Re-arm from scratch.
      (void)alarms_->clear_watch(cur->second.id);
      armed_.erase(cur);
      cur = armed_.end();
    }
    if (cur != armed_.end() && distance(level.file, cur->second.level.file) <= plan.hysteresis &&
        distance(level.counter, cur->second.level.counter) <= plan.hysteresis) {
      continue;  // keep the watch and its up/down state
    }
    auto id = alarms_->set_watch_levels(path, level.file, level.counter);
    if (id) {
      armed_[path] = Armed{*id, level, false};
      spdlog::debug("watch armed on {} at {} bytes of usage ({} bytes of page counter)", path, level.file,
                    level.counter);
    } else {
      // Remembered with id 0: retried only when the level moves past the
      // hysteresis, not warned about on every evaluation.
      armed_[path] = Armed{0, level, false};
      spdlog::warn("could not arm a memory watch on {}: {} (the safety-net poll covers it)", path,
                   id.error().message);
    }
  }
}

void ArmedAlarms::apply_pid_alarm(uint64_t want) {
  if (pid_alarm_unsupported_ || want == pid_alarm_) return;
  auto r = alarms_->set_pid_alarm(want);
  if (!r) {
    if (r.error().code == ENOTSUP) {
      pid_alarm_unsupported_ = true;
      spdlog::info("no PID alarm: {} (pid.available is seen by the safety-net poll)", r.error().message);
    } else {
      spdlog::warn("could not set the PID alarm at {} tasks: {}", want, r.error().message);
    }
    return;
  }
  pid_alarm_ = want;
  if (want != 0) spdlog::debug("PID alarm armed at {} tasks", want);
}

void ArmedAlarms::apply_tracking(const std::map<uint64_t, AlarmCgroup>& want) {
  if (alarms_ == nullptr || tracking_unsupported_) return;
  for (auto it = tracked_.begin(); it != tracked_.end();) {
    if (want.count(it->first) == 0) {
      (void)alarms_->untrack_memcg(it->first);  // ENOENT when already gone with its cgroup: fine
      spdlog::debug("memcg activity: stopped tracking {}", it->second);
      tracked_scopes_.erase(it->first);
      it = tracked_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [id, what] : want) {
    if (tracked_.count(id) != 0) continue;
    auto r = alarms_->track_memcg(what.path);
    if (!r) {
      if (r.error().code == ENOTSUP) {
        tracking_unsupported_ = true;
        spdlog::info("no per-pod reclaim activity: {}", r.error().message);
        return;
      }
      // The pod may be going away between the observation and now; retried next evaluation.
      spdlog::debug("memcg activity: cannot track {}: {}", what.path, r.error().message);
      continue;
    }
    tracked_[*r] = what.path;
    if (!what.scope.empty()) tracked_scopes_[*r] = what.scope;
  }
}

void ArmedAlarms::clear_watches() {
  if (alarms_ != nullptr) {
    for (const auto& [path, w] : armed_) {
      if (w.id != 0) (void)alarms_->clear_watch(w.id);
    }
  }
  armed_.clear();
  pid_alarm_unsupported_ = false;
}

void ArmedAlarms::watch_fired(WatchId id) {
  if (id == 0) return;
  for (auto& [path, w] : armed_) {
    if (w.id == id) w.fired = true;
  }
}

std::map<std::string, uint64_t> ArmedAlarms::watch_levels() const {
  std::map<std::string, uint64_t> out;
  for (const auto& [path, w] : armed_) {
    if (w.id != 0) out[path] = w.level.file;
  }
  return out;
}

}  // namespace pressured
