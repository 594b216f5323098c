#include "daemon/oom_kill_ledger.hpp"

#include <algorithm>

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

}  // namespace pressured
