// Host (root): which container of a pod grew, read from the containers' own
// cgroups under the real memory controller (v1 on this host; v2 where memory
// is there), between two readings of the observer: a pod with two
// containers, one idle, one that starts touching 24 MiB between the readings.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "fakes/privilege.hpp"
#include "fakes/sandbox_cgroup.hpp"
#include "engine/eviction_words.hpp"
#include "node/attribution.hpp"
#include "pressured/observer.hpp"

namespace pressured {
namespace {

constexpr uint64_t MiB = 1ULL << 20;

TEST(ContainerGrowthHost, TheContainerThatGrewBetweenTwoReadingsIsNamed) {
  PRESSURED_REQUIRE_ROOT();
  const std::string mount = testing::SandboxCgroup::find_memory_mount();
  PRESSURED_REQUIRE(!mount.empty() && testing::SandboxCgroup::memory_controller_available(mount),
                    "a memory cgroup controller");
  const std::string touch = std::string(PRESSURED_BINARY_DIR) + "/tests/touch_mem";
  PRESSURED_REQUIRE(::access(touch.c_str(), X_OK) == 0, "the touch_mem helper (build target touch_mem)");

  testing::SandboxCgroup sb(mount, "growth");
  ASSERT_TRUE(sb.ok()) << sb.error();
  ASSERT_TRUE(sb.write("", sb.v2() ? "memory.max" : "memory.limit_in_bytes", std::to_string(128 * MiB)));
  const std::string uid = "0aa1b2c3-0000-4000-8000-0000000000c1";
  const std::string pod = "kubepods/besteffort/pod" + uid;
  ASSERT_TRUE(sb.make_with(pod + "/idle")) << sb.error();
  ASSERT_TRUE(sb.make_with(pod + "/grower")) << sb.error();

  auto wait_ws = [&](const std::string& rel, uint64_t at_least) {
    for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10); std::chrono::steady_clock::now() < end;) {
      const std::string u = sb.read(rel, sb.v2() ? "memory.current" : "memory.usage_in_bytes");
      if (!u.empty() && std::stoull(u) >= at_least) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  };
  ASSERT_GT(sb.spawn(pod + "/idle", {touch, "8", "30"}), 0) << sb.error();
  ASSERT_TRUE(wait_ws(pod + "/idle", 8 * MiB));

  ObserveConfig c;
  c.cgroup_root = sb.path().substr(mount.size());
  c.kubepods_name = "kubepods";
  c.driver = CgroupDriver::Cgroupfs;
  auto obs = make_node_observer(c);
  ASSERT_TRUE(obs) << obs.error().message;
  auto snap = (*obs)->observe(MonotonicClock().now());
  ASSERT_TRUE(snap) << snap.error().message;
  ASSERT_EQ(snap->pods.size(), 1u);
  Pod p = snap->pods[0];
  p.containers = {ContainerSpec{"idle", "idle", false, 16 * MiB, 0}, ContainerSpec{"grower", "grower", false, 16 * MiB, 0}};

  const auto first = (*obs)->container_memory(p);
  ASSERT_EQ(first.size(), 2u);
  for (const auto& m : first) EXPECT_FALSE(m.previous_working_set_bytes) << m.id << ": no reading before the first";

  ASSERT_GT(sb.spawn(pod + "/grower", {touch, "24", "30"}), 0) << sb.error();
  ASSERT_TRUE(wait_ws(pod + "/grower", 24 * MiB));
  const auto second = (*obs)->container_memory(p);
  ASSERT_EQ(second.size(), 2u);
  for (const auto& m : second) {
    ASSERT_TRUE(m.previous_working_set_bytes) << m.id;
    ASSERT_TRUE(m.previous_age_seconds) << m.id;
    EXPECT_GT(*m.previous_age_seconds, 0.0);
    EXPECT_EQ(m.memory_pressure.has_value(), sb.v2()) << "a container's own memory.pressure on v2 only";
  }

  Eviction e;
  e.signal = Signal::MemoryAvailable;
  node::attribute_containers(e, p, second);
  ASSERT_TRUE(e.grew);
  EXPECT_EQ(e.grew->name, "grower");
  EXPECT_EQ(e.grew->basis, ContainerGrowth::Basis::Growth);
  // The workload touched 24 MiB; its binary and page tables add a little.
  EXPECT_GE(e.grew->bytes, static_cast<int64_t>(24 * MiB));
  EXPECT_LE(e.grew->bytes, static_cast<int64_t>(40 * MiB));
  EXPECT_NE(attribution_sentences(e).find("Grew: container grower grew by"), std::string::npos)
      << attribution_sentences(e);
}

}  // namespace
}  // namespace pressured
