#include "daemon/cycle_metrics.hpp"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

namespace pressured {

MemcgActivitySample activity_sample(const MemcgActivity& a) {
  MemcgActivitySample s;
  s.reclaim_scanned_pages = static_cast<double>(a.pgscan);
  s.reclaim_stolen_pages = static_cast<double>(a.pgsteal);
  s.workingset_refaults = static_cast<double>(a.workingset_refaults);
  s.memstall_seconds = static_cast<double>(a.memstall_ns) / 1e9;
  return s;
}

void publish_observation(Metrics& m, const NodeSnapshot& snap, bool full) {
  for (std::size_t i = 0; i < kSignalCount; ++i) {
    const auto& o = snap.signals[i];
    if (!o) continue;
    m.signal_observed(static_cast<Signal>(i), o->value, o->capacity);
    if (o->stale) m.add(stats::kStaleReads, {static_cast<Signal>(i)});
  }
  if (!full) return;
  for (const auto& pod : snap.pods) {
    if (pod.stale) m.add(stats::kStaleReads, {"pod_usage"});
  }
}

void publish_decisions(Metrics& m, const Decisions& d) {
  for (auto s : d.no_candidates) m.add(stats::kEvictionNoCandidates, {s});
  m.observation_completed();
}

void publish_pods(Metrics& m, const NodeSnapshot& snap, const std::map<uint64_t, std::string>& tracked,
                  const std::map<uint64_t, std::string>& scopes, const KernelAlarms* alarms) {
  // Every tracked cgroup's activity in one read where the kernel allows it,
  // else one read per cgroup: a thousand pods are a thousand map lookups.
  std::vector<std::pair<uint64_t, MemcgActivity>> all;
  const bool batch = alarms != nullptr && alarms->memcg_activities(all);
  auto activity = [&](uint64_t id) -> std::optional<MemcgActivity> {
    if (!batch) return alarms->memcg_activity(id);
    auto it = std::lower_bound(all.begin(), all.end(), id, [](const auto& e, uint64_t v) { return e.first < v; });
    if (it == all.end() || it->first != id) return std::nullopt;
    return it->second;
  };
  std::vector<PodMemorySample> samples;
  samples.reserve(snap.pods.size());
  for (const auto& p : snap.pods) {
    samples.push_back({p.namespace_, p.name, p.uid, p.qos, static_cast<double>(p.usage.memory_working_set_bytes),
                       static_cast<double>(p.requests.memory_bytes)});
    if (alarms != nullptr && p.cgroup_id != 0 && tracked.count(p.cgroup_id) != 0) {
      if (auto a = activity(p.cgroup_id)) samples.back().activity = activity_sample(*a);
    }
  }
  m.update_pods(samples);
  if (alarms == nullptr) return;
  for (const auto& [id, label] : scopes) {
    if (auto a = activity(id)) m.memcg_activity(label, activity_sample(*a));
  }
}

void stamp_wake(Decisions& d, std::string_view source, std::optional<TimePoint> kernel_time, Metrics* m) {
  std::optional<double> latency;
  if (kernel_time) latency = std::max(0.0, std::chrono::duration<double>(MonotonicClock().now() - *kernel_time).count());
  if (latency && m) {
    m->observe(stats::kDetectionLatency, {source}, *latency);
    spdlog::debug("decision from {} {:.3f} ms after the kernel's event", source, *latency * 1e3);
  }
  for (auto& c : d.candidates) {
    c.wake_source = source;
    c.detection_latency_seconds = latency;
  }
}

}  // namespace pressured
