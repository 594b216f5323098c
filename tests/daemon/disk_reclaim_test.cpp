// The disk-reclaim runner: the command runs off the loop, its end comes back
// to the loop as a posted task and as take_finished().
#include "daemon/disk_reclaim.hpp"

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

namespace pressured {
namespace {

using namespace std::chrono_literals;

class PostRecorder final : public EventLoop {
 public:
  Result<void> run(ReactorHandler&) override { return {}; }
  void stop() override {}
  bool post(std::function<void()> task) override {
    std::lock_guard l(mu);
    tasks.push_back(std::move(task));
    return true;
  }
  Result<void> add_source(std::unique_ptr<ReactorSource>) override { return {}; }
  std::size_t posted() {
    std::lock_guard l(mu);
    return tasks.size();
  }
  std::mutex mu;
  std::vector<std::function<void()>> tasks;
};

bool wait_for(const std::function<bool()>& pred, std::chrono::milliseconds limit = 5000ms) {
  for (auto t0 = std::chrono::steady_clock::now(); std::chrono::steady_clock::now() - t0 < limit;) {
    if (pred()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return pred();
}

TEST(DiskReclaimRunner, TheEndOfTheCommandIsPostedToTheLoopAndSeenOnce) {
  PostRecorder loop;
  DiskReclaimRunner runner(&loop);
  int done = 0;
  runner.start({"/bin/sh", "-c", "exit 3"}, 5s, [&done] { ++done; });
  ASSERT_TRUE(wait_for([&] { return loop.posted() == 1; }));
  EXPECT_TRUE(runner.take_finished());
  EXPECT_FALSE(runner.take_finished()) << "once per run";
  EXPECT_EQ(done, 0) << "on_done runs on the loop, not on the command's thread";
  loop.tasks[0]();
  EXPECT_EQ(done, 1);
}

TEST(DiskReclaimRunner, ATimedOutOrMissingCommandStillEnds) {
  PostRecorder loop;
  DiskReclaimRunner runner(&loop);
  runner.start({"/bin/sh", "-c", "sleep 30"}, 200ms, [] {});
  ASSERT_TRUE(wait_for([&] { return loop.posted() == 1; }));
  EXPECT_TRUE(runner.take_finished());
  runner.start({"/nonexistent/reclaim"}, 1s, [] {});
  ASSERT_TRUE(wait_for([&] { return loop.posted() == 2; }));
  EXPECT_TRUE(runner.take_finished());
}

TEST(DiskReclaimRunner, WithoutALoopTheEndIsOnlyFlagged) {
  DiskReclaimRunner runner(nullptr);
  runner.start({"/bin/true"}, 5s, [] { FAIL() << "nothing to post to"; });
  EXPECT_TRUE(wait_for([&] { return runner.take_finished(); }));
}

}  // namespace
}  // namespace pressured
