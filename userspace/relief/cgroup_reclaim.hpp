#pragma once
// The real ReclaimWriter: cgroup v2 memory.reclaim (Linux 5.19+), confined
// to the pods root. It asks with "swappiness=0" so that reclaim takes page
// cache and never pushes anonymous memory to swap; a kernel that does not
// know the argument (it came with Linux 6.9) answers EINVAL, and the writer
// then asks without it from then on (with swap off, as on most Kubernetes
// nodes, memcg reclaim cannot take anonymous memory anyway).

#include <atomic>
#include <string>

#include "pressured/relief.hpp"

namespace pressured {

/// Whether `cgroup_dir` (a v2 memory cgroup: kubepods) has memory.reclaim.
/// False on cgroup v1 and on kernels before 5.19.
bool memory_reclaim_available(const std::string& cgroup_dir);

class CgroupReclaimWriter final : public ReclaimWriter {
 public:
  /// `pods_root`: the absolute kubepods cgroup directory; nothing outside it is ever written.
  explicit CgroupReclaimWriter(std::string pods_root);

  /// Writes "<bytes> swappiness=0" (or "<bytes>") to <cgroup_path>/memory.reclaim.
  /// Returns what came back: `bytes` when the kernel reclaimed all of it,
  /// else the fall of memory.current across the write (EAGAIN: it gave back
  /// less). Errors: a path outside the pods root (EPERM), a cgroup gone, a
  /// write refused.
  Result<uint64_t> reclaim(const std::string& cgroup_path, uint64_t bytes) override;

  /// What the kernel said of "swappiness=0": unknown until the first write.
  enum class Swappiness : int { Unknown, Accepted, Refused };
  Swappiness swappiness() const { return swappiness_.load(); }

 private:
  std::string pods_root_;
  std::atomic<Swappiness> swappiness_{Swappiness::Unknown};
};

/// Whether `path` is `root` or below it, lexically (no "..", no ".").
bool path_within(const std::string& root, const std::string& path);

}  // namespace pressured
