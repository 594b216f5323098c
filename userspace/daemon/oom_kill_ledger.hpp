#pragma once
// Kernel OOM kills counted once each, from two sources: the events (the BPF
// mark_victim record: at once, with the victim's memcg) and the kernel's own
// counters of the kubepods tree, read by every full observation (v1
// memory.oom_control, v2 memory.events.local; both local to the victim's
// memcg). An event can be lost (a ring-buffer overflow while the daemon was
// stalled or paused, no BPF at all); a counter cannot, as long as its memcg
// exists. Per memcg the ledger counts the larger of the two, so a kill seen
// by both is counted once, whichever comes first. No I/O; see docs/operations.md,
// "Kernel OOM kills".

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "daemon/daemon_stats.hpp"
#include "node/oom_scope.hpp"
#include "pressured/events.hpp"
#include "pressured/snapshot.hpp"

namespace pressured {

class OomKillLedger {
 public:
  /// A kernel OOM kill reported by an event: `cgroup_id` the victim's memcg
  /// when `victim_memcg` (else some other memcg: the allocating task's with
  /// older kernels' mark_victim(pid), a watched subtree's memory.events; or 0),
  /// `tgid` the victim process (0: unknown), `kills` how many (a memory.events
  /// increase may be several). Returns how many are new, to count now: the
  /// counters may have shown the kill first, and a victim's threads may each
  /// be marked (one kill of one process).
  uint64_t on_event(uint64_t cgroup_id, bool victim_memcg, uint32_t tgid, uint64_t kills);

  struct Missed {
    uint64_t cgroup_id = 0;
    std::string path;  // the memcg, memory hierarchy
    uint64_t kills = 0;
    bool operator==(const Missed&) const = default;
  };
  /// The kernel's counters of every memcg of the kubepods tree (a full
  /// observation's NodeSnapshot::oom_kills). Returns the kills they show that
  /// no event reported, by memcg, to count now. The first call takes the
  /// counts as they are (kills before the daemon started are not counted);
  /// a memcg first seen later counts from 0 (it was created since).
  std::vector<Missed> reconcile(const std::vector<MemcgOomKills>& counters);
  /// A full observation that could not read the counters (nullopt
  /// NodeSnapshot::oom_kills): only ages what events left.
  void unread();

  /// The memcg's path as the last reconcile read it; empty when unknown.
  /// Labels an event by the pod it is below (a container's memcg).
  std::string path_of(uint64_t cgroup_id) const;

  /// Memcgs the ledger keeps (tests: a removed memcg is forgotten).
  std::size_t size() const { return entries_.size(); }

  /// A memcg absent from this many reconciles in a row is forgotten: by then
  /// any event of it still in the ring buffer has been read.
  static constexpr uint32_t kKeepRounds = 8;
  /// Victim processes remembered per memcg (a victim's threads are marked one by one).
  static constexpr std::size_t kRecentVictims = 16;

 private:
  struct Entry {
    bool has_base = false;
    uint64_t base = 0;     // the kernel's count that is not ours (before the daemon started)
    uint64_t counted = 0;  // kills of this memcg counted, by either source
    uint64_t events = 0;   // kills of this memcg its events reported
    std::string path;
    uint32_t absent_rounds = 0;
    std::deque<uint32_t> victims;  // recent victims' tgids
  };
  struct Unplaced {
    uint64_t kills = 0;
    uint32_t rounds = 0;
  };
  void age_unplaced();

  std::unordered_map<uint64_t, Entry> entries_;
  // Kills counted from events whose memcg is not the victim's: a counter's
  // kill no event of its memcg reported may be one of them.
  std::deque<Unplaced> unplaced_;
  bool reconciled_ = false;
};

class Metrics;

/// The daemon's port for kernel OOM kills: counts and logs each (pressured
/// did not act in time) once, through the ledger, labelled by the QoS class
/// of the pod the memcg is in (the last observation's pods).
class OomKillReporter {
 public:
  OomKillReporter(Metrics* metrics, DaemonStats* stats) : metrics_(metrics), stats_(stats) {}
  /// Keeps a kernel OOM kill an event reported, unless the kernel's counters
  /// showed it first, for the next full observation (which the daemon asks
  /// for while one is pending) to count with its scope (node/oom_scope.hpp).
  void on_event(const PressureEvent& ev);
  /// After a full observation: counts and logs, with their scope, the kills
  /// events reported and those its counters show that no event reported.
  void reconcile(const NodeSnapshot& last);
  bool has_pending() const { return !pending_.empty(); }
  const OomKillLedger& ledger() const { return ledger_; }

 private:
  void count(const NodeSnapshot& last, uint64_t cgroup_id, const std::string& path, uint64_t kills, OomScope scope,
             const std::string& what);

  struct PendingOomKill {
    uint64_t cgroup_id = 0;
    bool victim_memcg = false;
    uint32_t pid = 0;
    uint64_t kills = 0;
  };
  OomKillLedger ledger_;
  node::OomScopeClassifier scopes_;
  std::vector<PendingOomKill> pending_;  // reported by events, counted by the next full observation
  Metrics* metrics_;
  DaemonStats* stats_;
};

/// The QoS class of the pod a memcg belongs to (its own cgroup or one below
/// it, by id or path), nullopt when it is not in a pod of `last`.
std::optional<QosClass> qos_of_memcg(const NodeSnapshot& last, uint64_t cgroup_id, const std::string& path);

}  // namespace pressured
