#pragma once
// The disk-reclaim command (daemon.diskReclaimCommand, e.g. an image prune) run
// before disk evictions: on a thread of its own, bounded by its timeout, so the
// event loop never waits for it. Its end is handed back to the loop.

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "pressured/clock.hpp"
#include "pressured/events.hpp"
#include "pressured/result.hpp"

namespace pressured {

/// Runs `argv` with a timeout (SIGKILL to its process group when exceeded).
/// Returns the exit status, or an error (spawn failure, timeout).
Result<int> run_command_with_timeout(const std::vector<std::string>& argv, Duration timeout);

class DiskReclaimRunner {
 public:
  /// `loop` may be null: the end is then seen by whoever calls take_finished().
  explicit DiskReclaimRunner(EventLoop* loop) : loop_(loop) {}
  ~DiskReclaimRunner();
  DiskReclaimRunner(const DiskReclaimRunner&) = delete;
  DiskReclaimRunner& operator=(const DiskReclaimRunner&) = delete;

  /// Starts the command (after the previous run, if any, has ended). When it
  /// ends, take_finished() turns true and `on_done` is posted to the loop.
  void start(std::vector<std::string> argv, Duration timeout, std::function<void()> on_done);
  /// True once for each run that ended since the last call.
  bool take_finished() { return finished_.exchange(false); }

 private:
  EventLoop* loop_;
  std::thread thread_;
  std::atomic<bool> finished_{false};
};

}  // namespace pressured
