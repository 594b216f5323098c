#pragma once
// The daemon's concrete event loop (docs/events.md): one epoll over the BPF
// ring buffer, PSI triggers, memcg notifications, a timerfd, a signalfd and
// an eventfd, behind the EventLoop and KernelAlarms interfaces of
// pressured/events.hpp, which are all the daemon's logic sees.
//
// Threading: every Reactor method except post(), stop() and memcg_activity()
// must be called on the reactor thread (inside a handler callback) or before
// run(); the reactor aborts with a message otherwise (EventLoop::is_loop_thread).
// Scheduling: EventsConfig::reactor_nice / reactor_rt_priority apply to the
// thread that calls run().

#include <cstdint>
#include <memory>
#include <string>

#include "pressured/config.hpp"
#include "pressured/events.hpp"
#include "pressured/page_counters.hpp"
#include "pressured/result.hpp"

namespace pressured {

struct ReactorOptions {
  std::string memory_mount = "/sys/fs/cgroup/memory";  // memory controller hierarchy (v1 or v2 root)
  bool cgroup_v2 = false;                               // memory on the unified hierarchy
  std::string proc_root = "/proc";
  std::string psi_dir;  // the system PSI files; empty: <proc_root>/pressure
  bool handle_signals = true;                           // block SIGTERM/INT/HUP, read them via signalfd
  uint32_t post_queue_capacity = 1024;
};

/// The daemon's reactor: the event loop and the kernel alarms of one epoll
/// (BPF ring buffer, PSI, memcg notifications, timerfd, signalfd, eventfd),
/// plus the notification sources run() sets up once.
class Reactor : public EventLoop, public KernelAlarms {
 public:
  ~Reactor() override = default;

  /// Builds the reactor: epoll, timerfd, eventfd, signalfd (blocks the signals
  /// in the calling thread: create it in main() before other threads start),
  /// and, per config, the BPF programs (chosen through `features`). A BPF
  /// failure is not an error: it is logged, recorded in stats, and the reactor
  /// runs on notifications and polling.
  static Result<std::unique_ptr<Reactor>> create(const EventsConfig& config, const ReactorOptions& options,
                                                 const BpfFeatures& features, EventStats& stats);

  /// PSI trigger on a pressure file (/proc/pressure/memory, or a v2 cgroup's
  /// memory.pressure): fires when `stall` of stalled time accrues within
  /// `window` (500 ms .. 10 s). cgroup_id tags the events.
  virtual Result<WatchId> add_psi_trigger(const std::string& pressure_file, bool full, Duration stall,
                                          Duration window, uint64_t cgroup_id = 0) = 0;
  virtual Result<void> remove_psi_trigger(WatchId id) = 0;

  /// cgroup v2: watch <cgroup>/memory.events; each increase of high/max/oom/
  /// oom_kill yields one MemoryEvent* event (value = increase).
  virtual Result<WatchId> add_memory_events_watch(const std::string& cgroup_path) = 0;
  virtual Result<void> remove_memory_events_watch(WatchId id) = 0;

  /// Whether BPF programs are attached and feeding the ring buffer.
  virtual bool bpf_active() const = 0;

  /// The batched page-counter reader (a BPF cgroup iterator) for the
  /// observer's decisions under memory pressure; null without BPF or where
  /// the kernel has no cgroup iterator. Usable after the reactor is gone.
  virtual std::shared_ptr<PageCounterReader> page_counter_reader() const { return nullptr; }
};

}  // namespace pressured
