#include "events/memcg_sources.hpp"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <string>

namespace pressured::events {

namespace {

Result<std::string> pread_all(int fd) {
  std::string buf(4096, '\0');
  ssize_t n = ::pread(fd, buf.data(), buf.size(), 0);
  if (n < 0) return Error::from_errno(errno, "pread");
  buf.resize(static_cast<std::size_t>(n));
  return buf;
}

uint64_t now_ns(TimePoint now) { return static_cast<uint64_t>(now.time_since_epoch().count()); }

}  // namespace

// ---- v1 thresholds ----------------------------------------------------------

V1ThresholdSource::V1ThresholdSource(int efd, int usage_fd, uint64_t threshold, uint64_t cgroup_id, WatchId id)
    : efd_(efd), usage_fd_(usage_fd), threshold_(threshold), cgroup_id_(cgroup_id), id_(id), above_(false) {
  auto u = usage();
  above_ = u && *u >= threshold_;
}

Result<std::unique_ptr<V1ThresholdSource>> V1ThresholdSource::open(const std::string& cgroup_dir,
                                                                   uint64_t threshold_bytes, uint64_t cgroup_id,
                                                                   WatchId id) {
  std::string usage_path = cgroup_dir + "/memory.usage_in_bytes";
  int ufd = ::open(usage_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (ufd < 0) return Error::from_errno(errno, "open " + usage_path);
  int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (efd < 0) {
    int e = errno;
    ::close(ufd);
    return Error::from_errno(e, "eventfd");
  }
  std::string ctl_path = cgroup_dir + "/cgroup.event_control";
  int cfd = ::open(ctl_path.c_str(), O_WRONLY | O_CLOEXEC);
  std::string line = std::to_string(efd) + " " + std::to_string(ufd) + " " + std::to_string(threshold_bytes);
  if (cfd < 0 || ::write(cfd, line.data(), line.size()) < 0) {
    int e = errno;
    if (cfd >= 0) ::close(cfd);
    ::close(efd);
    ::close(ufd);
    return Error::from_errno(e, "register threshold in " + ctl_path);
  }
  ::close(cfd);
  return std::unique_ptr<V1ThresholdSource>(new V1ThresholdSource(efd, ufd, threshold_bytes, cgroup_id, id));
}

V1ThresholdSource::~V1ThresholdSource() {
  // Closing the eventfd unregisters the threshold in the kernel.
  ::close(efd_);
  ::close(usage_fd_);
}

uint32_t V1ThresholdSource::epoll_events() const { return EPOLLIN; }

Result<uint64_t> V1ThresholdSource::usage() const {
  auto text = pread_all(usage_fd_);
  if (!text) return text.error();
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc()) return Error{EINVAL, "unparsable memory.usage_in_bytes"};
  return v;
}

void V1ThresholdSource::drain(std::vector<PressureEvent>& out, TimePoint now) {
  uint64_t count = 0;
  if (::read(efd_, &count, sizeof(count)) != sizeof(count)) return;
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

std::map<std::string, uint64_t, std::less<>> parse_flat_keyed(std::string_view text) {
  std::map<std::string, uint64_t, std::less<>> out;
  while (!text.empty()) {
    auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    auto sp = line.find(' ');
    if (sp == std::string_view::npos) continue;
    uint64_t v = 0;
    auto num = line.substr(sp + 1);
    auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
    if (ec != std::errc()) continue;
    out.emplace(std::string(line.substr(0, sp)), v);
  }
  return out;
}

void memory_events_diff(const std::map<std::string, uint64_t, std::less<>>& before,
                        const std::map<std::string, uint64_t, std::less<>>& after, uint64_t cgroup_id, WatchId id,
                        TimePoint now, std::vector<PressureEvent>& out) {
  static constexpr std::pair<std::string_view, EventType> kKeys[] = {
      {"high", EventType::MemoryEventHigh},
      {"max", EventType::MemoryEventMax},
      {"oom", EventType::MemoryEventOom},
      {"oom_kill", EventType::MemoryEventOomKill},
  };
  for (const auto& [key, type] : kKeys) {
    auto a = after.find(key);
    if (a == after.end()) continue;
    auto b = before.find(key);
    uint64_t old = b == before.end() ? 0 : b->second;
    if (a->second <= old) continue;
    PressureEvent e;
    e.source = EventSource::MemoryEventsV2;
    e.type = type;
    e.cgroup_id = cgroup_id;
    e.value = static_cast<int64_t>(a->second - old);
    e.kernel_ns = now_ns(now);
    e.watch_id = id;
    out.push_back(e);
  }
}

Result<std::unique_ptr<MemoryEventsSource>> MemoryEventsSource::open(const std::string& file, uint64_t cgroup_id,
                                                                     WatchId id) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error::from_errno(errno, "open " + file);
  std::unique_ptr<MemoryEventsSource> src(new MemoryEventsSource(fd, cgroup_id, id));
  auto first = src->read_now();  // the baseline; also arms the kernfs notification
  if (!first) return first.error();
  src->last_ = std::move(*first);
  return src;
}

MemoryEventsSource::~MemoryEventsSource() { ::close(fd_); }

uint32_t MemoryEventsSource::epoll_events() const { return EPOLLPRI; }

Result<std::map<std::string, uint64_t, std::less<>>> MemoryEventsSource::read_now() const {
  auto text = pread_all(fd_);
  if (!text) return text.error();
  return parse_flat_keyed(*text);
}

void MemoryEventsSource::drain(std::vector<PressureEvent>& out, TimePoint now) {
  auto cur = read_now();
  if (!cur) return;
  memory_events_diff(last_, *cur, cgroup_id_, id_, now, out);
  last_ = std::move(*cur);
}

}  // namespace pressured::events
