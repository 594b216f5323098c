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

#include "pressured/result.hpp"
#include "pressured/snapshot.hpp"

namespace pressured::node {

/// The `oom_kill` line of a v1 memory.oom_control or a v2 memory.events.local
/// (both flat keyed). Error when the text has no such line or is not flat keyed.
Result<uint64_t> parse_oom_kill_count(std::string_view text);

/// Every memcg of the tree at `kubepods_memory_path` (itself included, at
/// most `max_depth` levels below it), with its local OOM kill count: v1 reads
/// memory.oom_control, v2 memory.events.local. A cgroup removed while walked
/// is left out. nullopt when there is no kubepods, or (v2) the kernel has no
/// memory.events.local (before 5.2): memory.events counts a subtree, which
/// cannot be told apart from its children's kills.
std::optional<std::vector<MemcgOomKills>> read_oom_kills(const std::string& kubepods_memory_path, bool v2,
                                                         int max_depth = 8);

}  // namespace pressured::node
