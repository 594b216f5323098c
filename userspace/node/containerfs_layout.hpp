#pragma once
// Where the containers' writable layers are (KEP-4191): the runtime root's
// filesystem against nodefs and imagefs. docs/observation.md, "Filesystem
// layout".

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "pressured/config.hpp"
#include "pressured/result.hpp"
#include "pressured/snapshot.hpp"

namespace pressured::node {

/// The layout from the filesystem ids (st_dev) of nodefs, imagefs and the
/// writable layers' directory; nullopt for a path that does not exist. A
/// missing imagefs is the nodefs (as the kubelet sees a node without a
/// dedicated image filesystem). Unknown when nodefs or the writable layers'
/// filesystem is missing. Pure.
ContainerfsLayout classify_layout(std::optional<uint64_t> nodefs, std::optional<uint64_t> imagefs,
                                  std::optional<uint64_t> containerfs);

/// What detection found, for the observer (which filesystem to statvfs for
/// containerfs.*) and the start-up log.
struct ContainerfsDetection {
  ContainerfsLayout layout = ContainerfsLayout::Unknown;
  std::string containerfs_path;  // statvfs'd for containerfs.*; empty when unknown
  std::string detail;            // the paths compared, or why the layout is unknown
};

/// The filesystem id of a path (stat's st_dev); ENOENT when it does not
/// exist. The seam tests replace to fake filesystems.
using DeviceOf = std::function<Result<uint64_t>(const std::string& path)>;
Result<uint64_t> stat_device(const std::string& path);

/// Compares the filesystems of `nodefs_path`, `imagefs_path` and the
/// writable layers' directory (`runtime_root`, or the imagefs path when it
/// is empty). Never fails: an error other than ENOENT leaves the layout
/// unknown and says why in `detail`.
ContainerfsDetection detect_containerfs(const ObserveConfig& config, const DeviceOf& device_of = stat_device);

}  // namespace pressured::node
