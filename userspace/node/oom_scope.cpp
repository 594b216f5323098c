// Node-level and limit OOM kills told apart (oom_scope.hpp).
#include "node/oom_scope.hpp"

namespace pressured::node {
namespace {

// `inner` is `outer` or below it.
bool at_or_below(std::string_view inner, std::string_view outer) {
  return !outer.empty() && inner.starts_with(outer) && (inner.size() == outer.size() || inner[outer.size()] == '/');
}

}  // namespace

void OomScopeClassifier::update(const std::vector<MemcgOomKills>& counters, const std::vector<std::string>& pod_paths) {
  std::unordered_map<uint64_t, Reading> now;
  now.reserve(counters.size());
  changes_.clear();
  changes_.reserve(counters.size());
  root_ = counters.empty() ? std::string() : counters.front().path;
  for (const MemcgOomKills& c : counters) {
    const Reading r{c.oom_events, c.failcnt};
    now[c.cgroup_id] = r;
    Change ch;
    ch.path = c.path;
    for (const std::string& p : pod_paths) {
      if (at_or_below(c.path, p)) {
        ch.workload = true;
        break;
      }
    }
    // A memcg first seen now was created since the last reading: its counts so far are all new.
    auto it = last_.find(c.cgroup_id);
    const Reading before = it == last_.end() ? Reading{r.oom_events ? std::optional<uint64_t>(0) : std::nullopt,
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
    changes_.push_back(std::move(ch));
  }
  have_changes_ = have_last_;
  have_last_ = true;
  last_ = std::move(now);
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
