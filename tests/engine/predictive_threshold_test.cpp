// The predictive hard threshold (daemon.predictiveLead): a hard memory
// threshold is met when, at the rate the signal falls, it will be reached
// within the lead; the decision says so. Pure: snapshots and times only.
#include <gtest/gtest.h>

#include <memory>

#include "engine/eviction_words.hpp"
#include "engine_helpers.hpp"
#include "pressured/engine.hpp"
#include "pressured/trend.hpp"

namespace pressured {
namespace {

using namespace pressured::testing;
using std::chrono::milliseconds;

std::shared_ptr<const LiveConfig> live(std::vector<Threshold> thresholds, Duration lead) {
  Config c;
  c.eviction = config(std::move(thresholds));
  c.daemon.predictive_lead = lead;
  return std::make_shared<const LiveConfig>(std::move(c));
}

// memory.available every 100 ms, falling 200Mi each: 2000Mi/s.
const double kFall[] = {1000, 800, 600, 400};

TEST(SignalTrend, NeedsTwoObservationsAMillisecondApart) {
  SignalTrend t;
  EXPECT_FALSE(t.fall_rate());
  t.observe(at(0), 1000 * kMi);
  EXPECT_FALSE(t.fall_rate());
  t.observe(at(0.0005), 999 * kMi);
  EXPECT_FALSE(t.fall_rate());
  t.observe(at(0.1), 900 * kMi);
  ASSERT_TRUE(t.fall_rate());
  EXPECT_DOUBLE_EQ(*t.fall_rate(), 1000 * kMi);
}

TEST(SignalTrend, ARiseEndsTheFallMeasured) {
  SignalTrend t;
  t.observe(at(0), 1000 * kMi);
  t.observe(at(0.1), 300 * kMi);  // 7000Mi/s
  t.observe(at(0.2), 900 * kMi);  // a victim's memory came back
  t.observe(at(0.3), 850 * kMi);  // the others keep growing, slower
  ASSERT_TRUE(t.fall_rate());
  EXPECT_DOUBLE_EQ(*t.fall_rate(), 500 * kMi);
  EXPECT_EQ(t.fall_span(), milliseconds(100));
}

TEST(SignalTrend, OldAndRepeatedObservationsAreDropped) {
  SignalTrend t(std::chrono::seconds(1));
  t.observe(at(0), 2000 * kMi);
  t.observe(at(5), 1000 * kMi);
  t.observe(at(5), 10 * kMi);    // same time: ignored
  t.observe(at(4.5), 10 * kMi);  // earlier: ignored
  t.observe(at(5.5), 900 * kMi);
  ASSERT_TRUE(t.fall_rate());
  EXPECT_DOUBLE_EQ(*t.fall_rate(), 200 * kMi);  // the observation at 0 s is outside the window
}

TEST(PredictiveThreshold, OffByDefault) {
  Engine e(live({hard(Signal::MemoryAvailable, qty(100 * kMi))}, Duration::zero()));
  for (int i = 0; i < 4; ++i) {
    Snap s;
    s.mem(kFall[i] * kMi).add(pod("a", QosClass::BestEffort, kGi));
    Decisions d = e.evaluate(s, at(0.1 * i));
    EXPECT_FALSE(d.thresholds[0].met) << i;
    EXPECT_FALSE(d.thresholds[0].predicted) << i;
    EXPECT_FALSE(d.eviction) << i;
  }
}

TEST(PredictiveThreshold, FiresWhenTheProjectionIsShorterThanTheLead) {
  Engine e(live({hard(Signal::MemoryAvailable, qty(100 * kMi))}, milliseconds(200)));
  Decisions d;
  for (int i = 0; i < 4; ++i) {
    Snap s;
    s.mem(kFall[i] * kMi).add(pod("grower", QosClass::BestEffort, kGi)).add(pod("steady", QosClass::Burstable, kMi, kGi));
    d = e.evaluate(s, at(0.1 * i));
    // 800Mi: 350 ms to go; 600Mi: 250 ms; 400Mi: 150 ms, within the lead.
    EXPECT_EQ(d.thresholds[0].predicted, i == 3) << i;
    EXPECT_EQ(d.thresholds[0].met, i == 3) << i;
  }
  EXPECT_DOUBLE_EQ(d.thresholds[0].fall_rate, 2000 * kMi);
  EXPECT_NEAR(d.thresholds[0].seconds_to_threshold, 0.15, 1e-9);
  ASSERT_TRUE(d.eviction);
  EXPECT_EQ(d.eviction->uid, "grower");
  EXPECT_EQ(d.eviction->kind, ThresholdKind::Hard);
  EXPECT_DOUBLE_EQ(d.eviction->observed, 400 * kMi);  // still above the threshold: the projection decided
  const std::string why = explain_choice(*d.eviction);
  EXPECT_NE(why.find("predicted: memory.available falls at 2000Mi/s and reaches the threshold 100Mi from 400Mi in "
                     "150 ms, sooner than daemon.predictiveLead 200 ms"),
            std::string::npos)
      << why;
}

TEST(PredictiveThreshold, ASlowFallWaitsForTheThresholdItself) {
  Engine e(live({hard(Signal::MemoryAvailable, qty(100 * kMi))}, milliseconds(200)));
  for (int i = 0; i < 4; ++i) {  // the same levels, a second apart: 200Mi/s, 1.5 s to go at 400Mi
    Snap s;
    s.mem(kFall[i] * kMi).add(pod("a", QosClass::BestEffort, kGi));
    Decisions d = e.evaluate(s, at(1.0 * i));
    EXPECT_FALSE(d.thresholds[0].met) << i;
    if (i > 0) {  // a rate from the second observation on
      EXPECT_GT(d.thresholds[0].seconds_to_threshold, 0.2) << i;
    }
  }
  Snap s;
  s.mem(99 * kMi).add(pod("a", QosClass::BestEffort, kGi));
  Decisions d = e.evaluate(s, at(20));
  EXPECT_TRUE(d.thresholds[0].met);
  EXPECT_FALSE(d.thresholds[0].predicted);  // met by the value
  ASSERT_TRUE(d.eviction);
  EXPECT_TRUE(d.eviction->prediction.empty());
}

TEST(PredictiveThreshold, SoftThresholdsAndStaleObservationsAreNeverPredicted) {
  Engine e(live({soft(Signal::MemoryAvailable, qty(100 * kMi), std::chrono::seconds(0))}, milliseconds(500)));
  for (int i = 0; i < 4; ++i) {
    Snap s;
    s.mem(kFall[i] * kMi).add(pod("a", QosClass::BestEffort, kGi));
    EXPECT_FALSE(e.evaluate(s, at(0.1 * i)).thresholds[0].met) << i;
  }
  Engine h(live({hard(Signal::AllocatableMemoryAvailable, qty(100 * kMi))}, milliseconds(500)));
  for (int i = 0; i < 4; ++i) {
    Snap s;
    s.sig(Signal::AllocatableMemoryAvailable, kFall[i] * kMi, 2 * kGi, /*stale=*/true)
        .add(pod("a", QosClass::BestEffort, kGi));
    EXPECT_FALSE(h.evaluate(s, at(0.1 * i)).thresholds[0].met) << i;
  }
}

TEST(PredictiveThreshold, StopsWhenTheFallStops) {
  Engine e(live({hard(Signal::AllocatableMemoryAvailable, qty(100 * kMi))}, milliseconds(200)));
  Decisions d;
  for (int i = 0; i < 4; ++i) {
    Snap s;
    s.sig(Signal::AllocatableMemoryAvailable, kFall[i] * kMi, 2 * kGi).add(pod("a", QosClass::BestEffort, kGi));
    d = e.evaluate(s, at(0.1 * i));
  }
  EXPECT_TRUE(d.thresholds[0].predicted);
  // The grower is gone and its memory back: available rises, no fall to project.
  Snap s;
  s.sig(Signal::AllocatableMemoryAvailable, 1500 * kMi, 2 * kGi).add(pod("b", QosClass::BestEffort, kMi));
  d = e.evaluate(s, at(0.5));
  EXPECT_FALSE(d.thresholds[0].met);
  EXPECT_FALSE(d.eviction);
}

}  // namespace
}  // namespace pressured
