#pragma once
// The BPF side of the reactor: the pressured_events skeleton, its links and its
// ring buffer, as one ReactorSource.

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "pressured/events.hpp"
#include "pressured/page_counters.hpp"

extern "C" {
#include "pressured_events.h"
}

namespace pressured::bpf {

static_assert(sizeof(pressured_event) == 40, "bpf/pressured_events.h record layout changed");
static_assert(sizeof(pressured_watch) == 48, "bpf/pressured_events.h watch layout changed");
static_assert(static_cast<int>(EventType::OomVictim) == PRESSURED_EV_OOM_VICTIM);
static_assert(static_cast<int>(EventType::CgroupPopulated) == PRESSURED_EV_CGROUP_POPULATED);
static_assert(static_cast<int>(EventType::PidAlarmUp) == PRESSURED_EV_PID_UP);
static_assert(static_cast<int>(EventType::PidAlarmDown) == PRESSURED_EV_PID_DOWN);
static_assert(static_cast<int>(EventType::Memstall) == PRESSURED_EV_MEMSTALL);
static_assert(sizeof(pressured_memcg_activity) == 40, "bpf/pressured_events.h activity layout changed");
static_assert(sizeof(pressured_memstall) == 16, "bpf/pressured_events.h memstall layout changed");

struct BpfEventsOptions {
  uint32_t ring_bytes = 256 * 1024;  // rounded up to a power of two >= page size
  uint32_t sample_every = 64;
  int32_t target_hierarchy = -1;     // cgroup lifecycle filter: v1 memory hierarchy id, 0 on v2, -1 all
  uint32_t max_watches = 1024;
  uint64_t wake_bytes = 0;           // 0: ring_bytes / 4
  uint64_t min_wake_gap_ns = 5'000'000;
  uint32_t max_tracked = 1024;             // memcgs whose activity is accumulated (kubepods, tiers, pods)
  uint64_t memstall_emit_ns = 10'000'000;  // a single memstall this long is also a Memstall event
  // Memory cgroups one batched page-counter read holds (kubepods, tiers,
  // pods: 24 bytes each, in kernel memory); 0: no page-counter iterator.
  uint32_t max_page_counters = 16384;
  // Tests only: skeleton programs (e.g. "btf_mark_victim") whose attach is
  // refused with EINVAL as if by the kernel, to drive the attach fallback.
  std::set<std::string> fail_attach;
  // Tests only: load the page-counter iterator's bpf_probe_read_kernel
  // flavour (what a 6.1 kernel gets) where the kernel takes the faster one.
  bool probe_page_walk = false;
};

/// Pure: a ring buffer record as a PressureEvent.
PressureEvent to_event(const pressured_event& rec);

/// Pure: compares the summed per-CPU drop counter with what was last seen; on
/// an increase counts it and appends RingBufferOverflow + Resync events.
/// Returns the number of newly lost records.
uint64_t account_drops(uint64_t total_now, uint64_t& last_seen, EventStats& stats, std::vector<PressureEvent>& out,
                       TimePoint now);

class BpfEventSource final : public ReactorSource {
 public:
  /// open -> configure -> load -> attach, with the chain choices from `features`.
  /// Error when nothing could be attached (the reactor then runs without BPF).
  static Result<std::unique_ptr<BpfEventSource>> create(const BpfEventsOptions& options, const BpfFeatures& features,
                                                        EventStats& stats);
  ~BpfEventSource() override;

  int fd() const override;
  uint32_t epoll_events() const override;
  void drain(std::vector<PressureEvent>& out, TimePoint now) override;
  bool drain_on_tick() const override { return true; }

  /// Sets the alarm of a memory cgroup in the watch map (re-arms it as "below").
  Result<void> set_watch(uint64_t cgroup_id, uint64_t alarm_bytes, uint64_t watch_id);
  Result<void> clear_watch(uint64_t cgroup_id);
  /// The page counter of a watched memory cgroup as the charge hook last saw
  /// it (sampled charges below it refresh it at most once a millisecond), and
  /// that sample's age; nullopt when not watched or never sampled.
  struct CounterSample {
    uint64_t bytes = 0;
    Duration age{};
  };
  std::optional<CounterSample> watched_counter(uint64_t cgroup_id) const;
  /// Starts accumulating reclaim/refault/memstall activity for a memory cgroup
  /// and its descendants (a zeroed entry in the `tracked` map; an existing one
  /// keeps its counters). ENOTSUP when no activity hook is attached, ENOSPC
  /// when the map is full.
  Result<void> track_memcg(uint64_t cgroup_id);
  /// Stops tracking; ENOENT when it was not tracked.
  Result<void> untrack_memcg(uint64_t cgroup_id);
  /// The accumulated activity; nullopt when the cgroup is not tracked.
  std::optional<MemcgActivity> memcg_activity(uint64_t cgroup_id) const;
  /// KernelAlarms::memcg_activities: the tracked map in BPF_MAP_LOOKUP_BATCH
  /// calls (5.6+; one for up to max_tracked cgroups).
  bool memcg_activities(std::vector<std::pair<uint64_t, MemcgActivity>>& out) const;
  /// Whether any hook feeding the tracked map is attached.
  bool activity_active() const;

  /// Whether the fork and free hooks both run (the task count is maintained).
  bool pid_count_active() const;
  /// Re-seeds the node task count: `tasks_now` was just read from /proc.
  void seed_pid_count(uint64_t tasks_now);
  /// Sets the PID alarm (tasks; 0: off) and re-seeds the count. Keeps the
  /// up/down side unless the alarm was off. Hysteresis: max(16, alarm/64) tasks.
  Result<void> set_pid_alarm(uint64_t alarm_tasks, uint64_t tasks_now);
  /// The task count as the kernel side sees it now (pid_base + pid_delta).
  int64_t pid_count() const;
  /// Whether the hooks compare the kernel's own task count (nr_threads, its
  /// address asked of the kernel when the first alarm was set) instead of
  /// pid_count(). False until an alarm was set, and where the kernel does not
  /// give the address (before 5.16, no CONFIG_KALLSYMS_ALL, addresses hidden).
  bool counts_kernel_tasks() const;
  /// A per-CPU counter (enum pressured_counter), summed over CPUs.
  uint64_t counter(uint32_t idx) const;
  /// The same, one value per possible CPU (empty if the map read fails).
  std::vector<uint64_t> counter_per_cpu(uint32_t idx) const;
  /// Whether `p` is attached.
  bool attached(BpfProgram p) const;
  /// The batched page-counter reader over this object's cgroup iterator; null
  /// when the kernel has no cgroup iterator or refused the program (the
  /// reason is logged). Independent of this source's lifetime.
  std::shared_ptr<PageCounterReader> page_counter_reader() const;

  /// Kernel-side cost of one attached program (needs kernel.bpf_stats_enabled=1).
  struct ProgramStats {
    BpfProgram program;
    std::string skel_name;
    uint64_t run_cnt = 0;
    uint64_t run_time_ns = 0;
  };
  std::vector<ProgramStats> program_stats() const;
  /// The attached program's fd (benchmarks drive raw_tp programs with BPF_PROG_TEST_RUN); -1 if none.
  int program_fd(BpfProgram p) const;

  struct Impl;

 private:
  explicit BpfEventSource(std::unique_ptr<Impl> impl);
  void use_kernel_task_count();
  std::unique_ptr<Impl> impl_;
};

/// v1: the memory controller's hierarchy id from <proc>/cgroups; -1 if unknown.
int memory_hierarchy_id(const std::string& proc_root);

}  // namespace pressured::bpf
