// Cgroup layout detection (statfs magic + mount table, as the kubelet and
// runc do) and pod cgroup naming.
#include "cgroup/layout.hpp"

#include <libcgroup.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>

#include "cgroup/paths.hpp"
#include "kernel/file.hpp"
#include "kernel/parse.hpp"
#include "pressured/observer.hpp"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif
#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif

namespace pressured {

std::string_view name(CgroupVersion v) { return enum_name(kCgroupVersionNames, v, "?"); }
std::string_view name(CgroupDriver d) { return enum_name(kCgroupDriverNames, d, "?"); }

namespace {

// Pod UIDs are RFC 4122 UUIDs (or a 32-hex hash for static pods); accept
// any alphanumeric text so hand-made test trees work too.
bool valid_uid_chars(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

std::optional<std::string> uid_cgroupfs(std::string_view n) {
  if (!n.starts_with("pod")) return std::nullopt;
  n.remove_prefix(3);
  if (!valid_uid_chars(n) || n.find('_') != std::string_view::npos) return std::nullopt;
  return std::string(n);
}

std::optional<std::string> uid_systemd(std::string_view n) {
  if (!n.ends_with(".slice")) return std::nullopt;
  n.remove_suffix(6);
  auto pos = n.rfind("-pod");
  if (pos == std::string_view::npos) return std::nullopt;
  std::string_view prefix = n.substr(0, pos);
  if (prefix != "kubepods" && prefix != "kubepods-burstable" && prefix != "kubepods-besteffort") return std::nullopt;
  std::string_view u = n.substr(pos + 4);
  if (!valid_uid_chars(u) || u.find('-') != std::string_view::npos) return std::nullopt;
  std::string uid(u);
  for (char& c : uid) {
    if (c == '_') c = '-';
  }
  return uid;
}

bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool under(const std::string& path, const std::string& dir) {
  if (dir.empty()) return false;
  if (path == dir) return true;
  std::string d = dir.back() == '/' ? dir : dir + "/";
  return path.compare(0, d.size(), d) == 0;
}

// Controller mounts from the real mount table via libcgroup, which knows the
// quirks of named and co-mounted hierarchies. Only used when the mount table
// is the real /proc/self/mountinfo: libcgroup reads /proc itself and cannot be
// pointed at a fake tree. cgroup_init() keeps global state: serialise it.
struct LibcgroupMounts {
  std::string memory, pids, freezer;
};
std::optional<LibcgroupMounts> libcgroup_mounts() {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (cgroup_init() != 0) return std::nullopt;
  LibcgroupMounts m;
  auto get = [](const char* ctrl, std::string& out) {
    char* mp = nullptr;
    if (cgroup_get_subsys_mount_point(ctrl, &mp) == 0 && mp != nullptr) out = mp;
    std::free(mp);
  };
  get("memory", m.memory);
  get("pids", m.pids);
  get("freezer", m.freezer);
  return m;
}

}  // namespace

std::optional<std::string> pod_uid_from_cgroup_name(std::string_view dir_name, CgroupDriver driver) {
  switch (driver) {
    case CgroupDriver::Cgroupfs: return uid_cgroupfs(dir_name);
    case CgroupDriver::Systemd: return uid_systemd(dir_name);
    case CgroupDriver::Auto: {
      if (auto u = uid_cgroupfs(dir_name)) return u;
      return uid_systemd(dir_name);
    }
  }
  return std::nullopt;
}

Result<CgroupLayout> detect_layout(const ObserveConfig& config) {
  CgroupLayout l;
  l.mount = cgroup::normalize_path(config.cgroup_mount);
  if (!is_dir(l.mount)) return Error{ENOENT, "cgroup mount " + l.mount + " does not exist"};

  // 1. The mount table (injectable), restricted to hierarchies below the mount.
  const bool real_mount_table = config.mountinfo_path.empty() && config.proc_root == "/proc";
  std::string mountinfo = config.mountinfo_path.empty() ? config.proc_root + "/self/mountinfo" : config.mountinfo_path;
  std::vector<kernel::MountInfo> mounts;
  if (auto text = kernel::read_file(mountinfo)) {
    for (auto& m : kernel::parse_mountinfo(*text)) {
      if ((m.fstype == "cgroup" || m.fstype == "cgroup2") && under(m.mount_point, l.mount)) mounts.push_back(m);
    }
  }

  // 2. The version, like the kubelet: statfs magic of the mount point.
  struct statfs sfs {};
  bool magic_v2 = ::statfs(l.mount.c_str(), &sfs) == 0 && static_cast<unsigned long>(sfs.f_type) == CGROUP2_SUPER_MAGIC;
  bool table_v2 = false;
  std::string v1_memory, v1_pids, v1_freezer, unified;
  for (const auto& m : mounts) {
    if (m.fstype == "cgroup2") {
      if (m.mount_point == l.mount) table_v2 = true;
      if (unified.empty() || m.mount_point == l.mount) unified = m.mount_point;
    } else {
      if (m.has_option("memory") && v1_memory.empty()) v1_memory = m.mount_point;
      if (m.has_option("pids") && v1_pids.empty()) v1_pids = m.mount_point;
      if (m.has_option("freezer") && v1_freezer.empty()) v1_freezer = m.mount_point;
    }
  }
  if (mounts.empty()) {
    // No usable mount table (fake tree without one): probe the directories.
    if (exists(l.mount + "/cgroup.controllers")) {
      table_v2 = true;
      unified = l.mount;
    } else {
      if (exists(l.mount + "/memory/memory.stat")) v1_memory = l.mount + "/memory";
      if (is_dir(l.mount + "/pids")) v1_pids = l.mount + "/pids";
      if (is_dir(l.mount + "/freezer")) v1_freezer = l.mount + "/freezer";
      if (exists(l.mount + "/unified/cgroup.controllers")) unified = l.mount + "/unified";
    }
  } else if (real_mount_table && !magic_v2) {
    // The real host: let libcgroup name the controller mounts.
    if (auto lc = libcgroup_mounts()) {
      if (!lc->memory.empty()) v1_memory = lc->memory;
      if (!lc->pids.empty()) v1_pids = lc->pids;
      if (!lc->freezer.empty()) v1_freezer = lc->freezer;
    }
  }

  if (magic_v2 || table_v2) {
    l.version = CgroupVersion::V2;
    l.unified_mount = l.mount;
    l.memory_mount = l.mount;
    l.memory_on_v2 = true;
    l.pids_mount = l.mount;
    auto controllers = kernel::read_file(l.mount + "/cgroup.controllers");
    if (!controllers) return Error{controllers.error().code, "cgroup v2 at " + l.mount + ": " + controllers.error().message};
    std::string_view c = *controllers;
    if (c.find("memory") == std::string_view::npos) {
      return Error{ENOTSUP, "cgroup v2 at " + l.mount + " has no memory controller (cgroup.controllers: " +
                                std::string(cgroup::trim_view(c)) + ")"};
    }
    if (c.find("pids") == std::string_view::npos) l.pids_mount.clear();
  } else {
    if (v1_memory.empty()) {
      return Error{ENOTSUP, "no memory controller found under " + l.mount + " (read " + mountinfo +
                                "); is the memory cgroup controller enabled?"};
    }
    l.version = unified.empty() ? CgroupVersion::V1 : CgroupVersion::Hybrid;
    l.memory_mount = v1_memory;
    l.unified_mount = unified;
    l.pids_mount = v1_pids;
    l.freezer_mount = v1_freezer;
  }

  // 3. The driver and the kubepods cgroup.
  std::string root = cgroup::normalize_path(config.cgroup_root);
  auto in = [&](const std::string& mount, const std::string& rel) {
    return cgroup::normalize_path(mount + "/" + root + "/" + rel);
  };
  std::string name_cgroupfs = config.kubepods_name;
  std::string name_systemd = config.kubepods_name.ends_with(".slice") ? config.kubepods_name : config.kubepods_name + ".slice";
  if (name_cgroupfs.ends_with(".slice")) name_cgroupfs.resize(name_cgroupfs.size() - 6);
  std::string kubepods;
  switch (config.driver) {
    case CgroupDriver::Cgroupfs:
      l.driver = CgroupDriver::Cgroupfs;
      kubepods = name_cgroupfs;
      break;
    case CgroupDriver::Systemd:
      l.driver = CgroupDriver::Systemd;
      kubepods = name_systemd;
      break;
    case CgroupDriver::Auto:
      if (is_dir(in(l.memory_mount, name_systemd)) && !is_dir(in(l.memory_mount, name_cgroupfs))) {
        l.driver = CgroupDriver::Systemd;
        kubepods = name_systemd;
      } else {
        l.driver = config.kubepods_name.ends_with(".slice") ? CgroupDriver::Systemd : CgroupDriver::Cgroupfs;
        kubepods = l.driver == CgroupDriver::Systemd ? name_systemd : name_cgroupfs;
      }
      break;
  }
  l.kubepods_memory_path = in(l.memory_mount, kubepods);
  if (!l.unified_mount.empty()) {
    std::string p = in(l.unified_mount, kubepods);
    if (l.version == CgroupVersion::V2 || is_dir(p)) l.kubepods_unified_path = p;
  }
  if (!l.pids_mount.empty()) {
    std::string p = in(l.pids_mount, kubepods);
    if (is_dir(p)) l.kubepods_pids_path = p;
  }
  if (!l.freezer_mount.empty()) {
    std::string p = in(l.freezer_mount, kubepods);
    if (is_dir(p)) l.kubepods_freezer_path = p;
  }
  return l;
}

}  // namespace pressured
