// Node-level and limit OOM kills told apart (oom_scope.hpp).
#include "node/oom_scope.hpp"

#include <algorithm>

namespace pressured::node {
namespace {

// `inner` is `outer` or below it.
bool at_or_below(std::string_view inner, std::string_view outer) {
  return !outer.empty() && inner.starts_with(outer) && (inner.size() == outer.size() || inner[outer.size()] == '/');
}

}  // namespace

void OomScopeClassifier::update(const std::vector<MemcgOomKills>& counters, const std::vector<std::string>& pod_paths) {
  update(counters, std::vector<std::string_view>(pod_paths.begin(), pod_paths.end()));
}

bool OomScopeClassifier::unchanged(const std::vector<MemcgOomKills>& counters) const {
  if (!have_last_ || counters.size() != changes_.size()) return false;
  for (std::size_t i = 0; i < counters.size(); ++i) {
    const Change& ch = changes_[i];
    if (ch.cgroup_id != counters[i].cgroup_id || !(ch.reading == Reading{counters[i].oom_events, counters[i].failcnt})) {
      return false;
    }
  }
  return true;
}

void OomScopeClassifier::update(const std::vector<MemcgOomKills>& counters,
                                const std::vector<std::string_view>& pod_paths) {
  // The same readings again (the common case: no OOM kill since): no limit
  // was reached since, and the memcgs and their pods are those of the last
  // update. What a full update would find, without its sort and lookups.
  if (unchanged(counters)) {
    for (Change& ch : changes_) {
      ch.known = ch.reading.oom_events.has_value() || ch.reading.failcnt.has_value();
      ch.limit_hit = false;
    }
    have_changes_ = true;
    return;
  }
  // Sorted once (one allocation, where a hash set allocates per pod).
  std::vector<std::string_view> pods(pod_paths.begin(), pod_paths.end());
  std::sort(pods.begin(), pods.end());
  // At or below a pod's memcg: the path itself, or one of its ancestors, is a pod's.
  auto workload = [&](std::string_view path) {
    for (;;) {
      if (std::binary_search(pods.begin(), pods.end(), path)) return true;
      const auto slash = path.rfind('/');
      if (slash == std::string_view::npos || slash == 0) return false;
      path = path.substr(0, slash);
    }
  };
  auto by_id = [](const auto& a, const auto& b) { return a.first < b.first; };
  now_.clear();
  changes_.resize(counters.size());
  root_ = counters.empty() ? std::string() : counters.front().path;
  for (std::size_t i = 0; i < counters.size(); ++i) {
    const MemcgOomKills& c = counters[i];
    const Reading r{c.oom_events, c.failcnt};
    now_.emplace_back(c.cgroup_id, r);
    Change& ch = changes_[i];
    ch.path.assign(c.path);
    ch.cgroup_id = c.cgroup_id;
    ch.reading = r;
    ch.workload = workload(c.path);
    ch.known = false;
    ch.limit_hit = false;
    // A memcg first seen now was created since the last reading: its counts so far are all new.
    auto it = std::lower_bound(last_.begin(), last_.end(), std::pair<uint64_t, Reading>{c.cgroup_id, {}}, by_id);
    const bool seen = it != last_.end() && it->first == c.cgroup_id;
    const Reading before = !seen ? Reading{r.oom_events ? std::optional<uint64_t>(0) : std::nullopt,
                                           r.failcnt ? std::optional<uint64_t>(0) : std::nullopt}
                                 : it->second;
    if (r.oom_events) {
      ch.known = before.oom_events.has_value();
      ch.limit_hit = ch.known && *r.oom_events != *before.oom_events;
    } else if (r.failcnt) {
      ch.known = before.failcnt.has_value();
      // An unlimited memcg's failcnt does not move: only a limit set now counts.
      ch.limit_hit = ch.known && c.limited && *r.failcnt != *before.failcnt;
    }  // neither readable: not known
  }
  std::sort(now_.begin(), now_.end(), by_id);
  have_changes_ = have_last_;
  have_last_ = true;
  std::swap(last_, now_);
}

void OomScopeClassifier::unread() {
  last_.clear();
  changes_.clear();
  have_last_ = false;
  have_changes_ = false;
}

OomScope OomScopeClassifier::classify(const std::string& path, bool victim_memcg) const {
  if (!have_changes_ || !at_or_below(path, root_)) return OomScope::Unknown;
  bool workload_hit = false, node_hit = false, unknown = false;
  for (const Change& c : changes_) {
    // The OOM's domain is the victim's memcg or one above it; for a victim
    // only known to be at or below `path`, one below `path` as well.
    if (!at_or_below(path, c.path) && (victim_memcg || !at_or_below(c.path, path))) continue;
    if (!c.known) unknown = true;
    if (!c.limit_hit) continue;
    (c.workload ? workload_hit : node_hit) = true;
  }
  if (workload_hit && node_hit) return OomScope::Unknown;
  if (workload_hit) return OomScope::Cgroup;
  if (node_hit) return OomScope::Node;
  // No limit reached on the path: a global OOM, unless a memcg on it could not be read.
  return unknown ? OomScope::Unknown : OomScope::Node;
}

std::string_view oom_kill_cause(OomScope scope) {
  switch (scope) {
    case OomScope::Node:
      return "the node ran out of memory (no pod or container limit was reached): pressured did not act in time";
    case OomScope::Cgroup:
      return "its pod or container reached its own memory limit (enforced by the kernel; pressured does not act on "
             "a workload's own limit)";
    case OomScope::Unknown: return "whether the node or its own limit ran out cannot be told from the kernel's counters";
  }
  return "";
}

}  // namespace pressured::node
