#include "bpf/page_counter_iter.hpp"

#include <bpf/bpf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "kernel/cgroup_id.hpp"
#include "pressured_events.h"

namespace pressured::bpf {

Result<std::unique_ptr<PageCounterIter>> PageCounterIter::create(int prog_fd, int map_fd, int depth_map_fd,
                                                                 uint32_t capacity, uint32_t page_shift) {
  if (prog_fd < 0 || map_fd < 0 || depth_map_fd < 0 || capacity == 0)
    return Error{ENOTSUP, "page-counter iterator not loaded"};
  Fd prog(::fcntl(prog_fd, F_DUPFD_CLOEXEC, 0));
  if (!prog) return Error::from_errno(errno, "dup page-counter iterator program fd");
  Fd map(::fcntl(map_fd, F_DUPFD_CLOEXEC, 0));
  if (!map) return Error::from_errno(errno, "dup page_counters map fd");
  Fd depth_map(::fcntl(depth_map_fd, F_DUPFD_CLOEXEC, 0));
  if (!depth_map) return Error::from_errno(errno, "dup page_counters_depth map fd");
  std::unique_ptr<PageCounterIter> it(
      new PageCounterIter(std::move(prog), std::move(map), std::move(depth_map), capacity, page_shift));
  if (auto r = it->map_records(kFirstMappedRecords); !r) return r.error();
  return it;
}

PageCounterIter::PageCounterIter(Fd prog, Fd map, Fd depth_map, uint32_t capacity, uint32_t page_shift)
    : prog_(std::move(prog)),
      map_(std::move(map)),
      depth_map_(std::move(depth_map)),
      capacity_(capacity),
      page_shift_(page_shift) {}

PageCounterIter::~PageCounterIter() {
  if (records_) ::munmap(records_, mapped_bytes_);
}

// Maps the first pages of the map, enough for `count` records: the kernel
// maps a BPF array's every page at mmap(), so a mapping of the whole map
// (16384 records, 384 KiB) would be resident from the start for the few
// hundred records a node's walk writes.
Result<void> PageCounterIter::map_records(std::size_t count) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  std::size_t bytes = std::min<std::size_t>(count, capacity_) * sizeof(pressured_page_counter);
  bytes = std::max<std::size_t>((bytes + page - 1) / page * page, page);
  if (records_ && bytes <= mapped_bytes_) return {};
  void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, map_.get(), 0);
  if (mem == MAP_FAILED) return Error::from_errno(errno, "mmap the page_counters map");
  if (records_) ::munmap(records_, mapped_bytes_);
  records_ = static_cast<pressured_page_counter*>(mem);
  mapped_bytes_ = bytes;
  return {};
}

Result<void> PageCounterIter::set_depth(uint32_t depth) {
  if (depth == depth_) return {};
  const uint32_t zero = 0;
  if (bpf_map_update_elem(depth_map_.get(), &zero, &depth, BPF_ANY) != 0)
    return Error::from_errno(errno, "set the page-counter walk's depth");
  depth_ = depth;
  return {};
}

Result<void> PageCounterIter::read(const std::string& dir, uint32_t depth, std::vector<PageCounterSample>& out) {
  out.clear();
  // The program walks one or two levels (a tier's pods; kubepods' tiers and pods).
  if (depth == 0 || depth > 2) return Error{EINVAL, "page-counter walk of depth " + std::to_string(depth) + " (1 or 2)"};
  if (auto r = set_depth(depth); !r) return r;
  // A known directory costs no lookup: a walk through its link tells by
  // itself when the directory was removed or recreated.
  if (auto it = links_.find(dir); it != links_.end()) {
    auto r = walk(it->second, out);
    if (r || r.error().code != ESTALE) return r;
    links_.erase(it);  // the directory was recreated: attach to the new one
  }
  auto id = kernel::cgroup_id_of(dir);
  if (!id) return id.error();
  auto d = Fd::open(dir, O_RDONLY | O_DIRECTORY);
  if (!d) return d.error();
  union bpf_iter_link_info info;
  std::memset(&info, 0, sizeof(info));
  info.cgroup.cgroup_fd = static_cast<__u32>(d->get());
  // The program walks the children itself (bpf/pressured_events.bpf.c).
  info.cgroup.order = BPF_CGROUP_ITER_SELF_ONLY;
  LIBBPF_OPTS(bpf_link_create_opts, opts, .iter_info = &info, .iter_info_len = sizeof(info));
  Link link{Fd(bpf_link_create(prog_.get(), 0, BPF_TRACE_ITER, &opts)), *id};
  if (!link.fd) {
    // Before the kernel took v1 cgroup fds here (EBADF), or no cgroup iterator.
    return Error::from_errno(errno, "attach the page-counter iterator to " + dir);
  }
  auto r = walk(link, out);
  if (!r) return r;
  links_.emplace(dir, std::move(link));
  return {};
}

Result<void> PageCounterIter::walk(const Link& link, std::vector<PageCounterSample>& out) {
  // The walk writes the first record only when it starts at a live cgroup: a
  // removed directory's walk shows nothing and may end with the count of the
  // walk before, whose records are still in the map.
  records_[0].cgroup_id = 0;
  Fd iter(bpf_iter_create(link.fd.get()));
  if (!iter) return Error::from_errno(errno, "create a page-counter iterator");
  pressured_page_counter_walk end{};
  std::size_t got = 0;
  // The walk runs inside read(): its only output is the summary at the end.
  for (;;) {
    ssize_t n = ::read(iter.get(), reinterpret_cast<char*>(&end) + got, sizeof(end) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::from_errno(errno, "read the page-counter iterator");
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
    if (got == sizeof(end)) break;
  }
  if (got != sizeof(end)) return Error{EIO, "page-counter iterator: no summary (" + std::to_string(got) + " bytes)"};
  if (end.truncated || end.count > capacity_) {
    return Error{ENOSPC, "more than " + std::to_string(capacity_) + " memory cgroups to read in one batch"};
  }
  // A walk longer than the mapping: map more (twice what it needs, so that
  // a growing node maps again rarely).
  if (auto r = map_records(std::size_t{end.count} * 2); !r) return r;
  out.reserve(end.count);
  for (uint32_t i = 0; i < end.count; ++i) {
    const pressured_page_counter& rec = records_[i];
    out.push_back({rec.cgroup_id, rec.pages << page_shift_, rec.max_pages << page_shift_});
  }
  // Pre-order: the first record is the walk's root.
  if (out.empty() || out.front().cgroup_id != link.dir_id) {
    out.clear();
    return Error{ESTALE, "the page-counter iterator walks another cgroup than the directory"};
  }
  return {};
}

}  // namespace pressured::bpf
