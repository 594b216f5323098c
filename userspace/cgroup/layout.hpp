#pragma once
// Cgroup layout detection: where the memory, pids and freezer hierarchies and
// the kubepods cgroup are on this node, read from statfs and the mount table.
// The result is the CgroupLayout value of pressured/observer.hpp.

#include "pressured/config.hpp"
#include "pressured/observer.hpp"
#include "pressured/result.hpp"

namespace pressured {

/// Detects the cgroup version like the kubelet (statfs magic of
/// `cgroup_mount`: CGROUP2_SUPER_MAGIC means v2), finds the controller mounts
/// from the mount table (<proc_root>/self/mountinfo, or
/// ObserveConfig::mountinfo_path; so a fake tree with a fake mountinfo works),
/// resolves the driver (Auto: whichever kubepods name exists) and the kubepods
/// cgroup paths. Fails with a clear message when there is no memory controller
/// or the kubepods cgroup does not exist.
Result<CgroupLayout> detect_layout(const ObserveConfig& config);

}  // namespace pressured
