#include "daemon/oom_kill_ledger.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "pressured/metrics.hpp"

namespace pressured {

uint64_t OomKillLedger::on_event(uint64_t cgroup_id, bool victim_memcg, uint32_t tgid, uint64_t kills) {
  if (kills == 0) return 0;
  if (cgroup_id == 0 || !victim_memcg) {
    unplaced_.push_back({kills, 0});
    return kills;
  }
  Entry& e = entries_[cgroup_id];
  if (tgid != 0) {
    if (std::find(e.victims.begin(), e.victims.end(), tgid) != e.victims.end()) return 0;
    e.victims.push_back(tgid);
    if (e.victims.size() > kRecentVictims) e.victims.pop_front();
  }
  e.events += kills;
  if (e.events <= e.counted) return 0;  // the counters showed it first
  const uint64_t fresh = e.events - e.counted;
  e.counted = e.events;
  return fresh;
}

std::vector<OomKillLedger::Missed> OomKillLedger::reconcile(const std::vector<MemcgOomKills>& counters) {
  const bool first = !reconciled_;
  reconciled_ = true;
  for (auto& [id, e] : entries_) ++e.absent_rounds;
  std::vector<Missed> out;
  for (const MemcgOomKills& c : counters) {
    Entry& e = entries_[c.cgroup_id];
    e.absent_rounds = 0;
    e.path = c.path;
    if (!e.has_base) {
      e.has_base = true;
      // At the first reconcile the count so far predates the daemon, except
      // the kills its events reported already; a memcg first seen later was
      // created since (the first walk read the whole tree).
      e.base = first ? c.oom_kills - std::min(c.oom_kills, e.counted) : 0;
    }
    if (c.oom_kills < e.base) e.base = c.oom_kills;  // never backwards: not the memcg it was
    const uint64_t shown = c.oom_kills - e.base;
    if (shown <= e.counted) continue;
    uint64_t missed = shown - e.counted;
    e.counted = shown;
    while (missed > 0 && !unplaced_.empty()) {
      const uint64_t take = std::min(missed, unplaced_.front().kills);
      missed -= take;
      unplaced_.front().kills -= take;
      if (unplaced_.front().kills == 0) unplaced_.pop_front();
    }
    if (missed > 0) out.push_back({c.cgroup_id, c.path, missed});
  }
  std::erase_if(entries_, [](const auto& kv) { return kv.second.absent_rounds > kKeepRounds; });
  age_unplaced();
  return out;
}

void OomKillLedger::unread() {
  // A memcg the counters were read for keeps its base until a reading
  // without it: forgotten, it would count its kills again from 0.
  for (auto& [id, e] : entries_) {
    if (!e.has_base) ++e.absent_rounds;
  }
  std::erase_if(entries_, [](const auto& kv) { return kv.second.absent_rounds > kKeepRounds; });
  age_unplaced();
}

void OomKillLedger::age_unplaced() {
  for (auto& u : unplaced_) ++u.rounds;
  std::erase_if(unplaced_, [](const Unplaced& u) { return u.rounds > kKeepRounds; });
}

std::string OomKillLedger::path_of(uint64_t cgroup_id) const {
  auto it = entries_.find(cgroup_id);
  return it == entries_.end() ? std::string() : it->second.path;
}

void OomKillReporter::on_event(const PressureEvent& ev) {
  // An OomVictim's memcg is the victim's own, except with older kernels'
  // mark_victim(pid) (value 1: the allocating task's); a memory.events
  // increase is the watched cgroup's, its value the number of kills.
  const bool victim_memcg = ev.type == EventType::OomVictim && ev.value == 0;
  const uint64_t kills = ev.type == EventType::MemoryEventOomKill ? static_cast<uint64_t>(std::max<int64_t>(ev.value, 0)) : 1;
  const uint64_t fresh = ledger_.on_event(ev.cgroup_id, victim_memcg, ev.pid, kills);
  if (fresh == 0) {
    spdlog::debug("kernel OOM kill of pid {} in cgroup id {}: already counted", ev.pid, ev.cgroup_id);
    return;
  }
  pending_.push_back({ev.cgroup_id, victim_memcg, ev.pid, fresh});
}

void OomKillReporter::count(const NodeSnapshot& last, uint64_t cgroup_id, const std::string& path, uint64_t kills,
                            OomScope scope, const std::string& what) {
  const std::optional<QosClass> qos = qos_of_memcg(last, cgroup_id, path);
  const std::string where = path.empty() ? fmt::format("cgroup id {}", cgroup_id) : path;
  // Only a node-level kill is pressured's failure; a workload at its own limit is the kernel doing its job.
  spdlog::log(scope == OomScope::Node ? spdlog::level::err : spdlog::level::warn, "kernel OOM kill: {} in {} ({}): {}",
              what, where, qos ? std::string(name(*qos)) : std::string("not a pod"), node::oom_kill_cause(scope));
  if (metrics_) metrics_->add(stats::kKernelOomKills, {qos ? name(*qos) : "none", scope}, static_cast<double>(kills));
}

void OomKillReporter::reconcile(const NodeSnapshot& last) {
  auto processes = [](uint64_t n) { return n == 1 ? std::string("1 process") : fmt::format("{} processes", n); };
  std::vector<PendingOomKill> pending = std::exchange(pending_, {});
  if (!last.oom_kills) {
    ledger_.unread();
    scopes_.unread();
    for (const auto& p : pending) {
      count(last, p.cgroup_id, ledger_.path_of(p.cgroup_id), p.kills, OomScope::Unknown, fmt::format("pid {}", p.pid));
    }
    return;
  }
  const auto missed = ledger_.reconcile(*last.oom_kills);
  std::vector<std::string_view> pod_paths;
  pod_paths.reserve(last.pods.size());
  for (const Pod& p : last.pods) pod_paths.push_back(p.cgroup_path);
  scopes_.update(*last.oom_kills, pod_paths);
  for (const auto& p : pending) {
    const std::string path = ledger_.path_of(p.cgroup_id);
    const std::string what = p.pid != 0 ? fmt::format("pid {}", p.pid) : processes(p.kills);
    count(last, p.cgroup_id, path, p.kills, scopes_.classify(path, p.victim_memcg), what);
  }
  for (const auto& m : missed) {
    stats_->unreported_oom_kills += m.kills;
    count(last, m.cgroup_id, m.path, m.kills, scopes_.classify(m.path, true),
          processes(m.kills) + " that no event reported, found in the kernel's counters,");
  }
}

std::optional<QosClass> qos_of_memcg(const NodeSnapshot& last, uint64_t cgroup_id, const std::string& path) {
  for (const auto& p : last.pods) {
    if (cgroup_id != 0 && p.cgroup_id == cgroup_id) return p.qos;
    if (!path.empty() && !p.cgroup_path.empty() && path.size() > p.cgroup_path.size() &&
        path.compare(0, p.cgroup_path.size(), p.cgroup_path) == 0 && path[p.cgroup_path.size()] == '/') {
      return p.qos;
    }
  }
  return std::nullopt;
}

}  // namespace pressured
