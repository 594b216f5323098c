#pragma once
// One background thread that runs a task now and then every `interval`, sooner
// on request (coalesced: at most one extra run per `min_gap`), and stops
// promptly. The slow, off-the-hot-path work (pod metadata fetches, disk walks)
// runs on one of these.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "pressured/clock.hpp"

namespace pressured {

class PeriodicWorker {
 public:
  PeriodicWorker() = default;
  ~PeriodicWorker() { stop(); }
  PeriodicWorker(const PeriodicWorker&) = delete;
  PeriodicWorker& operator=(const PeriodicWorker&) = delete;

  /// Starts the thread (no-op when running): `task` runs at once, then every
  /// `interval`, or after request() but no sooner than `min_gap` after that
  /// request's wakeup (bursts of requests coalesce into one run).
  void start(Duration interval, std::function<void()> task, Duration min_gap = std::chrono::seconds(1)) {
    std::lock_guard<std::mutex> lock(thread_mu_);
    if (thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> l(wake_mu_);
      stopping_ = false;
      requested_ = false;
    }
    thread_ = std::thread([this, interval, min_gap, task = std::move(task)] { loop(interval, min_gap, task); });
  }

  /// Stops and joins the thread (a run in progress finishes first). Idempotent.
  void stop() {
    std::lock_guard<std::mutex> lock(thread_mu_);
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> l(wake_mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  /// Asks for a run before the interval is over. Thread-safe, never blocks on the task.
  void request() {
    {
      std::lock_guard<std::mutex> l(wake_mu_);
      requested_ = true;
    }
    wake_.notify_all();
  }

 private:
  void loop(Duration interval, Duration min_gap, const std::function<void()>& task) {
    for (;;) {
      task();
      std::unique_lock<std::mutex> l(wake_mu_);
      wake_.wait_for(l, interval, [&] { return stopping_ || requested_; });
      if (stopping_) return;
      if (requested_) {
        requested_ = false;
        if (wake_.wait_for(l, min_gap, [&] { return stopping_; })) return;
        requested_ = false;
      }
    }
  }

  std::mutex thread_mu_;
  std::thread thread_;
  std::mutex wake_mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool requested_ = false;
};

}  // namespace pressured
