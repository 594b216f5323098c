#include "cgroup/discovery.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>

#include "kernel/cgroup_id.hpp"

namespace pressured::cgroup {
namespace {

// Calls fn(name, ino) for each sub-directory of `path`. Returns 0 or errno.
template <typename Fn>
int for_each_subdir(const std::string& path, Fn&& fn) {
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return errno;
  int dfd = ::dirfd(d);
  for (;;) {
    errno = 0;
    struct dirent* e = ::readdir(d);
    if (e == nullptr) {
      int err = errno;  // 0 at the end of the directory
      ::closedir(d);
      return err;
    }
    if (e->d_name[0] == '.') continue;
    bool dir = e->d_type == DT_DIR;
    uint64_t ino = e->d_ino;
    if (e->d_type == DT_UNKNOWN) {
      struct stat st {};
      if (::fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      dir = S_ISDIR(st.st_mode);
      ino = st.st_ino;
    }
    if (dir) fn(std::string_view(e->d_name), ino);
  }
}

}  // namespace

std::vector<QosDir> qos_dirs(CgroupDriver driver) {
  if (driver == CgroupDriver::Systemd) {
    return {{"", QosClass::Guaranteed},
            {"kubepods-burstable.slice", QosClass::Burstable},
            {"kubepods-besteffort.slice", QosClass::BestEffort}};
  }
  return {{"", QosClass::Guaranteed}, {"burstable", QosClass::Burstable}, {"besteffort", QosClass::BestEffort}};
}

std::vector<PodDir> scan_pods(const CgroupLayout& layout, int* err) {
  std::vector<PodDir> out;
  if (err != nullptr) *err = 0;
  for (const auto& q : qos_dirs(layout.driver)) {
    std::string base = q.rel.empty() ? layout.kubepods_memory_path : layout.kubepods_memory_path + "/" + q.rel;
    int e = for_each_subdir(base, [&](std::string_view name, uint64_t ino) {
      auto uid = pod_uid_from_cgroup_name(name, layout.driver);
      if (!uid) return;
      out.push_back(PodDir{std::move(*uid), q.qos, base + "/" + std::string(name), ino});
    });
    if (e != 0 && q.rel.empty()) {
      if (err != nullptr) *err = e;
      return out;
    }
    // A QoS tier that does not exist has no pods; any other failure (EMFILE,
    // EACCES, EIO) leaves its pods unlisted, which the caller must know.
    if (e != 0 && e != ENOENT && err != nullptr && *err == 0) *err = e;
  }
  return out;
}

std::vector<ContainerCgroup> scan_containers(const std::string& pod_memory_path) {
  std::vector<ContainerCgroup> out;
  for_each_subdir(pod_memory_path, [&](std::string_view name, uint64_t ino) {
    std::string_view id = name;
    if (id.ends_with(".scope")) {
      id.remove_suffix(6);
      auto dash = id.rfind('-');
      if (dash != std::string_view::npos) id.remove_prefix(dash + 1);
    }
    out.push_back(ContainerCgroup{std::string(id), pod_memory_path + "/" + std::string(name), ino});
  });
  return out;
}

std::string in_hierarchy(const CgroupLayout& layout, const std::string& memory_path, const std::string& other_mount) {
  if (other_mount.empty()) return {};
  if (other_mount == layout.memory_mount) return memory_path;
  if (memory_path.compare(0, layout.memory_mount.size(), layout.memory_mount) != 0) return {};
  return other_mount + memory_path.substr(layout.memory_mount.size());
}

uint64_t dir_inode(const std::string& path) {
  auto id = kernel::cgroup_id_of(path);
  return id ? *id : 0;
}

PodCgroup describe_pod(const CgroupLayout& layout, const PodDir& dir, bool with_containers) {
  PodCgroup p;
  p.uid = dir.uid;
  p.qos = dir.qos;
  p.memory_path = dir.memory_path;
  p.cgroup_id = dir.ino;
  if (!layout.unified_mount.empty()) {
    std::string u = in_hierarchy(layout, dir.memory_path, layout.unified_mount);
    uint64_t ino = u == dir.memory_path ? dir.ino : dir_inode(u);
    if (ino != 0) {
      p.unified_path = u;
      p.unified_cgroup_id = ino;
    }
  }
  if (!layout.pids_mount.empty()) {
    std::string pp = in_hierarchy(layout, dir.memory_path, layout.pids_mount);
    if (pp == dir.memory_path || dir_inode(pp) != 0) p.pids_path = pp;
  }
  if (!layout.freezer_mount.empty()) {
    std::string fp = in_hierarchy(layout, dir.memory_path, layout.freezer_mount);
    if (dir_inode(fp) != 0) p.freezer_path = fp;
  }
  if (with_containers) p.containers = scan_containers(dir.memory_path);
  return p;
}

}  // namespace pressured::cgroup
