// The demo's and the benchmarks' workload: continuous growth is bounded by
// its size, its deadline and its stop flag, whatever the thread count.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>

#include <sys/wait.h>

#include "daemon/workload.hpp"

namespace pressured {
namespace {

using std::chrono::steady_clock;

TEST(WorkloadGrowth, FlatOutTouchesExactlyTheSizeAskedOnEveryThread) {
  volatile std::sig_atomic_t stop = 0;
  for (uint64_t threads : {1, 2, 4}) {
    GrowthReport r = grow_continuous(16, threads, 0, steady_clock::now() + std::chrono::seconds(30), stop);
    EXPECT_EQ(r.touched_mib, 16u) << threads << " thread(s)";
  }
}

TEST(WorkloadGrowth, PacedGrowthStopsAtItsDeadline) {
  // 1 MiB/s: the first 2 MiB chunk is due at once, the next after 2 s; the
  // deadline ends the growth long before the 64 MiB asked.
  volatile std::sig_atomic_t stop = 0;
  GrowthReport r = grow_continuous(64, 2, 1, steady_clock::now() + std::chrono::milliseconds(50), stop);
  EXPECT_GE(r.touched_mib, 2u);
  EXPECT_LT(r.touched_mib, 64u);
}

TEST(WorkloadGrowth, AStopBeforeTheStartTouchesNothing) {
  volatile std::sig_atomic_t stop = 1;
  GrowthReport r = grow_continuous(64, 4, 0, steady_clock::now() + std::chrono::seconds(30), stop);
  EXPECT_EQ(r.touched_mib, 0u);
}

TEST(WorkloadForks, ForksAtMostTheChildrenAskedAndTheyEndWithTheirDeadline) {
  volatile std::sig_atomic_t stop = 0;
  ForkReport r = fork_children(3, 0, steady_clock::now() + std::chrono::milliseconds(300), stop);
  EXPECT_EQ(r.forked, 3u);
  EXPECT_EQ(r.refused, 0u);
  // Each sleeps until the deadline, then exits: all three are reaped here.
  int reaped = 0;
  for (int i = 0; i < 3; ++i) {
    int status = 0;
    if (::waitpid(-1, &status, 0) > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) ++reaped;
  }
  EXPECT_EQ(reaped, 3);
}

}  // namespace
}  // namespace pressured
