#pragma once
// Real-time pressure events (docs/events.md): what the kernel tells pressured, and the
// interfaces of the one loop thread that hears it.
//
// Sources: BPF programs (ring buffer), PSI triggers, cgroup v1 memcg threshold
// eventfds, cgroup v2 memory.events notifications, a safety-net timer, and
// resynchronisation after a lost event. Everything arrives as PressureEvent on
// the loop's thread and is handed to the daemon's ReactorHandler in batches.
//
// Threading: every EventLoop and KernelAlarms method except post(), stop() and
// memcg_activity() must be called on the loop's thread (inside a handler
// callback) or before run(); the real loop aborts with a message otherwise
// (EventLoop::is_loop_thread). Slow work (disk walks, API calls) runs elsewhere
// and hands its results back with post(), through a bounded lock-free queue
// (pressured/bounded_queue.hpp) and an eventfd wakeup.
//
// The concrete loop is the Reactor (userspace/events/reactor.hpp); the real
// BPF prober and the programs' attach chains are in userspace/bpf/
// (features.hpp, catalogue.hpp).

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pressured/clock.hpp"
#include "pressured/config.hpp"
#include "pressured/enum_names.hpp"
#include "pressured/page_counters.hpp"
#include "pressured/result.hpp"
#include "pressured/stats.hpp"

namespace pressured {

// ---------------------------------------------------------------------------
// Events

/// Where an event came from.
enum class EventSource : uint8_t {
  Bpf,               // a BPF program, through the ring buffer
  Psi,               // a PSI trigger fired (EPOLLPRI)
  MemcgV1Threshold,  // cgroup v1 memory.usage_in_bytes threshold eventfd
  MemoryEventsV2,    // cgroup v2 memory.events changed
  Timer,             // safety-net / forced poll
  Resync,            // events were lost: re-read everything from cgroup files
};
inline constexpr std::size_t kEventSourceCount = 6;
inline constexpr EnumName<EventSource> kEventSourceNames[] = {
    {EventSource::Bpf, "bpf"},
    {EventSource::Psi, "psi"},
    {EventSource::MemcgV1Threshold, "memcg_v1_threshold"},
    {EventSource::MemoryEventsV2, "memory_events_v2"},
    {EventSource::Timer, "timer"},
    {EventSource::Resync, "resync"},
};

/// What happened. Values below 64 match PRESSURED_EV_* in bpf/pressured_events.h.
enum class EventType : uint8_t {
  ThresholdUp = 1,          // usage rose to/above a watch's alarm level
  ThresholdDown = 2,        // usage fell back below it
  MemcgReclaimBegin = 3,    // a cgroup hit its limit and reclaims (value: gfp flags)
  MemcgReclaimEnd = 4,      // value: pages reclaimed
  DirectReclaimBegin = 5,   // node-level direct reclaim (allocation stalls)
  DirectReclaimEnd = 6,     // value: pages reclaimed
  KswapdWakeup = 7,         // value: order; node pressure building
  OomVictim = 8,            // kernel OOM killer chose pid (a failure of pressured); cgroup: the victim's
                            // memcg (value 0), or the allocating task's (value 1: mark_victim(pid) kernels)
  CgroupMkdir = 9,          // value: cgroup level
  CgroupRmdir = 10,         // value: cgroup level
  CgroupPopulated = 11,     // value: 1 populated, 0 empty
  PidAlarmUp = 12,          // node task count reached the PID alarm (value: tasks)
  PidAlarmDown = 13,        // node task count fell back below it (value: tasks)
  Memstall = 14,            // one memstall of a task longer than the threshold (value: ns; cgroup: its memcg)
  PsiTrigger = 32,          // value: trigger id (see add_psi_trigger)
  MemoryEventHigh = 33,     // value: new count - old count
  MemoryEventMax = 34,
  MemoryEventOom = 35,
  MemoryEventOomKill = 36,
  RingBufferOverflow = 48,  // value: records lost since the last check
  Resync = 49,              // full re-read requested (after an overflow)
};
inline constexpr std::size_t kEventTypeCount = 64;  // array size for per-type counters
inline constexpr EnumName<EventType> kEventTypeNames[] = {
    {EventType::ThresholdUp, "threshold_up"},
    {EventType::ThresholdDown, "threshold_down"},
    {EventType::MemcgReclaimBegin, "memcg_reclaim_begin"},
    {EventType::MemcgReclaimEnd, "memcg_reclaim_end"},
    {EventType::DirectReclaimBegin, "direct_reclaim_begin"},
    {EventType::DirectReclaimEnd, "direct_reclaim_end"},
    {EventType::KswapdWakeup, "kswapd_wakeup"},
    {EventType::OomVictim, "oom_victim"},
    {EventType::CgroupMkdir, "cgroup_mkdir"},
    {EventType::CgroupRmdir, "cgroup_rmdir"},
    {EventType::CgroupPopulated, "cgroup_populated"},
    {EventType::PidAlarmUp, "pid_alarm_up"},
    {EventType::PidAlarmDown, "pid_alarm_down"},
    {EventType::Memstall, "memstall"},
    {EventType::PsiTrigger, "psi_trigger"},
    {EventType::MemoryEventHigh, "memory_event_high"},
    {EventType::MemoryEventMax, "memory_event_max"},
    {EventType::MemoryEventOom, "memory_event_oom"},
    {EventType::MemoryEventOomKill, "memory_event_oom_kill"},
    {EventType::RingBufferOverflow, "ring_buffer_overflow"},
    {EventType::Resync, "resync"},
};

std::string_view name(EventSource s);
std::string_view name(EventType t);

/// One pressure event, as handed to the daemon.
struct PressureEvent {
  EventSource source = EventSource::Bpf;
  EventType type = EventType::ThresholdUp;
  uint64_t cgroup_id = 0;  // kernfs id (= inode of the cgroup dir) of the memcg; 0 = node/unknown
  uint32_t pid = 0;        // task that triggered it (OOM: the victim)
  uint32_t cpu = 0;
  int64_t value = 0;       // type-specific, see EventType; threshold events: usage bytes
  uint64_t kernel_ns = 0;  // CLOCK_MONOTONIC ns: bpf_ktime_get_ns(), or the wakeup time for fd sources
  uint64_t watch_id = 0;   // threshold / PSI / memory.events events: the id returned when it was armed

  TimePoint kernel_time() const { return TimePoint(Duration(static_cast<int64_t>(kernel_ns))); }
};

// ---------------------------------------------------------------------------
// Statistics read by the daemon and metrics (plain atomics; no metrics library)

/// The BPF programs pressured attaches. Order indexes EventStats::attach.
enum class BpfProgram : uint8_t {
  MemcgCharge,         // threshold crossing on the charge path
  MemcgReclaimBegin,
  MemcgReclaimEnd,
  DirectReclaimBegin,
  DirectReclaimEnd,
  KswapdWakeup,
  OomVictim,
  CgroupMkdir,
  CgroupRmdir,
  CgroupPopulated,
  TaskFork,            // node task count up (sched_process_fork): PID alarm
  TaskFree,            // node task count down (sched_process_free)
  MemcgReclaimStats,   // per tracked memcg reclaim scan/steal (count_memcg_events)
  WorkingsetRefault,   // per tracked memcg refaults: rides memcg_charge's mod_memcg_lruvec_state program
  MemstallEnter,       // psi_memstall_enter: a task starts stalling on memory
  MemstallLeave,       // psi_memstall_leave: stall time charged to its memcg
};
inline constexpr std::size_t kBpfProgramCount = 16;
inline constexpr EnumName<BpfProgram> kBpfProgramNames[] = {
    {BpfProgram::MemcgCharge, "memcg_charge"},
    {BpfProgram::MemcgReclaimBegin, "memcg_reclaim_begin"},
    {BpfProgram::MemcgReclaimEnd, "memcg_reclaim_end"},
    {BpfProgram::DirectReclaimBegin, "direct_reclaim_begin"},
    {BpfProgram::DirectReclaimEnd, "direct_reclaim_end"},
    {BpfProgram::KswapdWakeup, "kswapd_wakeup"},
    {BpfProgram::OomVictim, "oom_victim"},
    {BpfProgram::CgroupMkdir, "cgroup_mkdir"},
    {BpfProgram::CgroupRmdir, "cgroup_rmdir"},
    {BpfProgram::CgroupPopulated, "cgroup_populated"},
    {BpfProgram::TaskFork, "task_fork"},
    {BpfProgram::TaskFree, "task_free"},
    {BpfProgram::MemcgReclaimStats, "memcg_reclaim_stats"},
    {BpfProgram::WorkingsetRefault, "workingset_refault"},
    {BpfProgram::MemstallEnter, "memstall_enter"},
    {BpfProgram::MemstallLeave, "memstall_leave"},
};
std::string_view name(BpfProgram p);

/// How a program is attached. Off: not attached (reason says why).
enum class AttachKind : uint8_t { Off, TpBtf, RawTp, Fentry, Kprobe, Tracepoint };
inline constexpr EnumName<AttachKind> kAttachKindNames[] = {
    {AttachKind::Off, "off"},
    {AttachKind::TpBtf, "tp_btf"},
    {AttachKind::RawTp, "raw_tp"},
    {AttachKind::Fentry, "fentry"},
    {AttachKind::Kprobe, "kprobe"},
    {AttachKind::Tracepoint, "tracepoint"},
};
std::string_view name(AttachKind k);

/// Latency histogram bucket upper bounds (µs) for kernel event -> handler.
inline constexpr std::array<uint32_t, 12> kLatencyBucketsUs{10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 100000, 1000000};

/// pressured_resyncs_total has one writer, the reactor's counters: the full
/// observation at start (counted by `pressured run` once it is done) and the
/// one after lost ring-buffer events.
inline constexpr std::string_view kResyncsHelp =
    "Full resynchronisations from the cgroup files, by reason: startup, or ring_buffer_overflow (events were lost).";

inline constexpr std::string_view kPostedTasksHelp =
    "Work handed to the reactor thread to run after the current dispatch (an evaluation while an eviction is in "
    "flight, a finished disk reclaim), by result: run, or rejected because the bounded queue was full (the work "
    "waits for a later tick).";

/// The reactor's counters (pressured/stats.hpp), each exported under the
/// series named here; a safety-net poll that found a crossing no event
/// reported is the daemon's to count (DaemonStats).
#define PRESSURED_EVENT_STATS(COUNTER, GAUGE)                                                                    \
  COUNTER(ringbuf_drops, "pressured_ring_buffer_dropped_events_total", "",                                      \
          "Events lost because the BPF ring buffer was full (each loss is followed by a resync).")               \
  COUNTER(resyncs, "pressured_resyncs_total", "reason=ring_buffer_overflow", ::pressured::kResyncsHelp)       \
  COUNTER(startup_resyncs, "pressured_resyncs_total", "reason=startup", ::pressured::kResyncsHelp)              \
  COUNTER(safety_net_ticks, "pressured_safety_net_polls_total", "",                                             \
          "Safety-net polls run (a full observation every events.safetyNetInterval, whatever the events say).") \
  COUNTER(wakeups, "pressured_reactor_wakeups_total", "",                                                       \
          "Wakeups of the reactor thread (epoll_wait returns): compared with pressured_events_total, how many " \
          "events each wakeup carries.")                                                                        \
  COUNTER(posted, "pressured_reactor_posted_tasks_total", "result=run", ::pressured::kPostedTasksHelp)           \
  COUNTER(post_rejected, "pressured_reactor_posted_tasks_total", "result=rejected", ::pressured::kPostedTasksHelp)
PRESSURED_DECLARE_STATS(EventCounters, PRESSURED_EVENT_STATS);

/// Everything the reactor and its sources count, for export (export_stats)
/// and for tools (bench, `pressured top`).
struct EventStats : EventCounters {
  /// Events handed to the handler, by source and type (indexes: the enums'
  /// values; types wrap at kEventTypeCount) -> pressured_events_total{source,
  /// type}, one series per pair of kEventSourceNames x kEventTypeNames,
  /// appearing with the pair's first event (most pairs never occur).
  std::array<std::array<std::atomic<uint64_t>, kEventTypeCount>, kEventSourceCount> events{};
  void count_event(EventSource source, EventType type) {
    events[static_cast<std::size_t>(source) % kEventSourceCount][static_cast<std::size_t>(type) % kEventTypeCount]
        .fetch_add(1, std::memory_order_relaxed);
  }
  /// The pressured_events_total series (export_stats calls this).
  void extra_stats(std::vector<ExternalStat>& out) const;

  std::atomic<bool> bpf_active{false};              // at least one BPF program attached
  /// Kernel timestamp -> handler dispatch latency; last bucket is +Inf.
  std::array<std::atomic<uint64_t>, kLatencyBucketsUs.size() + 1> latency_buckets{};
  std::atomic<uint64_t> latency_sum_ns{0};
  std::atomic<uint64_t> latency_count{0};
  /// Attach mode per program (AttachKind as uint8_t).
  std::array<std::atomic<uint8_t>, kBpfProgramCount> attach{};

  /// Why each program got its mode ("raw_tp: tp_btf refused: EPERM"); thread-safe.
  void set_attach(BpfProgram p, AttachKind k, std::string reason);
  std::string attach_reason(BpfProgram p) const;
  /// A flavour the kernel refused to load (verifier, CO-RE relocation); the
  /// program fell back to the next one of its chain. Each is logged once.
  struct LoadRefusal {
    BpfProgram program;
    AttachKind kind;
    std::string target;
    std::string why;
  };
  void add_load_refusal(BpfProgram p, AttachKind k, std::string target, std::string why);
  std::vector<LoadRefusal> load_refusals() const;
  /// Free-form note on the BPF state ("BPF disabled by config", ...).
  void set_bpf_status(std::string s);
  std::string bpf_status() const;
  void record_latency(Duration d);

 private:
  mutable std::mutex mu_;
  std::array<std::string, kBpfProgramCount> reasons_;
  std::vector<LoadRefusal> load_refusals_;
  std::string bpf_status_;
};

/// Reclaim and stall activity of a tracked memory cgroup, summed over the
/// cgroup and its descendants since tracking began (Reactor::track_memcg).
/// Monotonic counters; the fields whose hook is off stay 0 (see
/// EventStats::attach for MemcgReclaimStats, WorkingsetRefault, MemstallEnter).
struct MemcgActivity {
  uint64_t pgscan = 0;               // pages scanned by reclaim (kswapd, direct, khugepaged, proactive)
  uint64_t pgsteal = 0;              // pages reclaimed
  uint64_t workingset_refaults = 0;  // refaults of recently evicted pages, anon + file (thrashing)
  uint64_t memstall_ns = 0;          // time its tasks spent stalled on memory (PSI memstalls)
  uint64_t memstall_count = 0;       // number of such stalls
};

// ---------------------------------------------------------------------------
// BPF feature probing

/// What the running kernel supports, probed once in main() and passed down.
/// kprobe probes really attach (a load-only probe lies: kprobe programs load
/// where kprobes are compiled out); tracepoint flavours are answered from BTF
/// and their real attach is the probe (BpfEventSource falls back when it fails).
class BpfFeatures {
 public:
  virtual ~BpfFeatures() = default;
  /// BPF usable at all (bpf() syscall, ring buffer map).
  virtual bool bpf_available() const = 0;
  /// Whether the kernel's BTF (/sys/kernel/btf/vmlinux) has a type of this name
  /// ("btf_trace_mark_victim", "page_counter_try_charge").
  virtual bool has_btf_type(std::string_view name) const = 0;
  /// Whether a program of `kind` can be loaded and attached to `target`, as far
  /// as the kind's probe tells (see above); on false, `why` (if given) receives
  /// the reason ("EPERM on load").
  virtual bool can_attach(AttachKind kind, std::string_view target, std::string* why = nullptr) const = 0;
  /// Number of parameters (without the leading ctx) of btf_trace_<tp>; -1 if unknown.
  virtual int tracepoint_arity(std::string_view tp) const = 0;
  /// Number of parameters of kernel function `fn` in BTF (fentry/kprobe
  /// targets whose signature must match the handler's); -1 if unknown.
  virtual int function_arity(std::string_view fn) const {
    (void)fn;
    return -1;
  }
  /// Whether the verifier takes BPF_CMPXCHG and fetching atomics (5.12+). The
  /// edge-triggered hooks use them to emit exactly one edge; without them
  /// they flip their flag with a plain read and write (a rare duplicate edge).
  virtual bool has_atomics() const { return true; }
  /// Frees the kernel's BTF if this holds it (5+ MiB); a later lookup reads it
  /// again. BpfEventSource calls it just before libbpf loads the object, which
  /// parses the BTF once more for its CO-RE relocations: one copy at a time.
  virtual void release_kernel_btf() const {}
};

// ---------------------------------------------------------------------------
// The reactor

/// Implemented by the daemon. All calls happen on the reactor thread.
class ReactorHandler {
 public:
  virtual ~ReactorHandler() = default;
  /// A batch of events from one wakeup, in arrival order. Take fresh reads of
  /// what they concern and run the engine. `now` is the wakeup time.
  virtual void on_events(std::span<const PressureEvent> events, TimePoint now) = 0;
  /// Periodic poll: safety_net=true every safety_net_interval even when events
  /// flow; false in baseline mode (forced_poll_interval, events ignored). The
  /// reactor counts the safety-net polls (EventStats::safety_net_ticks); a
  /// poll that finds a crossing no event reported is the handler's to count.
  virtual void on_tick(TimePoint now, bool safety_net) = 0;
  /// SIGTERM / SIGINT / SIGHUP arrived (blocked and read through a signalfd).
  virtual void on_signal(int signo) = 0;
  /// The deadline set with Reactor::wake_at() has come (a soft threshold's
  /// grace period ends on a timer, not on a kernel event). Default: a poll tick.
  virtual void on_deadline(TimePoint now) { on_tick(now, false); }
};

/// Anything the reactor can wait on: implemented by the BPF ring buffer, PSI
/// triggers, eventfds; tests plug in fakes.
class ReactorSource {
 public:
  virtual ~ReactorSource() = default;
  /// The fd to wait on.
  virtual int fd() const = 0;
  /// EPOLLIN or EPOLLPRI (level-triggered).
  virtual uint32_t epoll_events() const = 0;
  /// Called when ready (and on every tick when drain_on_tick()): append what
  /// arrived to `out`. `now` is the wakeup time.
  virtual void drain(std::vector<PressureEvent>& out, TimePoint now) = 0;
  /// Whether the safety-net tick should also drain this source (the BPF ring
  /// buffer: records written with BPF_RB_NO_WAKEUP are picked up at the latest then).
  virtual bool drain_on_tick() const { return false; }
};

using WatchId = uint64_t;

/// The event loop: one thread, its sources, one deadline timer, and tasks
/// posted from other threads. Everything but stop() and post() runs on the
/// loop's thread (or before run(), while the daemon is set up); the real loop
/// aborts with a message when that rule is broken (is_loop_thread()).
class EventLoop {
 public:
  virtual ~EventLoop() = default;

  /// Runs the loop on the calling thread until stop(). Errors: epoll failure.
  virtual Result<void> run(ReactorHandler& handler) = 0;
  /// Thread-safe: makes run() return after the current wakeup.
  virtual void stop() = 0;
  /// Thread-safe, lock-free, never blocks: runs `task` on the reactor thread.
  /// False when the bounded queue is full (counted in stats.post_rejected).
  virtual bool post(std::function<void()> task) = 0;

  /// One deadline (CLOCK_MONOTONIC, like TimePoint from MonotonicClock): the
  /// handler's on_deadline() runs when it comes. Replaces the previous one;
  /// nullopt cancels. A deadline in the past fires at once. Default: none (the
  /// safety-net tick covers it, up to an interval late).
  virtual void wake_at(std::optional<TimePoint> deadline) { (void)deadline; }
  /// Adds a custom source (tests, future sources). The reactor owns it.
  virtual Result<void> add_source(std::unique_ptr<ReactorSource> source) = 0;

  /// Whether the caller is on the loop's thread: the thread that runs run(),
  /// or, before run() starts, the thread that built the loop.
  virtual bool is_loop_thread() const { return true; }
};

/// Writes "pressured: <what> called off <whose> thread: a bug; aborting" to
/// stderr and the log, then aborts: a call off the loop's thread would race
/// with the loop (EventLoop::is_loop_thread).
[[noreturn]] void abort_off_loop_thread(std::string_view what, std::string_view whose);

/// The kernel alarms the daemon arms after each decision: memory watches at the
/// next crossing levels, the node PID alarm, and the memory cgroups whose
/// reclaim activity is accumulated. Implemented by the BPF and cgroup v1
/// eventfd adapters behind the Reactor; called on the loop's thread.
class KernelAlarms {
 public:
  virtual ~KernelAlarms() = default;

  /// Arms (or re-arms) an alarm on a memory cgroup: usage crossing `alarm_bytes`
  /// upward yields ThresholdUp, falling back ThresholdDown. Updates the BPF
  /// watch map AND (v1) the memory.usage_in_bytes threshold eventfd. Path is
  /// absolute or relative to memory_mount. Re-arming a path replaces its level.
  virtual Result<WatchId> set_watch(const std::string& cgroup_path, uint64_t alarm_bytes) = 0;
  /// Like set_watch, with a separate level for the BPF side, which compares
  /// against the cgroup's page counter. The two differ only at a v1 hierarchy
  /// root, whose memory.usage_in_bytes is computed from statistics while its
  /// page counter sums its children's charges (and a v2 root has no usage file
  /// at all, only the page counter). Default: one level for both.
  virtual Result<WatchId> set_watch_levels(const std::string& cgroup_path, uint64_t file_alarm_bytes,
                                           uint64_t counter_alarm_bytes) {
    (void)counter_alarm_bytes;
    return set_watch(cgroup_path, file_alarm_bytes);
  }
  /// Removes an alarm.
  virtual Result<void> clear_watch(WatchId id) = 0;
  /// The page counter (bytes) of a watched cgroup as the BPF charge hook last
  /// saw it, if it saw it within `max_age`; nullopt otherwise (no BPF, not
  /// watched, no charge below it lately). The only reading of a hierarchy
  /// root's page counter there is: what its BPF alarm level must be based on.
  virtual std::optional<uint64_t> watched_counter(const std::string& cgroup_path, Duration max_age) const {
    (void)cgroup_path;
    (void)max_age;
    return std::nullopt;
  }

  /// Node PID alarm: the BPF fork/free hooks keep a node-wide task count
  /// (seeded from <proc>/loadavg, the count pid.available uses, and re-seeded
  /// on every safety-net tick) and report PidAlarmUp when it reaches `tasks`,
  /// PidAlarmDown when it falls back. 0 disables it. Re-setting keeps the
  /// current up/down side. Error (ENOTSUP) when the hooks are not attached.
  virtual Result<void> set_pid_alarm(uint64_t tasks) {
    (void)tasks;
    return Error{ENOTSUP, "no PID alarm in this reactor"};
  }

  /// Starts accumulating reclaim scan/steal, workingset refaults and memstall
  /// time for a memory cgroup (path absolute or relative to memory_mount),
  /// including everything below it: track kubepods, the QoS tiers and each
  /// pod, read them with memcg_activity(). Tracking an already tracked cgroup
  /// keeps its counters. Returns the cgroup id. ENOTSUP when no activity hook
  /// is attached (BPF off or unavailable); ENOSPC when the map is full.
  virtual Result<uint64_t> track_memcg(const std::string& cgroup_path) {
    (void)cgroup_path;
    return Error{ENOTSUP, "no memcg activity tracking in this reactor"};
  }
  /// Stops tracking (e.g. the pod is gone; its directory may already be
  /// removed, hence by id). ENOENT when it was not tracked.
  virtual Result<void> untrack_memcg(uint64_t cgroup_id) {
    (void)cgroup_id;
    return Error{ENOTSUP, "no memcg activity tracking in this reactor"};
  }
  /// The accumulated activity of a tracked cgroup; nullopt when not tracked.
  /// Thread-safe (reads the BPF map).
  virtual std::optional<MemcgActivity> memcg_activity(uint64_t cgroup_id) const {
    (void)cgroup_id;
    return std::nullopt;
  }
  /// Every tracked cgroup's activity in one read (a full observation
  /// publishes every pod's): `out` is replaced by (cgroup id, activity)
  /// pairs sorted by id. False when there is no batch read (the default) or
  /// the kernel refused it: the caller then asks memcg_activity() per cgroup.
  /// Thread-safe, as memcg_activity().
  virtual bool memcg_activities(std::vector<std::pair<uint64_t, MemcgActivity>>& out) const {
    out.clear();
    return false;
  }
};

}  // namespace pressured
