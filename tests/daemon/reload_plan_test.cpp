// The reload plan (daemon/reload_plan.hpp): which sections a SIGHUP applies
// and which keep their running values until a restart. Pure: configurations in, a plan out.
#include "daemon/reload_plan.hpp"

#include <gtest/gtest.h>

namespace pressured {
namespace {

using namespace std::chrono_literals;

Config running() {
  Config c;
  c.daemon.state_file = "/var/lib/pressured/state.json";
  c.metrics.listen = "127.0.0.1:9847";
  c.kubernetes.node_name = "node-a";
  return c;
}

TEST(ReloadPlan, AnUnchangedConfigurationNeedsNothing) {
  const ReloadPlan p = plan_reload(running(), running());
  EXPECT_TRUE(p.needs_restart.empty());
  EXPECT_FALSE(p.dry_run_changed);
  EXPECT_FALSE(p.state_file_changed);
  EXPECT_EQ(p.config.metrics.listen, "127.0.0.1:9847");
}

TEST(ReloadPlan, WhatTheProcessWasBuiltFromKeepsItsRunningValueAndIsNamed) {
  Config next = running();
  next.observe.cgroup_root = "/other";
  next.events.safety_net_interval = 5s;
  next.kubernetes.node_name = "node-b";
  next.metrics.listen = "0.0.0.0:1";
  next.log.format = "json";
  next.plugins.directory = "/run/pressured/plugins";
  next.daemon.lock_memory = !running().daemon.lock_memory;
  next.daemon.release_victim_memory = !running().daemon.release_victim_memory;
  const ReloadPlan p = plan_reload(running(), next);
  EXPECT_EQ(p.needs_restart, (std::vector<std::string_view>{"cgroup/pods", "events", "kubernetes", "metrics",
                                                             "log.format", "plugins", "daemon.lockMemory",
                                                             "daemon.releaseVictimMemory"}));
  const Config r = running();
  EXPECT_EQ(p.config.observe.cgroup_root, r.observe.cgroup_root);
  EXPECT_EQ(p.config.events.safety_net_interval, r.events.safety_net_interval);
  EXPECT_EQ(p.config.kubernetes.node_name, "node-a");
  EXPECT_EQ(p.config.metrics.listen, "127.0.0.1:9847");
  EXPECT_EQ(p.config.log.format, r.log.format);
  EXPECT_EQ(p.config.plugins.directory, r.plugins.directory);
  EXPECT_EQ(p.config.daemon.lock_memory, r.daemon.lock_memory);
  EXPECT_EQ(p.config.daemon.release_victim_memory, r.daemon.release_victim_memory);
}

TEST(ReloadPlan, EverythingElseTakesTheFileValue) {
  Config next = running();
  next.log.level = "debug";
  next.daemon.kill_timeout = 7s;
  next.daemon.dry_run = true;
  next.daemon.state_file = "/var/lib/pressured/other.json";
  next.relief.enabled = !running().relief.enabled;
  next.eviction.pressure_transition_period = 42s;
  const ReloadPlan p = plan_reload(running(), next);
  EXPECT_TRUE(p.needs_restart.empty());
  EXPECT_TRUE(p.dry_run_changed);
  EXPECT_TRUE(p.state_file_changed);
  EXPECT_EQ(p.config.log.level, "debug");
  EXPECT_EQ(p.config.daemon.kill_timeout, 7s);
  EXPECT_TRUE(p.config.daemon.dry_run);
  EXPECT_EQ(p.config.daemon.state_file, "/var/lib/pressured/other.json");
  EXPECT_EQ(p.config.relief.enabled, next.relief.enabled);
  EXPECT_EQ(p.config.eviction.pressure_transition_period, 42s);
}

}  // namespace
}  // namespace pressured
