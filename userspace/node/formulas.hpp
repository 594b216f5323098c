#pragma once
// The signal formulas, as pure functions of parsed kernel numbers. Exactly
// what docs/observation.md writes down; the observer only feeds them.

#include <cstdint>

#include "kernel/parse.hpp"
#include "pressured/config.hpp"

namespace pressured::node {

/// cadvisor's working set: usage - inactive_file, 0 when inactive_file >= usage.
constexpr uint64_t working_set(uint64_t usage, uint64_t inactive_file) {
  return inactive_file < usage ? usage - inactive_file : 0;
}

/// What the node's memory.available computation needs.
struct MemoryInputs {
  kernel::MemInfo meminfo;   // /proc/meminfo
  uint64_t root_usage = 0;   // v1: root memory.usage_in_bytes; v2: root memory.stat anon + file
  kernel::MemoryStat root_stat;  // root memory.stat (v1 total_* keys, v2 plain keys)
  uint64_t min_free_bytes = 0;   // vm.min_free_kbytes * 1024 (ExcludeReserved only)
};

struct MemoryResult {
  double available = 0;  // bytes, >= 0
  double capacity = 0;   // bytes
  uint64_t working_set = 0;
};

/// memory.available in the configured mode:
///  Kubelet:           capacity = MemTotal; ws = usage - inactive_file; available = capacity - ws
///  ExcludeReserved:   capacity = MemTotal - Hugetlb; available = capacity - ws - min_free
///  ReclaimableActive: ws' = ws - active_file * pct / 100; available = MemTotal - ws'
/// All clamped at 0.
MemoryResult memory_available(const MemoryInputs& in, MemoryAvailableMode mode, double reclaimable_active_percent);

/// allocatableMemory.available = allocatable - (kubepods usage - kubepods inactive_file).
MemoryResult allocatable_memory_available(uint64_t allocatable, uint64_t kubepods_usage, uint64_t kubepods_inactive_file);

/// The kubelet's pid limit: min(kernel.pid_max, kernel.threads-max).
constexpr uint64_t max_pids(uint64_t pid_max, uint64_t threads_max) {
  return threads_max != 0 && threads_max < pid_max ? threads_max : pid_max;
}

/// v1 memory.limit_in_bytes is PAGE_COUNTER_MAX pages rounded when unlimited
/// (9223372036854771712 on 4 KiB pages); anything above 2^62 is "no limit".
constexpr bool is_unlimited_v1(uint64_t limit) { return limit >= (uint64_t{1} << 62); }

}  // namespace pressured::node
