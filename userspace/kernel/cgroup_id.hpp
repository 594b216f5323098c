#pragma once
// The id the kernel gives a cgroup, as BPF helpers report it
// (bpf_get_current_cgroup_id, cgroup tracepoints' id fields) and as the
// reactor keys its watches: the inode number of the cgroup's kernfs
// directory. One function, so the daemon, the events library and the scans
// compare the same number.

#include <cstdint>
#include <string>

#include "pressured/result.hpp"

namespace pressured::kernel {

/// The cgroup id of the cgroup directory `path`; ENOTDIR when `path` is not
/// a directory. (A directory entry's d_ino, as the pod scans read it, is the
/// same number without the stat.)
Result<uint64_t> cgroup_id_of(const std::string& path);

}  // namespace pressured::kernel
