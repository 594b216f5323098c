// The one backoff of every caller that asks the API server again
// (k8s/backoff.hpp): the reporter's retries (exact doubling), its pause
// between taint conflicts and the pod source's LIST/WATCH (client-go's
// jittered manager with a reset after a quiet period).
#include "k8s/backoff.hpp"

#include <gtest/gtest.h>

namespace pressured::k8s {
namespace {

using namespace std::chrono_literals;

TEST(Backoff, WithoutJitterTheBaseDoublesUpToTheCap) {
  Backoff b({.initial = 200ms, .max = 1s});
  std::vector<Duration> waits;
  for (int i = 0; i < 5; ++i) waits.push_back(b.next());
  EXPECT_EQ(waits, (std::vector<Duration>{200ms, 400ms, 800ms, 1s, 1s}));
}

TEST(Backoff, JitterAddsUpToItsMultipleOfTheBaseAndASeedRepeatsIt) {
  Backoff a({.initial = 800ms, .max = 30s, .jitter = 1.0, .seed = 7});
  Backoff b({.initial = 800ms, .max = 30s, .jitter = 1.0, .seed = 7});
  Duration base = 800ms;
  bool some_jitter = false;
  for (int i = 0; i < 8; ++i) {
    const Duration w = a.next();
    EXPECT_EQ(w, b.next()) << "the same seed, the same waits";
    EXPECT_GE(w, base);
    EXPECT_LE(w, 2 * base);
    some_jitter = some_jitter || w != base;
    base = std::min<Duration>(base * 2, 30s);
  }
  EXPECT_TRUE(some_jitter);
}

TEST(Backoff, TheBaseStartsAgainAfterAQuietPeriodOnly) {
  Backoff b({.initial = 1s, .max = 30s, .reset_after = 2min});
  const TimePoint t0{};
  EXPECT_EQ(b.next(t0), 1s);
  EXPECT_EQ(b.next(t0 + 10s), 2s);
  EXPECT_EQ(b.next(t0 + 2min + 10s), 4s) << "exactly the quiet period is not more than it";
  EXPECT_EQ(b.next(t0 + 5min), 1s) << "quiet for longer: from the start";
  Backoff never({.initial = 1s, .max = 30s});
  never.next(t0);
  EXPECT_EQ(never.next(t0 + std::chrono::hours(1)), 2s) << "no reset unless asked for";
}

TEST(Backoff, TheTaintConflictPauseStaysBetweenTenAndFiftyMilliseconds) {
  Backoff b({.initial = 10ms, .max = 10ms, .jitter = 4.0, .seed = 3});
  for (int i = 0; i < 100; ++i) {
    const Duration w = b.next();
    EXPECT_GE(w, 10ms);
    EXPECT_LT(w, 50ms);
  }
}

}  // namespace
}  // namespace pressured::k8s
