#include "events/memcg_sources.hpp"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "kernel/file.hpp"
#include "kernel/parse.hpp"

namespace pressured::events {

namespace {

uint64_t now_ns(TimePoint now) { return static_cast<uint64_t>(now.time_since_epoch().count()); }

}  // namespace

// ---- v1 thresholds ----------------------------------------------------------

V1ThresholdSource::V1ThresholdSource(kernel::Fd efd, kernel::Fd usage_fd, std::string usage_path, uint64_t threshold,
                                     uint64_t cgroup_id, WatchId id)
    : efd_(std::move(efd)), usage_fd_(std::move(usage_fd)), usage_path_(std::move(usage_path)), threshold_(threshold),
      cgroup_id_(cgroup_id), id_(id), above_(false) {
  auto u = usage();
  above_ = u && *u >= threshold_;
}

Result<std::unique_ptr<V1ThresholdSource>> V1ThresholdSource::open(const std::string& cgroup_dir,
                                                                   uint64_t threshold_bytes, uint64_t cgroup_id,
                                                                   WatchId id) {
  std::string usage_path = cgroup_dir + "/memory.usage_in_bytes";
  auto ufd = kernel::Fd::open(usage_path, O_RDONLY);
  if (!ufd) return ufd.error();
  kernel::Fd efd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!efd) return Error::from_errno(errno, "eventfd");
  std::string ctl_path = cgroup_dir + "/cgroup.event_control";
  std::string line =
      std::to_string(efd.get()) + " " + std::to_string(ufd->get()) + " " + std::to_string(threshold_bytes);
  if (auto w = kernel::write_file(ctl_path, line); !w) {
    return Error{w.error().code, "register threshold in " + ctl_path + ": " + w.error().message};
  }
  return std::unique_ptr<V1ThresholdSource>(
      new V1ThresholdSource(std::move(efd), std::move(*ufd), std::move(usage_path), threshold_bytes, cgroup_id, id));
}

// Closing the eventfd (efd_'s destructor) unregisters the threshold in the kernel.
V1ThresholdSource::~V1ThresholdSource() = default;

uint32_t V1ThresholdSource::epoll_events() const { return EPOLLIN; }

Result<uint64_t> V1ThresholdSource::usage() const {
  std::string buf;
  auto text = kernel::pread_all(usage_fd_.get(), buf, usage_path_);
  if (!text) return text.error();
  auto v = kernel::parse_single_value(*text);
  if (!v || !v->has_value()) return Error{EINVAL, usage_path_ + ": not a number of bytes"};
  return **v;
}

void V1ThresholdSource::drain(std::vector<PressureEvent>& out, TimePoint now) {
  uint64_t count = 0;
  if (::read(efd_.get(), &count, sizeof(count)) != sizeof(count)) return;
  auto u = usage();
  if (!u) return;
  bool above = *u >= threshold_;
  // The eventfd fires on crossings both ways; several may have coalesced. Report
  // the side we are on now when it changed, else a round trip (down then up or up then down).
  auto push = [&](EventType t) {
    PressureEvent e;
    e.source = EventSource::MemcgV1Threshold;
    e.type = t;
    e.cgroup_id = cgroup_id_;
    e.value = static_cast<int64_t>(*u);
    e.kernel_ns = now_ns(now);
    e.watch_id = id_;
    out.push_back(e);
  };
  if (above != above_) {
    push(above ? EventType::ThresholdUp : EventType::ThresholdDown);
  } else if (count >= 2) {
    push(above ? EventType::ThresholdDown : EventType::ThresholdUp);
    push(above ? EventType::ThresholdUp : EventType::ThresholdDown);
  }
  above_ = above;
}

// ---- v2 memory.events -------------------------------------------------------

void memory_events_diff(const MemoryEvents& before, const MemoryEvents& after, uint64_t cgroup_id, WatchId id,
                        TimePoint now, std::vector<PressureEvent>& out) {
  static constexpr std::pair<uint64_t MemoryEvents::*, EventType> kCounters[] = {
      {&MemoryEvents::high, EventType::MemoryEventHigh},
      {&MemoryEvents::max, EventType::MemoryEventMax},
      {&MemoryEvents::oom, EventType::MemoryEventOom},
      {&MemoryEvents::oom_kill, EventType::MemoryEventOomKill},
  };
  for (const auto& [counter, type] : kCounters) {
    uint64_t old = before.*counter, now_value = after.*counter;
    if (now_value <= old) continue;
    PressureEvent e;
    e.source = EventSource::MemoryEventsV2;
    e.type = type;
    e.cgroup_id = cgroup_id;
    e.value = static_cast<int64_t>(now_value - old);
    e.kernel_ns = now_ns(now);
    e.watch_id = id;
    out.push_back(e);
  }
}

Result<std::unique_ptr<MemoryEventsSource>> MemoryEventsSource::open(const std::string& file, uint64_t cgroup_id,
                                                                     WatchId id) {
  auto fd = kernel::Fd::open(file, O_RDONLY);
  if (!fd) return fd.error();
  std::unique_ptr<MemoryEventsSource> src(new MemoryEventsSource(std::move(*fd), file, cgroup_id, id));
  auto first = src->read_now();  // the baseline; also arms the kernfs notification
  if (!first) return first.error();
  src->last_ = *first;
  return src;
}

MemoryEventsSource::~MemoryEventsSource() = default;

uint32_t MemoryEventsSource::epoll_events() const { return EPOLLPRI; }

Result<MemoryEvents> MemoryEventsSource::read_now() {
  auto text = kernel::pread_all(fd_.get(), buf_, path_);
  if (!text) return text.error();
  auto ev = kernel::parse_memory_events(*text);
  if (!ev) return Error{ev.error().code, path_ + ": " + ev.error().message};
  return ev;
}

void MemoryEventsSource::drain(std::vector<PressureEvent>& out, TimePoint now) {
  auto cur = read_now();
  if (!cur) return;
  memory_events_diff(last_, *cur, cgroup_id_, id_, now, out);
  last_ = *cur;
}

}  // namespace pressured::events
