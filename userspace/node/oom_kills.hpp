#pragma once
// The kernel's OOM kill counters of every memory cgroup of the kubepods tree,
// read by each full observation (NodeSnapshot::oom_kills): what the daemon
// reconciles its kernel OOM kill count with, so that a kill whose BPF event
// was lost (ring-buffer overflow while the daemon was stalled, no BPF) is
// still counted (docs/operations.md, "Kernel OOM kills").

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernel/hot_file.hpp"
#include "pressured/result.hpp"
#include "pressured/snapshot.hpp"

namespace pressured::node {

/// The `oom_kill` line of a v1 memory.oom_control or a v2 memory.events.local
/// (both flat keyed). Error when the text has no such line or is not flat keyed.
Result<uint64_t> parse_oom_kill_count(std::string_view text);

/// The `oom` line of a v2 memory.events(.local): the OOMs whose domain the
/// memcg was. nullopt without one.
std::optional<uint64_t> parse_oom_event_count(std::string_view text);

/// Every memcg of the tree at `kubepods_memory_path` (itself included, at
/// most `max_depth` levels below it), with its local OOM kill count and the
/// evidence of its own limit being reached (oom_scope.hpp): v1 reads
/// memory.oom_control, memory.failcnt and memory.limit_in_bytes, v2
/// memory.events.local (`oom_kill` and `oom`). A cgroup removed while walked
/// is left out. nullopt when there is no kubepods, or (v2) the kernel has no
/// memory.events.local (before 5.2): memory.events counts a subtree, which
/// cannot be told apart from its children's kills.
std::optional<std::vector<MemcgOomKills>> read_oom_kills(const std::string& kubepods_memory_path, bool v2,
                                                         int max_depth = 8);

/// The node's OOM kill count: the `oom_kill` line of /proc/vmstat (4.13+).
Result<uint64_t> parse_vmstat_oom_kills(std::string_view vmstat);

/// read_oom_kills for each full observation, walked again only when the
/// node's OOM kill count (/proc/vmstat) moved since the last walk. The
/// kernel counts every OOM kill there and in the victim's memcg in the same
/// step (__oom_kill_process), so while the node's count stands still no
/// memcg's count moved, and the last walk's counts are today's: a memcg
/// created since has none, and the walk after its first kill reads it with
/// every kill it had. At 1000 pods the walk is ~2000 memcgs, eight syscalls
/// each; the gate is one pread. Without a readable vmstat (an older kernel,
/// a fake tree) every call walks.
class OomKillCounters {
 public:
  OomKillCounters(std::string kubepods_memory_path, bool v2, const std::string& proc_root);
  std::optional<std::vector<MemcgOomKills>> read();
  /// Walks of the tree so far (the rest answered from the last walk).
  uint64_t walks() const { return walks_; }

 private:
  std::string kubepods_;
  bool v2_;
  kernel::HotFile vmstat_;
  std::string buf_;
  std::optional<uint64_t> walked_at_;  // the node's count at the last walk, when it gave counters
  std::optional<std::vector<MemcgOomKills>> last_;
  uint64_t walks_ = 0;
};

}  // namespace pressured::node
