// The relief worker with fake memory.reclaim writers: it runs off the
// caller's thread, stops at its budget, stops asking a cgroup that gives back
// less than asked, records failures, and hands its outcome back. Plus the
// real writer's confinement to the pods root (no kernel needed).
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "relief/cgroup_reclaim.hpp"
#include "relief/reclaim_worker.hpp"

namespace pressured {
namespace {

using namespace std::chrono_literals;
constexpr uint64_t kMiB = 1 << 20;

// A clock each writer call moves on by `step`.
class StepClock final : public Clock {
 public:
  TimePoint now() const override { return TimePoint(Duration(t_.load())); }
  void advance(Duration d) { t_ += d.count(); }

 private:
  std::atomic<int64_t> t_{1'000'000'000};
};

class FakeWriter final : public ReclaimWriter {
 public:
  StepClock* clock = nullptr;
  Duration per_call = 10ms;
  std::map<std::string, double> yield;  // share of each write given back (default 1)
  std::map<std::string, int> fail;      // errno to fail with
  bool block = false;                   // block until released
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  std::vector<std::pair<std::string, uint64_t>> calls;
  std::thread::id thread;

  Result<uint64_t> reclaim(const std::string& path, uint64_t bytes) override {
    std::unique_lock lk(mu);
    thread = std::this_thread::get_id();
    calls.emplace_back(path, bytes);
    if (block) cv.wait_for(lk, 10s, [&] { return released; });
    if (clock != nullptr) clock->advance(per_call);
    if (auto f = fail.find(path); f != fail.end()) return Error::from_errno(f->second, "write " + path);
    auto y = yield.find(path);
    return static_cast<uint64_t>(static_cast<double>(bytes) * (y == yield.end() ? 1.0 : y->second));
  }
  void release() {
    std::lock_guard lk(mu);
    released = true;
    cv.notify_all();
  }
};

ReliefRequest request(std::vector<ReliefTarget> targets, Duration budget) {
  ReliefRequest r;
  r.id = 7;
  r.targets = std::move(targets);
  r.budget = budget;
  for (const auto& t : r.targets) r.asked_bytes += t.bytes;
  return r;
}

std::optional<ReliefOutcome> wait_outcome(ReclaimWorker& w) {
  for (int i = 0; i < 1000; ++i) {
    if (auto o = w.take()) return o;
    std::this_thread::sleep_for(5ms);
  }
  return std::nullopt;
}

TEST(ReclaimWorker, WritesInChunksOffTheCallersThreadAndReportsWhatCameBack) {
  StepClock clock;
  FakeWriter writer;
  writer.clock = &clock;
  writer.yield["/kp/b"] = 0.5;
  ReclaimWorker worker(writer, clock, nullptr, {});
  worker.start(request({{"a", "/kp/a", 40 * kMiB, 100 * kMiB}, {"b", "/kp/b", 40 * kMiB, 100 * kMiB}}, 1s));
  auto out = wait_outcome(worker);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->id, 7u);
  EXPECT_NE(writer.thread, std::this_thread::get_id());
  ASSERT_EQ(out->targets.size(), 2u);
  EXPECT_EQ(out->targets[0].asked_bytes, 40 * kMiB);
  EXPECT_EQ(out->targets[0].reclaimed_bytes, 40 * kMiB);
  // b gave back half of its first chunk: not asked for the rest.
  EXPECT_EQ(out->targets[1].asked_bytes, ReclaimWorker::kChunkBytes);
  EXPECT_EQ(out->targets[1].reclaimed_bytes, ReclaimWorker::kChunkBytes / 2);
  EXPECT_FALSE(out->timed_out);
  EXPECT_FALSE(out->failed());
  EXPECT_EQ(out->took, 4 * 10ms) << "three chunks of a, one of b, 10ms each on the fake clock";
}

TEST(ReclaimWorker, StopsAtItsBudget) {
  StepClock clock;
  FakeWriter writer;
  writer.clock = &clock;
  writer.per_call = 100ms;
  ReclaimWorker worker(writer, clock, nullptr, {});
  worker.start(request({{"a", "/kp/a", 200 * kMiB, 300 * kMiB}, {"b", "/kp/b", 50 * kMiB, 300 * kMiB}}, 250ms));
  auto out = wait_outcome(worker);
  ASSERT_TRUE(out);
  EXPECT_TRUE(out->timed_out);
  EXPECT_EQ(writer.calls.size(), 3u) << "writes at 0, 100 and 200 ms; none at 300";
  EXPECT_EQ(out->asked_bytes(), 3 * ReclaimWorker::kChunkBytes);
  EXPECT_EQ(out->targets.size(), 1u) << "b never reached";
}

TEST(ReclaimWorker, AFailedWriteIsRecordedAndTheNextCgroupStillAsked) {
  StepClock clock;
  FakeWriter writer;
  writer.fail["/kp/gone"] = ENOENT;
  ReclaimWorker worker(writer, clock, nullptr, {});
  worker.start(request({{"g", "/kp/gone", 8 * kMiB, 8 * kMiB}, {"a", "/kp/a", 8 * kMiB, 8 * kMiB}}, 1s));
  auto out = wait_outcome(worker);
  ASSERT_TRUE(out);
  ASSERT_EQ(out->targets.size(), 2u);
  EXPECT_NE(out->targets[0].error.find("/kp/gone"), std::string::npos) << out->targets[0].error;
  EXPECT_EQ(out->targets[1].reclaimed_bytes, 8 * kMiB);
  EXPECT_FALSE(out->failed()) << "one of two failed";

  FakeWriter all_fail;
  all_fail.fail["/kp/a"] = EBUSY;
  ReclaimWorker w2(all_fail, clock, nullptr, {});
  w2.start(request({{"a", "/kp/a", 8 * kMiB, 8 * kMiB}}, 1s));
  auto o2 = wait_outcome(w2);
  ASSERT_TRUE(o2);
  EXPECT_TRUE(o2->failed());
}

TEST(ReclaimWorker, ABlockedWriteNeverBlocksTheCaller) {
  StepClock clock;
  FakeWriter writer;
  writer.block = true;
  ReclaimWorker worker(writer, clock, nullptr, {});
  worker.start(request({{"a", "/kp/a", 8 * kMiB, 8 * kMiB}}, 1s));
  // start() returned while the write blocks; nothing is handed back yet.
  for (int i = 0; i < 1000 && writer.calls.empty(); ++i) std::this_thread::sleep_for(1ms);
  {
    std::lock_guard lk(writer.mu);
    EXPECT_EQ(writer.calls.size(), 1u);
  }
  EXPECT_TRUE(worker.busy());
  EXPECT_FALSE(worker.take());
  writer.release();
  auto out = wait_outcome(worker);
  ASSERT_TRUE(out);
  EXPECT_FALSE(worker.busy());
  EXPECT_EQ(out->reclaimed_bytes(), 8 * kMiB);
}

TEST(CgroupReclaimWriter, NeverWritesOutsideThePodsRoot) {
  EXPECT_TRUE(path_within("/sys/fs/cgroup/kubepods", "/sys/fs/cgroup/kubepods/besteffort/podx"));
  EXPECT_FALSE(path_within("/sys/fs/cgroup/kubepods", "/sys/fs/cgroup/kubepods"));
  EXPECT_FALSE(path_within("/sys/fs/cgroup/kubepods", "/sys/fs/cgroup/kubepods.slice/x"));
  EXPECT_FALSE(path_within("/sys/fs/cgroup/kubepods", "/sys/fs/cgroup/kubepods/../system.slice"));
  EXPECT_FALSE(path_within("/sys/fs/cgroup/kubepods", "/sys/fs/cgroup/system.slice"));
  EXPECT_FALSE(path_within("", "/x"));
  CgroupReclaimWriter w("/sys/fs/cgroup/kubepods/");
  auto r = w.reclaim("/sys/fs/cgroup/system.slice", 4096);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, EPERM);
  EXPECT_EQ(w.swappiness(), CgroupReclaimWriter::Swappiness::Unknown) << "nothing was written";
}

TEST(CgroupReclaimWriter, AvailabilityIsTheFilesPresence) {
  char tmpl[] = "/tmp/pressured-relief-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  EXPECT_FALSE(memory_reclaim_available(dir)) << "cgroup v1, or a kernel before 5.19";
  std::string f = dir + "/memory.reclaim";
  FILE* fp = std::fopen(f.c_str(), "w");
  ASSERT_NE(fp, nullptr);
  std::fclose(fp);
  EXPECT_TRUE(memory_reclaim_available(dir));
  std::remove(f.c_str());
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace pressured
