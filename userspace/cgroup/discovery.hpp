#pragma once
// Finds pod and container cgroups below the kubepods cgroup (both drivers).
// Directory scans only; no file reads.

#include <cstdint>
#include <string>
#include <vector>

#include "pressured/observer.hpp"

namespace pressured::cgroup {

/// A pod cgroup directory as seen by one scan of the memory hierarchy.
struct PodDir {
  std::string uid;
  QosClass qos = QosClass::BestEffort;
  std::string memory_path;  // absolute
  uint64_t ino = 0;         // directory inode = cgroup id
};

/// The QoS-level directories for a driver, relative to kubepods:
/// {"" -> Guaranteed, "burstable", "besteffort"} (cgroupfs) or the
/// kubepods-<qos>.slice names (systemd).
struct QosDir {
  std::string rel;
  QosClass qos;
};
std::vector<QosDir> qos_dirs(CgroupDriver driver);

/// Scans <kubepods>, <kubepods>/<burstable>, <kubepods>/<besteffort> for pod
/// directories. A missing kubepods gives an empty list (ENOENT in *err if
/// set); a directory that cannot be listed (a missing QoS tier aside) sets
/// *err to its errno and the list holds only what was listed: it may be short.
std::vector<PodDir> scan_pods(const CgroupLayout& layout, int* err = nullptr);

/// The container cgroups directly below a pod cgroup.
std::vector<ContainerCgroup> scan_containers(const std::string& pod_memory_path);

/// The same cgroup in another hierarchy: <other_mount>/<path relative to memory_mount>.
std::string in_hierarchy(const CgroupLayout& layout, const std::string& memory_path, const std::string& other_mount);

/// The cgroup id of a directory (kernel::cgroup_id_of), 0 when it is not one.
uint64_t dir_inode(const std::string& path);

/// A full PodCgroup for a PodDir: other hierarchies resolved, containers listed.
PodCgroup describe_pod(const CgroupLayout& layout, const PodDir& dir, bool with_containers);

}  // namespace pressured::cgroup
