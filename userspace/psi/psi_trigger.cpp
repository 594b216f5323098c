#include "psi/psi_trigger.hpp"

#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>

#include <spdlog/spdlog.h>

#include "kernel/file.hpp"
#include "kernel/parse.hpp"

namespace pressured::psi {

using std::chrono::duration_cast;
using std::chrono::microseconds;

Result<std::string> format_trigger(bool full, Duration stall, Duration window, bool privileged) {
  auto w = duration_cast<microseconds>(window).count();
  auto s = duration_cast<microseconds>(stall).count();
  if (w < 500'000 || w > 10'000'000)
    return Error{EINVAL, "PSI window must be between 500ms and 10s, got " + std::to_string(w) + "us"};
  if (s <= 0 || s > w) return Error{EINVAL, "PSI stall must be > 0 and <= the window, got " + std::to_string(s) + "us"};
  if (!privileged && w % 2'000'000 != 0)
    return Error{EPERM, "unprivileged PSI triggers need a window that is a multiple of 2s, got " + std::to_string(w) +
                            "us"};
  return std::string(full ? "full " : "some ") + std::to_string(s) + " " + std::to_string(w);
}

bool psi_privileged(const std::string& proc_root) {
  auto text = kernel::read_file(proc_root + "/self/status");
  if (!text) return false;
  auto caps = kernel::parse_status_cap_eff(*text);
  constexpr int kCapSysResource = 24;
  return caps && ((*caps >> kCapSysResource) & 1u);
}

Duration effective_window(Duration window, bool privileged) {
  if (privileged) return window;
  constexpr Duration kStep = std::chrono::seconds(2);
  auto steps = (window.count() + kStep.count() - 1) / kStep.count();
  return Duration(std::max<int64_t>(1, steps) * kStep.count());
}

Result<std::unique_ptr<PsiTriggerSource>> PsiTriggerSource::open(const std::string& pressure_file, bool full,
                                                                 Duration stall, Duration window, uint64_t cgroup_id,
                                                                 WatchId id) {
  bool privileged = psi_privileged();
  Duration w = effective_window(window, privileged);
  auto line = format_trigger(full, stall, w, privileged);
  if (!line) return line.error();
  auto fd = kernel::Fd::open(pressure_file, O_RDWR | O_NONBLOCK);
  if (!fd) return fd.error();
  // The kernel parses the string including its terminating NUL.
  if (::write(fd->get(), line->c_str(), line->size() + 1) < 0) {
    return Error::from_errno(errno, "PSI trigger '" + *line + "' on " + pressure_file);
  }
  // Said once the trigger is in place: a kernel without PSI has no window to raise.
  if (w != window) {
    spdlog::warn("psi: no CAP_SYS_RESOURCE: trigger window on {} raised from {} ms to {} ms (unprivileged triggers "
                 "need multiples of 2 s)",
                 pressure_file, duration_cast<std::chrono::milliseconds>(window).count(),
                 duration_cast<std::chrono::milliseconds>(w).count());
  }
  return std::unique_ptr<PsiTriggerSource>(new PsiTriggerSource(std::move(*fd), cgroup_id, id));
}

// The trigger lives as long as its fd: fd_'s destructor removes it.
PsiTriggerSource::~PsiTriggerSource() = default;

uint32_t PsiTriggerSource::epoll_events() const { return EPOLLPRI; }

void PsiTriggerSource::drain(std::vector<PressureEvent>& out, TimePoint now) {
  PressureEvent e;
  e.source = EventSource::Psi;
  e.type = EventType::PsiTrigger;
  e.cgroup_id = cgroup_id_;
  e.value = static_cast<int64_t>(id_);
  e.watch_id = id_;
  e.kernel_ns = static_cast<uint64_t>(now.time_since_epoch().count());
  out.push_back(e);
}

}  // namespace pressured::psi
