#include "daemon/event_triage.hpp"

#include <algorithm>

namespace pressured {

namespace {

bool never_a_reason(EventType t) {
  return t == EventType::ThresholdDown || t == EventType::PidAlarmDown || t == EventType::MemcgReclaimEnd ||
         t == EventType::DirectReclaimEnd || t == EventType::CgroupMkdir;
}

bool batched_hint(const PressureEvent& ev) {
  return ev.source == EventSource::Bpf &&
         (ev.type == EventType::MemcgReclaimBegin || ev.type == EventType::DirectReclaimBegin ||
          ev.type == EventType::KswapdWakeup || ev.type == EventType::Memstall);
}

}  // namespace

EventTriage triage_events(std::span<const PressureEvent> events, bool busy,
                          const std::function<bool(uint64_t cgroup_id)>& is_pod_cgroup) {
  EventTriage t;
  bool edge_seen = false;
  for (const auto& ev : events) {
    switch (ev.type) {
      case EventType::OomVictim:
      case EventType::MemoryEventOomKill: t.oom_kills.push_back(&ev); break;
      case EventType::ThresholdUp: t.fired_watches.push_back(ev.watch_id); break;
      case EventType::Resync: t.resync = true; break;
      case EventType::PidAlarmUp:
      case EventType::PidAlarmDown: t.pid_alarms.push_back(&ev); break;
      default: break;
    }
    if (never_a_reason(ev.type)) continue;  // the safety net still runs
    // Lifecycle events come for every cgroup of the hierarchy (systemd scopes,
    // other daemons' cgroups): only a pod's own cgroup going away or emptying
    // is a reason to decide again. New pods are picked up by the next observation.
    if ((ev.type == EventType::CgroupRmdir || ev.type == EventType::CgroupPopulated) && !busy &&
        !(ev.cgroup_id != 0 && is_pod_cgroup(ev.cgroup_id))) {
      continue;
    }
    if (!t.decide) t.source = name(ev.source);
    t.decide = true;
    if (batched_hint(ev)) continue;
    if (!edge_seen) t.source = name(ev.source);
    edge_seen = true;
    if (ev.kernel_ns != 0 && (!t.earliest_edge || ev.kernel_time() < *t.earliest_edge)) {
      t.earliest_edge = ev.kernel_time();
    }
  }
  return t;
}

}  // namespace pressured
