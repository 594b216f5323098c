#pragma once
// Reaping a killed victim's memory with process_mrelease(2), on the caller's
// thread or on a thread of its own. Reaping a large victim takes tens of
// milliseconds (its page tables walked, its pages freed); on the reactor's
// thread that is time no other decision can be taken, while other pods may
// still be growing. The thread takes the victims' pidfds and, on cgroup v1,
// the freezer cgroup to thaw once they are reaped (reaped while frozen, the
// victim's own exit path cannot race the reaper).

#include <sys/types.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kernel/fd.hpp"

namespace pressured {

/// Killed processes, each pinned by its pidfd.
using KilledProcesses = std::vector<std::pair<pid_t, kernel::Fd>>;

struct ReapResult {
  std::size_t released = 0;  // address spaces reaped
  bool unsupported = false;  // the kernel has no process_mrelease(2) (ENOSYS)
};

/// Keeps one entry per pid (a v1 kill signals a process on two passes).
void unique_by_pid(KilledProcesses& killed);

/// process_mrelease(2) on each pidfd of `killed`, once per pid. Every one
/// must have its SIGKILL.
ReapResult reap_memory(KilledProcesses& killed);

class MemoryReaper {
 public:
  struct Job {
    KilledProcesses killed;
    std::string thaw;  // a v1 freezer cgroup to thaw after the reaping; empty: none
    std::string what;  // the pod's cgroup, for the log
  };

  /// `max_queued`: jobs waiting at most; submit() refuses more.
  /// `on_done`: called on the thread after each job (may be empty).
  explicit MemoryReaper(std::size_t max_queued = 64, std::function<void()> on_done = {});
  /// Finishes every job queued (each reaped and thawed) before it returns.
  ~MemoryReaper();
  MemoryReaper(const MemoryReaper&) = delete;
  MemoryReaper& operator=(const MemoryReaper&) = delete;

  /// Queues `job`; false (job untouched) when the queue is full: the caller
  /// reaps and thaws itself.
  bool submit(Job& job);

  /// Address spaces reaped so far.
  std::size_t reaped() const;
  /// The kernel answered ENOSYS: reaping is off from now on.
  bool unsupported() const;
  /// Waits, at most `max`, until no job is queued or running (tests).
  bool wait_idle(std::chrono::milliseconds max);

 private:
  void run();

  const std::size_t max_queued_;
  const std::function<void()> on_done_;
  mutable std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<Job> queue_;
  bool busy_ = false, stop_ = false, unsupported_ = false;
  std::size_t reaped_ = 0;
  std::thread thread_;  // last: started once the rest is built
};

}  // namespace pressured
