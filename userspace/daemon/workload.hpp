#pragma once
// A bounded memory workload for the demo and the tests: `pressured __workload`
// (hidden). It allocates and touches memory in steps up to a cap, holds it,
// and exits by itself when its duration is over. Nothing here can grow
// without bound: the cap and the duration are mandatory and clamped.

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
};

/// Runs the workload in the calling process; returns the exit code.
int run_workload(const WorkloadOptions& options);

/// Registers the hidden `__workload` subcommand; it runs and exits inside
/// the parse callback, so main() needs no entry for it.
void add_workload_subcommand(CLI::App& app);

}  // namespace pressured
