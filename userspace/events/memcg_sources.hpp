#pragma once
// Kernel memcg notifications beside BPF:
//  - cgroup v1: memory.usage_in_bytes threshold eventfds (cgroup.event_control),
//    signalled synchronously with the charge when usage crosses the level
//    either way; re-armed by replacing the eventfd.
//  - cgroup v2: memory.events, waited on with EPOLLPRI on the file itself
//    (kernfs_notify wakes pollers; a read re-arms), no inotify.

#include <string>

#include "kernel/fd.hpp"
#include "pressured/events.hpp"
#include "pressured/snapshot.hpp"

namespace pressured::events {

class V1ThresholdSource final : public ReactorSource {
 public:
  /// Registers an eventfd for `threshold_bytes` on <cgroup_dir>/memory.usage_in_bytes.
  static Result<std::unique_ptr<V1ThresholdSource>> open(const std::string& cgroup_dir, uint64_t threshold_bytes,
                                                         uint64_t cgroup_id, WatchId id);
  ~V1ThresholdSource() override;
  int fd() const override { return efd_.get(); }
  uint32_t epoll_events() const override;
  void drain(std::vector<PressureEvent>& out, TimePoint now) override;
  /// Current usage (fresh pread), or an error.
  Result<uint64_t> usage() const;

 private:
  V1ThresholdSource(kernel::Fd efd, kernel::Fd usage_fd, std::string usage_path, uint64_t threshold,
                    uint64_t cgroup_id, WatchId id);
  kernel::Fd efd_;  // registered in cgroup.event_control: closing it unregisters the threshold
  kernel::Fd usage_fd_;
  std::string usage_path_;
  uint64_t threshold_;
  uint64_t cgroup_id_;
  WatchId id_;
  bool above_;
};

/// Pure: events for the increases between two memory.events readings
/// (kernel::parse_memory_events).
void memory_events_diff(const MemoryEvents& before, const MemoryEvents& after, uint64_t cgroup_id, WatchId id,
                        TimePoint now, std::vector<PressureEvent>& out);

class MemoryEventsSource final : public ReactorSource {
 public:
  static Result<std::unique_ptr<MemoryEventsSource>> open(const std::string& file, uint64_t cgroup_id, WatchId id);
  ~MemoryEventsSource() override;
  int fd() const override { return fd_.get(); }
  uint32_t epoll_events() const override;
  void drain(std::vector<PressureEvent>& out, TimePoint now) override;

 private:
  MemoryEventsSource(kernel::Fd fd, std::string path, uint64_t cgroup_id, WatchId id)
      : fd_(std::move(fd)), path_(std::move(path)), cgroup_id_(cgroup_id), id_(id) {}
  Result<MemoryEvents> read_now();
  kernel::Fd fd_;
  std::string path_;
  std::string buf_;
  uint64_t cgroup_id_;
  WatchId id_;
  MemoryEvents last_;
};

}  // namespace pressured::events
