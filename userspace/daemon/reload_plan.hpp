#pragma once
// What a reload (SIGHUP) does with a configuration read afresh, decided
// before anything is swapped: which sections keep their running values until
// a restart, and what the daemon must do besides the swap. Pure: no I/O, no
// logging; the daemon logs and applies the plan (docs/configuration.md,
// "Reloading"; the SIGHUP row of docs/daemon.md).

#include <string_view>
#include <vector>

#include "pressured/config.hpp"

namespace pressured {

struct ReloadPlan {
  /// `next` with every section the running process was built from put back
  /// to its running value: what goes into force.
  Config config;
  /// The sections whose change waits for a restart (in the order listed in
  /// plan_reload), empty when none changed.
  std::vector<std::string_view> needs_restart;
  bool dry_run_changed = false;
  /// daemon.stateFile moved: the checkpoint is written to the new file at once.
  bool state_file_changed = false;
};

/// The plan for replacing `running` with `next` (whose containerfs
/// thresholds the caller has derived already). Observation, event sources,
/// the API connection, the metrics server, the log format, plugins, memory
/// locking and victims' memory release stay as they run: the configuration
/// in force says what is in force, not what the file wishes.
ReloadPlan plan_reload(const Config& running, Config next);

}  // namespace pressured
