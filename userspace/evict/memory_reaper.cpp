#include "evict/memory_reaper.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include <spdlog/spdlog.h>

#include "kernel/file.hpp"

#ifndef SYS_process_mrelease
#define SYS_process_mrelease 448
#endif

namespace pressured {

void unique_by_pid(KilledProcesses& killed) {
  std::sort(killed.begin(), killed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  killed.erase(std::unique(killed.begin(), killed.end(), [](const auto& a, const auto& b) { return a.first == b.first; }),
               killed.end());
}

ReapResult reap_memory(KilledProcesses& killed) {
  ReapResult r;
  unique_by_pid(killed);
  for (const auto& [pid, fd] : killed) {
    if (::syscall(SYS_process_mrelease, fd.get(), 0u) == 0) {
      ++r.released;
    } else if (errno == ENOSYS) {
      r.unsupported = true;
      return r;
    }
    // ESRCH: its exit path dropped its memory first (a v2 kill, nothing
    // frozen: the victim and the reaper race); EINVAL: its memory is shared
    // with a process not killed (a CLONE_VM sibling elsewhere) and comes back
    // when both exit.
  }
  return r;
}

MemoryReaper::MemoryReaper(std::size_t max_queued, std::function<void()> on_done)
    : max_queued_(max_queued), on_done_(std::move(on_done)), thread_([this] { run(); }) {}

MemoryReaper::~MemoryReaper() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool MemoryReaper::submit(Job& job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || queue_.size() >= max_queued_) return false;
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
  return true;
}

std::size_t MemoryReaper::reaped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reaped_;
}

bool MemoryReaper::unsupported() const {
  std::lock_guard<std::mutex> lock(mu_);
  return unsupported_;
}

bool MemoryReaper::wait_idle(std::chrono::milliseconds max) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_for(lock, max, [this] { return queue_.empty() && !busy_; });
}

void MemoryReaper::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and every job done
    Job job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    const bool skip = unsupported_;
    lock.unlock();
    const auto t0 = std::chrono::steady_clock::now();
    ReapResult r;
    if (!skip) r = reap_memory(job.killed);
    // Thawed whatever the reaping did: SIGKILLed tasks exit once thawed.
    if (!job.thaw.empty()) {
      if (auto w = kernel::write_file(job.thaw + "/freezer.state", "THAWED"); !w) {
        spdlog::warn("evict: thawing {} after the kill failed: {}", job.thaw, w.error().message);
      }
    }
    spdlog::debug("evict: memory of {} of {} killed process(es) of {} reaped in {:.1f} ms on the reaper thread",
                  r.released, job.killed.size(), job.what,
                  std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    job.killed.clear();  // the pidfds closed outside the lock
    if (on_done_) on_done_();
    lock.lock();
    reaped_ += r.released;
    unsupported_ = unsupported_ || r.unsupported;
    busy_ = false;
    if (queue_.empty()) idle_cv_.notify_all();
  }
}

}  // namespace pressured
