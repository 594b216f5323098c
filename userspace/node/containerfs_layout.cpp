// Filesystem layout detection: three stat() calls, compared by st_dev.
#include "node/containerfs_layout.hpp"

#include <sys/stat.h>

#include <cerrno>

namespace pressured::node {

ContainerfsLayout classify_layout(std::optional<uint64_t> nodefs, std::optional<uint64_t> imagefs,
                                  std::optional<uint64_t> containerfs) {
  if (!nodefs || !containerfs) return ContainerfsLayout::Unknown;
  const uint64_t image = imagefs.value_or(*nodefs);
  if (*containerfs == image) return image == *nodefs ? ContainerfsLayout::Single : ContainerfsLayout::Imagefs;
  if (*containerfs == *nodefs) return ContainerfsLayout::Split;
  return ContainerfsLayout::Separate;
}

Result<uint64_t> stat_device(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Error::from_errno(errno, "stat " + path);
  return static_cast<uint64_t>(st.st_dev);
}

ContainerfsDetection detect_containerfs(const ObserveConfig& config, const DeviceOf& device_of) {
  ContainerfsDetection out;
  const bool own_root = !config.runtime_root.empty();
  const std::string layers = own_root ? config.runtime_root : config.imagefs_path;
  std::string error;
  // nullopt for a path that does not exist; an error for anything else.
  auto device = [&](const std::string& path) -> std::optional<uint64_t> {
    if (path.empty()) return std::nullopt;
    auto d = device_of(path);
    if (d) return *d;
    if (d.error().code != ENOENT && error.empty()) error = d.error().message;
    return std::nullopt;
  };
  const auto nodefs = device(config.nodefs_path);
  const auto imagefs = device(config.imagefs_path);
  auto containerfs = device(layers);
  std::string layers_path = layers;
  // No separate image store and no runtime root of its own: the layers are
  // where the images would be, on nodefs (the observer reads imagefs there too).
  if (!containerfs && !own_root && !imagefs && error.empty()) {
    containerfs = nodefs;
    layers_path = config.nodefs_path;
  }
  if (!error.empty()) {
    out.detail = error;
    return out;
  }
  out.layout = classify_layout(nodefs, imagefs, containerfs);
  if (out.layout == ContainerfsLayout::Unknown) {
    out.detail = !nodefs ? "nodefs " + config.nodefs_path + " does not exist"
                         : "the writable layers' directory " + layers + " (cgroup." +
                               (own_root ? "runtimeRoot" : "imagefsPath") + ") does not exist";
    return out;
  }
  out.containerfs_path = layers_path;
  out.detail = "nodefs " + config.nodefs_path + ", imagefs " + (imagefs ? config.imagefs_path : "= nodefs") +
               ", writable layers " + layers_path;
  return out;
}

}  // namespace pressured::node
