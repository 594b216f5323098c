#pragma once
// A batched read of memory page counters: the usage of many cgroups in one
// call, for decisions that must bound every pod's usage now.

#include <cstdint>
#include <string>
#include <vector>

#include "pressured/result.hpp"

namespace pressured {

/// One cgroup's memory page counter, as read in a batch.
struct PageCounterSample {
  uint64_t cgroup_id = 0;    ///< kernfs id: the cgroup directory's inode number
  uint64_t usage_bytes = 0;  ///< memory.usage_in_bytes (v1) / memory.current (v2): the same counter
  /// The counter's limit, as v1's memory.limit_in_bytes prints it: with no
  /// limit, the page counter's maximum (about 2^63; v2's memory.max prints
  /// "max" for it).
  uint64_t limit_bytes = 0;
};

/// Reads the page counters of a memory cgroup directory and of its
/// descendants down to a given depth (kubepods -> QoS tier -> pod: 2), all at
/// once, fresh: the values the cgroups' usage files would print now.
/// Not thread-safe: one owner thread.
class PageCounterReader {
 public:
  virtual ~PageCounterReader() = default;

  /// Fills `out` (cleared first) with `dir` itself and its cgroups down to
  /// `depth` levels below it (1: children only; 2 at most: kubepods' tiers
  /// and pods), `dir` first, the rest in no particular order. `dir` is an
  /// absolute path in the memory hierarchy.
  /// Error when the batch cannot be read (the kernel refuses to walk this
  /// hierarchy, more cgroups than the reader holds, ...): the caller reads
  /// the files instead.
  virtual Result<void> read(const std::string& dir, uint32_t depth, std::vector<PageCounterSample>& out) = 0;
};

}  // namespace pressured
