#pragma once
// Kernel memcg notifications beside BPF:
//  - cgroup v1: memory.usage_in_bytes threshold eventfds (cgroup.event_control),
//    signalled synchronously with the charge when usage crosses the level
//    either way; re-armed by replacing the eventfd.
//  - cgroup v2: memory.events, waited on with EPOLLPRI on the file itself
//    (kernfs_notify wakes pollers; a read re-arms), no inotify.

#include <array>
#include <map>
#include <string>
#include <string_view>

#include "pressured/events.hpp"

namespace pressured::events {

class V1ThresholdSource final : public ReactorSource {
 public:
  /// Registers an eventfd for `threshold_bytes` on <cgroup_dir>/memory.usage_in_bytes.
  static Result<std::unique_ptr<V1ThresholdSource>> open(const std::string& cgroup_dir, uint64_t threshold_bytes,
                                                         uint64_t cgroup_id, WatchId id);
  ~V1ThresholdSource() override;
  int fd() const override { return efd_; }
  uint32_t epoll_events() const override;
  void drain(std::vector<PressureEvent>& out, TimePoint now) override;
  /// Current usage (fresh pread), or an error.
  Result<uint64_t> usage() const;

 private:
  V1ThresholdSource(int efd, int usage_fd, uint64_t threshold, uint64_t cgroup_id, WatchId id);
  int efd_;
  int usage_fd_;
  uint64_t threshold_;
  uint64_t cgroup_id_;
  WatchId id_;
  bool above_;
};

/// Pure: parses memory.events ("low 0\nhigh 3\nmax 1\noom 0\noom_kill 0\n...").
std::map<std::string, uint64_t, std::less<>> parse_flat_keyed(std::string_view text);

/// Pure: events for the increases between two memory.events readings.
void memory_events_diff(const std::map<std::string, uint64_t, std::less<>>& before,
                        const std::map<std::string, uint64_t, std::less<>>& after, uint64_t cgroup_id, WatchId id,
                        TimePoint now, std::vector<PressureEvent>& out);

class MemoryEventsSource final : public ReactorSource {
 public:
  static Result<std::unique_ptr<MemoryEventsSource>> open(const std::string& file, uint64_t cgroup_id, WatchId id);
  ~MemoryEventsSource() override;
  int fd() const override { return fd_; }
  uint32_t epoll_events() const override;
  void drain(std::vector<PressureEvent>& out, TimePoint now) override;

 private:
  MemoryEventsSource(int fd, uint64_t cgroup_id, WatchId id) : fd_(fd), cgroup_id_(cgroup_id), id_(id) {}
  Result<std::map<std::string, uint64_t, std::less<>>> read_now() const;
  int fd_;
  uint64_t cgroup_id_;
  WatchId id_;
  std::map<std::string, uint64_t, std::less<>> last_;
};

}  // namespace pressured::events
