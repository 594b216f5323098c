// Kernel OOM kills counted once each from events and the kernel's counters
// (daemon/oom_kill_ledger.hpp): no I/O, every ordering of the two sources.
#include "daemon/oom_kill_ledger.hpp"

#include <string>

#include <gtest/gtest.h>

namespace pressured {
namespace {

using Missed = OomKillLedger::Missed;

MemcgOomKills memcg(uint64_t id, uint64_t kills) {
  std::string path = "/kp/pod";
  path += std::to_string(id);
  return {id, path, kills};
}

TEST(OomKillLedger, AKillSeenByItsEventAndThenTheCountersIsCountedOnce) {
  OomKillLedger l;
  EXPECT_TRUE(l.reconcile({memcg(7, 0)}).empty());
  EXPECT_EQ(l.on_event(7, true, 100, 1), 1u);
  EXPECT_TRUE(l.reconcile({memcg(7, 1)}).empty());
  EXPECT_TRUE(l.reconcile({memcg(7, 1)}).empty());
}

TEST(OomKillLedger, AKillWhoseEventWasLostIsFoundInTheCountersAndNotCountedAgainIfTheEventComesLate) {
  OomKillLedger l;
  EXPECT_TRUE(l.reconcile({memcg(7, 0)}).empty());
  EXPECT_EQ(l.reconcile({memcg(7, 2)}), (std::vector<Missed>{{7, "/kp/pod7", 2}}));
  EXPECT_EQ(l.on_event(7, true, 100, 1), 0u) << "the counters counted it first";
  EXPECT_TRUE(l.reconcile({memcg(7, 2)}).empty());
  EXPECT_EQ(l.on_event(7, true, 101, 1), 0u);
  EXPECT_EQ(l.on_event(7, true, 102, 1), 1u) << "a third kill, reported before its counter moved";
  EXPECT_TRUE(l.reconcile({memcg(7, 3)}).empty());
}

TEST(OomKillLedger, KillsBeforeTheFirstReadingAreNotOursExceptThoseEventsReported) {
  OomKillLedger l;
  EXPECT_EQ(l.on_event(7, true, 100, 1), 1u);  // between the attach and the first observation
  EXPECT_TRUE(l.reconcile({memcg(7, 5), memcg(8, 3)}).empty()) << "4 and 3 kills before the daemon started";
  EXPECT_EQ(l.reconcile({memcg(7, 6), memcg(8, 3)}), (std::vector<Missed>{{7, "/kp/pod7", 1}}));
}

TEST(OomKillLedger, AMemcgCreatedSinceTheFirstReadingCountsFromZero) {
  OomKillLedger l;
  EXPECT_TRUE(l.reconcile({memcg(7, 4)}).empty());
  // A pod created and OOM-killed while the daemon was stalled, its event lost.
  EXPECT_EQ(l.reconcile({memcg(7, 4), memcg(9, 1)}), (std::vector<Missed>{{9, "/kp/pod9", 1}}));
  // One whose event was read before any reading of its memcg.
  EXPECT_EQ(l.on_event(10, true, 300, 1), 1u);
  EXPECT_TRUE(l.reconcile({memcg(7, 4), memcg(9, 1), memcg(10, 1)}).empty());
}

TEST(OomKillLedger, TheThreadsOfOneVictimAreOneKill) {
  OomKillLedger l;
  l.reconcile({memcg(7, 0)});
  EXPECT_EQ(l.on_event(7, true, 100, 1), 1u);
  EXPECT_EQ(l.on_event(7, true, 100, 1), 0u);
  EXPECT_EQ(l.on_event(7, true, 100, 1), 0u);
  EXPECT_TRUE(l.reconcile({memcg(7, 1)}).empty());
  EXPECT_EQ(l.on_event(7, true, 0, 1), 1u) << "no tgid: each report is a kill";
}

TEST(OomKillLedger, AnEventWithAnotherTasksMemcgCoversOneKillTheCountersShowElsewhere) {
  OomKillLedger l;
  l.reconcile({memcg(7, 0), memcg(8, 0)});
  EXPECT_EQ(l.on_event(7, false, 55, 1), 1u);  // mark_victim(pid): the allocating task's memcg
  EXPECT_TRUE(l.reconcile({memcg(7, 0), memcg(8, 1)}).empty()) << "the victim was in 8: already counted";
  EXPECT_EQ(l.reconcile({memcg(7, 0), memcg(8, 2)}), (std::vector<Missed>{{8, "/kp/pod8", 1}}));
}

TEST(OomKillLedger, AnUnplacedEventIsForgottenAfterSomeReadings) {
  OomKillLedger l;
  l.reconcile({memcg(8, 0)});
  EXPECT_EQ(l.on_event(0, true, 55, 1), 1u);  // outside kubepods, say
  for (uint32_t i = 0; i <= OomKillLedger::kKeepRounds; ++i) l.reconcile({memcg(8, 0)});
  EXPECT_EQ(l.reconcile({memcg(8, 1)}), (std::vector<Missed>{{8, "/kp/pod8", 1}}));
}

TEST(OomKillLedger, ARemovedMemcgIsForgottenAfterSomeReadingsButNotOnReadingsThatFailed) {
  OomKillLedger l;
  l.reconcile({memcg(7, 2), memcg(8, 0)});
  for (uint32_t i = 0; i < 3 * OomKillLedger::kKeepRounds; ++i) l.unread();
  EXPECT_TRUE(l.reconcile({memcg(7, 2), memcg(8, 0)}).empty()) << "7's base kept: its 2 kills predate the daemon";
  for (uint32_t i = 0; i <= OomKillLedger::kKeepRounds; ++i) l.reconcile({memcg(8, 0)});
  EXPECT_EQ(l.size(), 1u);
  EXPECT_EQ(l.path_of(7), "");
  EXPECT_EQ(l.path_of(8), "/kp/pod8");
}

TEST(OomKillLedger, ACounterThatGoesBackIsAnotherMemcg) {
  OomKillLedger l;
  l.reconcile({memcg(7, 5)});
  EXPECT_TRUE(l.reconcile({memcg(7, 1)}).empty());
  EXPECT_EQ(l.reconcile({memcg(7, 2)}), (std::vector<Missed>{{7, "/kp/pod7", 1}}));
}

TEST(OomKillLedger, AMemoryEventsIncreaseOfSeveralKillsCountsThemAll) {
  OomKillLedger l;
  EXPECT_EQ(l.on_event(3, false, 0, 2), 2u);
  EXPECT_EQ(l.on_event(3, false, 0, 0), 0u);
}

}  // namespace
}  // namespace pressured
