#include "daemon/reload_plan.hpp"

#include <utility>

namespace pressured {

ReloadPlan plan_reload(const Config& running, Config next) {
  ReloadPlan plan;
  auto keep = [&](auto& fresh, const auto& current, std::string_view section) {
    if (!(fresh == current)) plan.needs_restart.push_back(section);
    fresh = current;
  };
  keep(next.observe, running.observe, "cgroup/pods");
  keep(next.events, running.events, "events");
  keep(next.kubernetes, running.kubernetes, "kubernetes");
  keep(next.metrics, running.metrics, "metrics");
  keep(next.log.format, running.log.format, "log.format");
  keep(next.plugins, running.plugins, "plugins");
  keep(next.daemon.lock_memory, running.daemon.lock_memory, "daemon.lockMemory");
  keep(next.daemon.release_victim_memory, running.daemon.release_victim_memory, "daemon.releaseVictimMemory");
  plan.dry_run_changed = next.daemon.dry_run != running.daemon.dry_run;
  plan.state_file_changed = next.daemon.state_file != running.daemon.state_file;
  plan.config = std::move(next);
  return plan;
}

}  // namespace pressured
