#pragma once
// PSI triggers: "some|full <stall_us> <window_us>" written to a pressure file
// (/proc/pressure/memory, or a v2 cgroup's memory.pressure); the fd then
// signals EPOLLPRI each time the stall threshold is met within the window.

#include <string>

#include "kernel/fd.hpp"
#include "pressured/clock.hpp"
#include "pressured/events.hpp"

namespace pressured::psi {

/// Pure: checks the kernel's rules and formats the trigger line.
/// window: 500 ms .. 10 s (the kernel refuses others); stall: 0 < stall <= window.
/// Unprivileged (no CAP_SYS_RESOURCE, 6.5+): the window must be a multiple of 2 s.
Result<std::string> format_trigger(bool full, Duration stall, Duration window, bool privileged);

/// Whether this process may use any PSI window (CAP_SYS_RESOURCE in CapEff of
/// <proc_root>/self/status). Root without that capability is unprivileged here.
bool psi_privileged(const std::string& proc_root = "/proc");

/// The window to use: as configured when privileged; otherwise rounded up to
/// the next multiple of 2 s (the kernel's unprivileged rule).
Duration effective_window(Duration window, bool privileged);

class PsiTriggerSource final : public ReactorSource {
 public:
  static Result<std::unique_ptr<PsiTriggerSource>> open(const std::string& pressure_file, bool full, Duration stall,
                                                        Duration window, uint64_t cgroup_id, WatchId id);
  ~PsiTriggerSource() override;
  int fd() const override { return fd_.get(); }
  uint32_t epoll_events() const override;
  void drain(std::vector<PressureEvent>& out, TimePoint now) override;

 private:
  PsiTriggerSource(kernel::Fd fd, uint64_t cgroup_id, WatchId id)
      : fd_(std::move(fd)), cgroup_id_(cgroup_id), id_(id) {}
  kernel::Fd fd_;
  uint64_t cgroup_id_;
  WatchId id_;
};

}  // namespace pressured::psi
