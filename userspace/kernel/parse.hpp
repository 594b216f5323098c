#pragma once
// Pure parsers for the kernel's text files (text in, struct out), the one
// home of every cgroupfs and procfs format pressured reads. No I/O: the
// readers (HotFile, read_file, the event sources) hand them what read() or
// pread() returned, and the golden tests hand them captured files
// (tests/fixtures/).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pressured/result.hpp"
#include "pressured/snapshot.hpp"

namespace pressured::kernel {

/// "key value" lines (memory.stat, memory.events, cgroup.stat), in order.
/// Malformed lines make the whole parse fail: a truncated file must not be
/// mistaken for a small number.
Result<std::vector<std::pair<std::string, uint64_t>>> parse_flat_keyed(std::string_view text);

/// The memory.stat fields pressured uses, under their v1 hierarchical
/// (total_*) or v2 names.
struct MemoryStat {
  uint64_t anon = 0;           // v1 total_rss, v2 anon
  uint64_t file = 0;           // v1 total_cache, v2 file
  uint64_t inactive_file = 0;  // v1 total_inactive_file, v2 inactive_file
  uint64_t active_file = 0;    // v1 total_active_file, v2 active_file
  bool operator==(const MemoryStat&) const = default;
};

/// Parses memory.stat. `v2` selects the key names. Fails when a required key
/// (anon/file/inactive_file/active_file or their total_* forms) is missing,
/// which is what a truncated read looks like.
Result<MemoryStat> parse_memory_stat(std::string_view text, bool v2);

/// memory.events (v2). Unknown keys are ignored; all known keys are optional
/// except max and oom_kill, present since 4.x.
Result<MemoryEvents> parse_memory_events(std::string_view text);

/// A PSI file: "some avg10=.. avg60=.. avg300=.. total=..\n[full ...]".
Result<PsiStats> parse_psi(std::string_view text);

/// A single unsigned number, optionally followed by a newline
/// (memory.usage_in_bytes, memory.current, pids.current, pid_max). "max"
/// gives nullopt (v2 memory.max / pids.max).
Result<std::optional<uint64_t>> parse_single_value(std::string_view text);

/// The fields of /proc/meminfo pressured uses, in bytes.
struct MemInfo {
  uint64_t mem_total = 0;
  uint64_t mem_free = 0;
  uint64_t mem_available = 0;
  uint64_t hugetlb = 0;            // "Hugetlb:" (all sizes), or HugePages_Total * Hugepagesize on old kernels
  uint64_t hugepages_total = 0;    // pages of the default size
  uint64_t hugepage_size = 0;      // bytes
  uint64_t swap_total = 0;
  uint64_t swap_free = 0;
  bool operator==(const MemInfo&) const = default;
};

/// Parses /proc/meminfo. Fails when MemTotal is missing.
Result<MemInfo> parse_meminfo(std::string_view text);

/// The total task count in /proc/loadavg ("0.03 0.15 0.08 1/91 6537" -> 91).
Result<uint64_t> parse_loadavg_tasks(std::string_view text);

/// One line of /proc/<pid>/mountinfo.
struct MountInfo {
  std::string mount_point;    // unescaped (\040 -> ' ')
  std::string root;           // root of the mount within its filesystem
  std::string fstype;         // "cgroup", "cgroup2", "tmpfs", ...
  std::string super_options;  // "rw,memory" for a v1 memory hierarchy
  /// True when `super_options` names `controller` as a whole item.
  bool has_option(std::string_view option) const;
};

/// Parses a mountinfo file; malformed lines are skipped (they are counted
/// in `skipped` when non-null).
std::vector<MountInfo> parse_mountinfo(std::string_view text, std::size_t* skipped = nullptr);

/// The hierarchy id of `controller` in /proc/cgroups ("#subsys_name
/// hierarchy num_cgroups enabled" lines): 0 when the controller is on cgroup
/// v2 (or unmounted), ENOENT when the kernel does not list it.
Result<int> parse_proc_cgroups_hierarchy(std::string_view text, std::string_view controller);

/// The effective capability mask (the hexadecimal "CapEff:" line) of
/// /proc/<pid>/status.
Result<uint64_t> parse_status_cap_eff(std::string_view text);

/// What the evictor needs of /proc/<pid>/stat.
struct ProcStat {
  char state = '?';    // R, S, D, Z, I, ...
  int64_t ppid = 0;
  uint64_t flags = 0;  // PF_* (PF_KTHREAD: 0x00200000)
};

/// Parses /proc/<pid>/stat ("pid (comm) state ppid pgrp session tty_nr tpgid
/// flags ..."). comm may hold spaces and parentheses: the fields are read
/// after the last ')'.
Result<ProcStat> parse_proc_stat(std::string_view text);

/// Number of non-empty lines (cgroup.procs, tasks).
uint64_t count_lines(std::string_view text);

}  // namespace pressured::kernel
