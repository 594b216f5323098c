// The observer's node-signals part (node/node_signals.hpp) on its own: every
// signal from a fake node's files, capacities kept between full
// observations, the last good value when a group fails, the memcg counters.
#include "cgroup/layout.hpp"
#include "node/node_signals.hpp"

#include <gtest/gtest.h>

#include "node/observer_test_helpers.hpp"

namespace pressured {
namespace {

using namespace observer_test;

struct Signals {
  FakeNode fake{CgroupVersion::V1, CgroupDriver::Cgroupfs};
  ObserverCounters counters;
  std::unique_ptr<node::NodeSignals> signals;
  Signals() {
    auto layout = detect_layout(fake.config());
    if (!layout) throw std::runtime_error(layout.error().message);
    signals = std::make_unique<node::NodeSignals>(fake.config(), *layout, counters);
  }
};

TEST(NodeSignals, ObservesTheNodeSignalsWithoutReadingAnyPod) {
  Signals s;
  s.fake.add_pod("p", QosClass::BestEffort, FakePodMemory{GiB, GiB, 0, 0, 0});
  NodeSnapshot snap;
  ASSERT_TRUE(s.signals->observe(t(1), snap));
  // The fake root: 2 GiB usage, 512 MiB inactive file, MemTotal 8 GiB.
  ASSERT_TRUE(snap.signal(Signal::MemoryAvailable));
  EXPECT_DOUBLE_EQ(snap.signal(Signal::MemoryAvailable)->value, static_cast<double>(8 * GiB - (2 * GiB - GiB / 2)));
  EXPECT_DOUBLE_EQ(snap.signal(Signal::MemoryAvailable)->capacity, static_cast<double>(8 * GiB));
  ASSERT_TRUE(snap.signal(Signal::PidAvailable));
  EXPECT_DOUBLE_EQ(snap.signal(Signal::PidAvailable)->value, 32768.0 - 391.0);
  ASSERT_TRUE(snap.signal(Signal::MemoryPressureSomeAvg10));
  EXPECT_DOUBLE_EQ(snap.signal(Signal::MemoryPressureSomeAvg10)->value, 1.5);
  ASSERT_TRUE(snap.psi_cpu);
  EXPECT_TRUE(snap.pods.empty()) << "pods are the pod set's and the usage reader's";
  EXPECT_EQ(s.counters.stale_signal_reads.load(), 0u);
}

TEST(NodeSignals, RefreshReadsTheValueFreshAndKeepsTheCapacityOfTheLastObservation) {
  Signals s;
  NodeSnapshot snap;
  ASSERT_TRUE(s.signals->observe(t(1), snap));
  s.fake.set_meminfo(16 * GiB, 0);  // hotplug: seen at the next full observation
  s.fake.set_root_memory(FakePodMemory{3 * GiB, 2 * GiB, GiB, GiB / 2, GiB / 4});
  auto r = s.signals->refresh(Signal::MemoryAvailable, t(2));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_DOUBLE_EQ(r->capacity, static_cast<double>(8 * GiB));
  EXPECT_DOUBLE_EQ(r->value, static_cast<double>(8 * GiB - (3 * GiB - GiB / 2)));
  EXPECT_EQ(r->observed_at, t(2));
  NodeSnapshot again;
  ASSERT_TRUE(s.signals->observe(t(3), again));
  EXPECT_DOUBLE_EQ(again.signal(Signal::MemoryAvailable)->capacity, static_cast<double>(16 * GiB));
}

TEST(NodeSignals, AFailedGroupKeepsItsLastValueStaleAndFailsARefresh) {
  Signals s;
  NodeSnapshot first;
  ASSERT_TRUE(s.signals->observe(t(1), first));
  testing::write_text(s.fake.root() + "/proc/loadavg", "0.03 0.15");  // truncated
  NodeSnapshot second;
  ASSERT_TRUE(s.signals->observe(t(2), second));
  ASSERT_TRUE(second.signal(Signal::PidAvailable));
  EXPECT_TRUE(second.signal(Signal::PidAvailable)->stale);
  EXPECT_EQ(second.signal(Signal::PidAvailable)->value, first.signal(Signal::PidAvailable)->value);
  EXPECT_FALSE(second.signal(Signal::MemoryAvailable)->stale);
  EXPECT_EQ(s.counters.stale_signal_reads.load(), 1u);
  EXPECT_FALSE(s.signals->refresh(Signal::PidAvailable, t(3)));
  EXPECT_EQ(s.counters.stale_signal_reads.load(), 2u);
}

TEST(NodeSignals, WithoutMemoryAvailableTheObservationFails) {
  Signals s;
  testing::write_text(s.fake.memory_mount() + "/memory.stat", "");
  NodeSnapshot snap;
  auto r = s.signals->observe(t(1), snap);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("memory.available"), std::string::npos) << r.error().message;
}

TEST(NodeSignals, ReadsKubepodsAndTheNodeScopesPageCounters) {
  Signals s;
  auto c = s.signals->read_memcg_counters();
  EXPECT_EQ(c.kubepods_path, s.fake.kubepods());
  ASSERT_TRUE(c.kubepods_usage);
  EXPECT_EQ(*c.kubepods_usage, GiB);
  EXPECT_TRUE(c.scope_is_root) << "the fake kubepods sits at the hierarchy root";
  ASSERT_TRUE(c.scope_file_usage);
  EXPECT_EQ(*c.scope_file_usage, 2 * GiB);
  ASSERT_TRUE(c.children_usage);
  EXPECT_EQ(*c.children_usage, GiB) << "kubepods is the root's only child with a counter";
}

}  // namespace
}  // namespace pressured
