#pragma once
// A bounded memory workload for the demo and the tests: `pressured __workload`
// (hidden). It allocates and touches memory in steps up to a cap, holds it,
// and exits by itself when its duration is over. Nothing here can grow
// without bound: the cap and the duration are mandatory and clamped.

#include <chrono>
#include <csignal>
#include <cstdint>

#include <CLI/CLI.hpp>

namespace pressured {

struct WorkloadOptions {
  uint64_t start_mib = 16;      // allocated at once
  uint64_t step_mib = 0;        // then this much more every interval (0: steady)
  uint64_t interval_ms = 100;
  uint64_t max_mib = 64;        // cap, at least start_mib (clamped to 4096)
  uint64_t duration_s = 60;     // exits after this (clamped to 600)
  bool ignore_sigterm = false;  // tests: a process that ignores SIGTERM
  bool fork_child = false;      // tests: a second process in the pod (sleeping)
  /// Continuous growth instead of steps: `threads` threads touch fresh pages
  /// in 2 MiB chunks, together at `rate_mib_per_s` (paced against the clock)
  /// or as fast as they can (`flat_out`), up to the cap. Faults on several
  /// cores are what a JVM or a data loader does at GiB/s; one thread touching
  /// 10 ms steps cannot reach that.
  uint64_t threads = 1;         // clamped to 1..16
  uint64_t rate_mib_per_s = 0;  // 0: the step mode above (unless flat_out)
  bool flat_out = false;
  /// PIDs instead of memory: fork `max_children` sleeping children (clamped
  /// to 4096), `forks_per_s` a second (0: as fast as fork allows). Each dies
  /// with the workload (PR_SET_PDEATHSIG) or at the end of its duration. A
  /// refused fork (EAGAIN: pids.max) is retried at the pace, never in a loop.
  uint64_t max_children = 0;
  uint64_t forks_per_s = 0;
};

/// What one fork run achieved (printed by the workload on exit).
struct ForkReport {
  uint64_t forked = 0;
  uint64_t refused = 0;
  double seconds = 0;
};

/// Forks up to `max_children` children that sleep until `deadline` (or their
/// parent's death), `forks_per_s` a second (0: flat out); stops at `stop`.
ForkReport fork_children(uint64_t max_children, uint64_t forks_per_s, std::chrono::steady_clock::time_point deadline,
                         const volatile std::sig_atomic_t& stop);

/// What one continuous growth achieved (printed by the workload on exit).
struct GrowthReport {
  uint64_t touched_mib = 0;
  double seconds = 0;
  double mib_per_s() const { return seconds > 0 ? static_cast<double>(touched_mib) / seconds : 0; }
};

/// Grows by `total_mib` in 2 MiB chunks on `threads` threads, paced at
/// `rate_mib_per_s` (0: flat out), until done, `stop` is set or `deadline`.
/// Bounded by all three; the memory stays mapped (the process holds it).
GrowthReport grow_continuous(uint64_t total_mib, uint64_t threads, uint64_t rate_mib_per_s,
                             std::chrono::steady_clock::time_point deadline, const volatile std::sig_atomic_t& stop);

/// Runs the workload in the calling process; returns the exit code.
int run_workload(const WorkloadOptions& options);

/// Registers the hidden `__workload` subcommand; it runs and exits inside
/// the parse callback, so main() needs no entry for it.
void add_workload_subcommand(CLI::App& app);

}  // namespace pressured
