// Event triage without a daemon: which batches are a reason to decide, what
// woke the decision, and the facts reported from them.
#include "daemon/event_triage.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace pressured {
namespace {

PressureEvent ev(EventSource src, EventType type, uint64_t kernel_ns = 0, uint64_t cgroup = 0) {
  PressureEvent e;
  e.source = src;
  e.type = type;
  e.kernel_ns = kernel_ns;
  e.cgroup_id = cgroup;
  return e;
}

const auto no_pods = [](uint64_t) { return false; };

TEST(EventTriage, DownEdgesAndReclaimEndsAreNoReasonToDecide) {
  std::vector<PressureEvent> evs{ev(EventSource::Bpf, EventType::ThresholdDown, 5),
                                 ev(EventSource::Bpf, EventType::MemcgReclaimEnd, 6),
                                 ev(EventSource::Bpf, EventType::CgroupMkdir, 7)};
  auto t = triage_events(evs, false, no_pods);
  EXPECT_FALSE(t.decide);
  EXPECT_FALSE(t.earliest_edge);
}

TEST(EventTriage, TheEarliestEdgeAndTheFirstEdgesSourceWakeTheDecision) {
  std::vector<PressureEvent> evs{ev(EventSource::Bpf, EventType::MemcgReclaimBegin, 10),
                                 ev(EventSource::Psi, EventType::PsiTrigger, 300),
                                 ev(EventSource::Bpf, EventType::ThresholdUp, 200)};
  evs[2].watch_id = 42;
  auto t = triage_events(evs, false, no_pods);
  EXPECT_TRUE(t.decide);
  ASSERT_TRUE(t.earliest_edge);
  EXPECT_EQ(t.earliest_edge->time_since_epoch().count(), 200);  // not the batched hint at 10
  EXPECT_EQ(t.source, name(EventSource::Psi));                  // the first edge's source
  EXPECT_EQ(t.fired_watches, std::vector<uint64_t>{42});
}

TEST(EventTriage, LifecycleOfAForeignCgroupCountsOnlyDuringAnEviction) {
  std::vector<PressureEvent> evs{ev(EventSource::Bpf, EventType::CgroupRmdir, 1, 77)};
  EXPECT_FALSE(triage_events(evs, false, no_pods).decide);
  EXPECT_TRUE(triage_events(evs, true, no_pods).decide);
  EXPECT_TRUE(triage_events(evs, false, [](uint64_t id) { return id == 77; }).decide);
}

// Ring-buffer losses and resyncs are the reactor's to count (EventStats): a
// reason to decide, on a full observation (what the lost events said is read
// again, the kernel's OOM kill counters included).
TEST(EventTriage, ReportsOomKillsAndPidAlarms) {
  std::vector<PressureEvent> evs{ev(EventSource::Bpf, EventType::OomVictim, 1, 9),
                                 ev(EventSource::Bpf, EventType::RingBufferOverflow),
                                 ev(EventSource::Bpf, EventType::Resync),
                                 ev(EventSource::Bpf, EventType::PidAlarmUp, 2)};
  evs[1].value = 17;
  auto t = triage_events(evs, false, no_pods);
  ASSERT_EQ(t.oom_kills.size(), 1u);
  EXPECT_EQ(t.oom_kills[0]->cgroup_id, 9u);
  EXPECT_EQ(t.pid_alarms.size(), 1u);
  EXPECT_TRUE(t.decide);
  EXPECT_TRUE(t.resync);
  EXPECT_FALSE(triage_events(std::span(evs).first(1), false, no_pods).resync);
}

}  // namespace
}  // namespace pressured
