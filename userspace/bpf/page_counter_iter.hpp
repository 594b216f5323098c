#pragma once
// The batched page-counter read through the page_counters_walk cgroup
// iterator (bpf/pressured_events.bpf.c).

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "kernel/fd.hpp"
#include "pressured/page_counters.hpp"

struct pressured_page_counter;

namespace pressured::bpf {

using kernel::Fd;

/// Owns its own references (a dup of the program's fd, of the map's fd and a
/// mapping of the map), so it may outlive the BPF object it came from.
class PageCounterIter final : public PageCounterReader {
 public:
  /// `prog_fd`, `map_fd`, `depth_map_fd`: the loaded page_counters_walk
  /// program, the page_counters map (BPF_F_MMAPABLE, `capacity` records) and
  /// the page_counters_depth map; all are dup'ed.
  static Result<std::unique_ptr<PageCounterIter>> create(int prog_fd, int map_fd, int depth_map_fd,
                                                         uint32_t capacity, uint32_t page_shift);
  ~PageCounterIter() override;
  PageCounterIter(const PageCounterIter&) = delete;
  PageCounterIter& operator=(const PageCounterIter&) = delete;

  Result<void> read(const std::string& dir, uint32_t depth, std::vector<PageCounterSample>& out) override;

 private:
  struct Link {
    Fd fd;
    uint64_t dir_id = 0;  // the directory's cgroup id when attached
  };
  // Records mapped at first: a node's walk rarely writes more (kubepods'
  // tiers, pods and Guaranteed pods' containers).
  static constexpr std::size_t kFirstMappedRecords = 1024;
  PageCounterIter(Fd prog, Fd map, Fd depth_map, uint32_t capacity, uint32_t page_shift);
  /// Maps (again) the map's first pages, enough for `count` records.
  Result<void> map_records(std::size_t count);
  Result<void> set_depth(uint32_t depth);
  /// One walk through `link`; ESTALE when it did not start at the live
  /// cgroup `link.dir_id` (removed, or recreated under the same name).
  Result<void> walk(const Link& link, std::vector<PageCounterSample>& out);

  Fd prog_;
  Fd map_;
  Fd depth_map_;
  uint32_t depth_ = 0;  // last written to depth_map_ (0: never)
  pressured_page_counter* records_ = nullptr;  // mapped writable: walk() clears the first record
  std::size_t mapped_bytes_ = 0;
  uint32_t capacity_;
  uint32_t page_shift_;
  // One iterator link per directory: attaching costs a BPF_LINK_CREATE and
  // pins the cgroup, so it is done once (again if the directory is recreated).
  std::map<std::string, Link> links_;
};

}  // namespace pressured::bpf
