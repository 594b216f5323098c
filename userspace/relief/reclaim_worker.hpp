#pragma once
// The worker that carries out a relief run (pressured/relief.hpp): the
// memory.reclaim writes block their writer, so they run on a thread of their
// own, never on the event loop's. A run writes in chunks and stops at its
// time budget; its outcome is handed back to the loop (EventLoop::post) and
// taken by the next evaluation.

#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "pressured/clock.hpp"
#include "pressured/events.hpp"
#include "pressured/relief.hpp"

namespace pressured {

class ReclaimWorker {
 public:
  /// `writer` and `clock` must outlive the worker; `loop` may be null (the
  /// outcome is then seen by whoever calls take()). `on_done` is posted to
  /// the loop when a run ends.
  ReclaimWorker(ReclaimWriter& writer, const Clock& clock, EventLoop* loop, std::function<void()> on_done);
  /// Stops the run in flight at its next chunk and joins it.
  ~ReclaimWorker();
  ReclaimWorker(const ReclaimWorker&) = delete;
  ReclaimWorker& operator=(const ReclaimWorker&) = delete;

  /// Starts `request` (after the previous run, if any, has ended: the stage
  /// starts one at a time). Never blocks on the kernel.
  void start(ReliefRequest request);
  /// The outcome of the run that ended since the last call, if any.
  std::optional<ReliefOutcome> take();
  /// A run is writing.
  bool busy() const { return busy_.load(); }

  /// Largest single write: the budget is checked between writes.
  static constexpr uint64_t kChunkBytes = 16ull << 20;

 private:
  ReliefOutcome run(const ReliefRequest& request);

  ReclaimWriter& writer_;
  const Clock& clock_;
  EventLoop* loop_;
  std::function<void()> on_done_;
  std::thread thread_;
  std::atomic<bool> busy_{false};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::optional<ReliefOutcome> done_;
};

}  // namespace pressured
