#pragma once
// Where a kernel OOM kill came from: the node (a global OOM, or the node
// allocatable's cgroup at its limit) or a pod's or container's own limit
// (docs/observation.md, "Node-level and limit OOM kills"). Told from the
// kernel's per-memcg counters of two walks of the kubepods tree in a row
// (NodeSnapshot::oom_kills): an OOM in a memcg needs a charge that failed at
// that memcg's own limit first, so a kill with no limit reached on the
// victim's path was a global OOM.
//
//   v2: memory.events.local `oom` counts the memcg's own OOMs (the memcg was
//       the OOM's domain). Exact, up to two OOMs in one walk's interval.
//   v1: no count of OOMs per memcg. memory.failcnt counts charges that failed
//       at the memcg's limit, also those reclaim then saved: no limit hit on
//       the path proves a node-level kill; a limit hit on the path is the
//       likely cause, not a proof (a pod that keeps its page cache at its limit
//       moves failcnt all the time).
// Pure.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pressured/snapshot.hpp"

namespace pressured::node {

class OomScopeClassifier {
 public:
  /// A full observation's counters of the tree (kubepods first, as
  /// read_oom_kills gives them) and the pods' memory cgroups: a memcg at or
  /// below a pod's is the workload's, the others (kubepods, the QoS tiers)
  /// stand for the node. The counters' change since the last update is what
  /// classify() looks at.
  /// Each memcg finds its pod by its own path and its ancestors' in the
  /// pods' sorted paths (a node's memcgs times its pods would be a million
  /// comparisons at 1000 pods), and the buffers of the last update are
  /// reused: it runs at every full observation.
  void update(const std::vector<MemcgOomKills>& counters, const std::vector<std::string_view>& pod_paths);
  void update(const std::vector<MemcgOomKills>& counters, const std::vector<std::string>& pod_paths);
  /// A full observation without counters: nothing can be told until the
  /// next two readings.
  void unread();

  /// The scope of a kill counted in the memcg at `path` since the last
  /// update. `victim_memcg`: `path` is the victim's own memcg; else the victim
  /// is somewhere at or below it (a subtree's memory.events), or its relation
  /// is unknown (an older kernel's allocating task). Unknown without two
  /// readings, for a memcg outside the tree, or when the node's and a
  /// workload's limits were both reached.
  OomScope classify(const std::string& path, bool victim_memcg) const;

 private:
  struct Reading {
    std::optional<uint64_t> oom_events;
    std::optional<uint64_t> failcnt;
    bool operator==(const Reading&) const = default;
  };
  struct Change {
    std::string path;
    uint64_t cgroup_id = 0;
    Reading reading;         // as of the last update
    bool workload = false;
    bool known = false;      // the evidence could be read in both readings
    bool limit_hit = false;  // this memcg's own limit was reached since the last reading
  };
  /// The counters are the last update's, memcg for memcg (the kernel's
  /// oom_kill count did not move, so the observer did not walk the tree again).
  bool unchanged(const std::vector<MemcgOomKills>& counters) const;
  std::vector<std::pair<uint64_t, Reading>> last_;  // by cgroup id, sorted
  std::vector<std::pair<uint64_t, Reading>> now_;   // the next last_ (its buffer kept)
  std::vector<Change> changes_;                     // sized to the counters, strings kept
  std::string root_;
  bool have_last_ = false;
  bool have_changes_ = false;
};

/// What a kill of `scope` means, for the log line.
std::string_view oom_kill_cause(OomScope scope);

}  // namespace pressured::node
