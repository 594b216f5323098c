// Liveness and readiness, the facts the metrics port's probes answer from.

#include "metrics/health.hpp"

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace pressured {
namespace {

using namespace std::chrono_literals;

TEST(Health, ReadyNeedsEventsAnObservationAndThePodSource) {
  Health h(30s);
  EXPECT_FALSE(h.ready());
  EXPECT_TRUE(h.pod_source_synced()) << "no source: nothing to wait for";
  h.set_events_attached(true);
  EXPECT_FALSE(h.ready()) << "attached, nothing observed yet";
  EXPECT_TRUE(h.observation_completed()) << "the first observation";
  EXPECT_FALSE(h.observation_completed()) << "only the first one changes readiness";
  EXPECT_TRUE(h.ready());
  std::atomic<bool> delivered{false};
  h.require_pod_source([&] { return delivered.load(); });
  EXPECT_FALSE(h.pod_source_synced());
  EXPECT_FALSE(h.ready()) << "no pod has metadata yet: the node is not protected";
  delivered = true;
  EXPECT_TRUE(h.pod_source_synced());
  EXPECT_TRUE(h.ready());
  h.set_events_attached(false);  // detached (shutdown)
  EXPECT_FALSE(h.ready());
  h.require_pod_source({});
}

TEST(Health, AliveUntilHeartbeatsStartAndThenStop) {
  Health h(1ms);
  EXPECT_TRUE(h.alive()) << "no heartbeat yet";
  h.heartbeat();
  // Bounded wait for the heartbeat to go stale.
  bool stale = false;
  for (int i = 0; i < 100 && !stale; ++i) {
    std::this_thread::sleep_for(5ms);
    stale = !h.alive();
  }
  EXPECT_TRUE(stale);
  h.heartbeat();
  Health fresh(1h);
  fresh.heartbeat();
  EXPECT_TRUE(fresh.alive());
}

}  // namespace
}  // namespace pressured
