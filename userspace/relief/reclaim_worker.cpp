#include "relief/reclaim_worker.hpp"

#include <algorithm>

namespace pressured {

ReclaimWorker::ReclaimWorker(ReclaimWriter& writer, const Clock& clock, EventLoop* loop, std::function<void()> on_done)
    : writer_(writer), clock_(clock), loop_(loop), on_done_(std::move(on_done)) {}

ReclaimWorker::~ReclaimWorker() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void ReclaimWorker::start(ReliefRequest request) {
  // The stage starts a run only once the previous one's outcome came back,
  // so this join does not wait (a run past its hold is still awaited by the
  // stage before it starts another).
  if (thread_.joinable()) thread_.join();
  busy_ = true;
  thread_ = std::thread([this, request = std::move(request)] {
    ReliefOutcome out = run(request);
    {
      std::lock_guard lk(mu_);
      done_ = std::move(out);
    }
    busy_ = false;
    if (loop_ != nullptr && on_done_) (void)loop_->post(on_done_);  // else: the next tick takes it
  });
}

std::optional<ReliefOutcome> ReclaimWorker::take() {
  std::lock_guard lk(mu_);
  return std::exchange(done_, std::nullopt);
}

ReliefOutcome ReclaimWorker::run(const ReliefRequest& request) {
  ReliefOutcome out;
  out.id = request.id;
  const TimePoint start = clock_.now();
  const TimePoint deadline = start + request.budget;
  for (const auto& t : request.targets) {
    ReliefTargetResult r{t.uid, t.cgroup_path, 0, 0, ""};
    uint64_t left = t.bytes;
    while (left > 0 && !stop_) {
      if (clock_.now() >= deadline) {
        out.timed_out = true;
        break;
      }
      const uint64_t chunk = std::min(left, kChunkBytes);
      r.asked_bytes += chunk;
      auto got = writer_.reclaim(t.cgroup_path, chunk);
      if (!got) {
        r.error = got.error().message;
        break;
      }
      r.reclaimed_bytes += *got;
      left -= chunk;
      // Less than asked came back: the rest is not page cache (anonymous
      // memory, or cache in use): stop asking this cgroup.
      if (*got < chunk) break;
    }
    out.targets.push_back(std::move(r));
    if (out.timed_out || stop_) break;
  }
  out.took = clock_.now() - start;
  return out;
}

}  // namespace pressured
