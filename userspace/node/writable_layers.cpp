// Containers' writable layers from cgroup.procs + /proc/<pid>/mountinfo.
#include "node/writable_layers.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <vector>

#include "cgroup/paths.hpp"
#include "kernel/file.hpp"
#include "kernel/parse.hpp"

namespace pressured {

std::string_view name(LayerFailure f) {
  switch (f) {
    case LayerFailure::NoPid: return "no_pid";
    case LayerFailure::PidVanished: return "pid_vanished";
    case LayerFailure::NoOverlayRoot: return "no_overlay_root";
    case LayerFailure::OutsideRuntimeRoot: return "outside_runtime_root";
    case LayerFailure::PermissionDenied: return "permission_denied";
    case LayerFailure::LayerNotFound: return "layer_not_found";
    case LayerFailure::ReadError: return "read_error";
    case LayerFailure::Count: break;
  }
  return "?";
}

namespace node {
namespace {

constexpr std::size_t kPidsToTry = 4;         // pids of one container tried before giving up
constexpr std::size_t kMaxNestedCgroups = 32;  // sub-cgroups searched for a pid (systemd in a container)
constexpr int kMaxNestedDepth = 2;

bool is_pid(std::string_view s) {
  if (s.empty() || s.size() > 10) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return s != "0";
}

LayerFailure failure_for_errno(int err) {
  if (err == EACCES || err == EPERM) return LayerFailure::PermissionDenied;
  return LayerFailure::ReadError;
}

// Up to kPidsToTry pids from <cgroup>/cgroup.procs, then from sub-cgroups
// (breadth first, bounded). An error reading the container's own file is
// returned as such; errors below it only end the search there.
Result<std::vector<std::string>> container_pids(const std::string& cgroup) {
  std::vector<std::string> pids;
  std::vector<std::pair<std::string, int>> queue{{cgroup, 0}};
  std::size_t visited = 0;
  for (std::size_t qi = 0; qi < queue.size() && pids.size() < kPidsToTry && visited < kMaxNestedCgroups; ++qi) {
    auto [dir, depth] = queue[qi];
    ++visited;
    auto text = kernel::read_file(dir + "/cgroup.procs");
    if (!text) {
      if (qi == 0) return text.error();
      continue;
    }
    std::string_view t = *text;
    while (!t.empty() && pids.size() < kPidsToTry) {
      auto nl = t.find('\n');
      std::string_view line = cgroup::trim_view(t.substr(0, nl));
      t.remove_prefix(nl == std::string_view::npos ? t.size() : nl + 1);
      if (is_pid(line)) pids.emplace_back(line);
    }
    if (depth >= kMaxNestedDepth) continue;
    if (DIR* d = ::opendir(dir.c_str())) {
      while (struct dirent* e = ::readdir(d)) {
        if (e->d_name[0] == '.') continue;
        if (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN) continue;
        queue.emplace_back(dir + "/" + e->d_name, depth + 1);
      }
      ::closedir(d);
    }
  }
  return pids;
}

std::optional<std::string> real_path(const std::string& p, int* err) {
  char buf[PATH_MAX];
  if (::realpath(p.c_str(), buf) == nullptr) {
    *err = errno;
    return std::nullopt;
  }
  return std::string(buf);
}

}  // namespace

std::string unescape_mount_text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '3' && s[i + 2] >= '0' &&
        s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
      out.push_back(static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::optional<std::string> mount_option_value(std::string_view options, std::string_view key) {
  while (!options.empty()) {
    auto comma = options.find(',');
    std::string_view item = options.substr(0, comma);
    options.remove_prefix(comma == std::string_view::npos ? options.size() : comma + 1);
    if (item.size() > key.size() && item.starts_with(key) && item[key.size()] == '=') {
      return unescape_mount_text(item.substr(key.size() + 1));
    }
  }
  return std::nullopt;
}

std::optional<std::string> overlay_root_upperdir(std::string_view mountinfo) {
  const kernel::MountInfo* root = nullptr;
  auto mounts = kernel::parse_mountinfo(mountinfo);
  for (const auto& m : mounts) {
    if (m.mount_point == "/") root = &m;  // later lines are mounted on top
  }
  if (root == nullptr || root->fstype != "overlay") return std::nullopt;
  auto upper = mount_option_value(root->super_options, "upperdir");
  if (!upper || upper->empty()) return std::nullopt;
  return upper;
}

bool path_under(const std::string& path, const std::string& root) {
  if (root.empty() || path.empty()) return false;
  if (root == "/") return path[0] == '/';
  if (path == root) return true;
  return path.size() > root.size() && path.compare(0, root.size(), root) == 0 && path[root.size()] == '/';
}

ContainerLayer resolve_container_layer(const std::string& container_cgroup, const std::string& proc_root,
                                       const std::string& runtime_root_real) {
  ContainerLayer out;
  auto fail = [&](LayerFailure f, std::string detail) {
    out.failure = f;
    out.detail = std::move(detail);
    return out;
  };
  auto pids = container_pids(container_cgroup);
  if (!pids) {
    int e = pids.error().code;
    // A container removed since the scan has no process any more.
    if (e == ENOENT || e == ENODEV) return fail(LayerFailure::NoPid, pids.error().message);
    return fail(failure_for_errno(e), pids.error().message);
  }
  if (pids->empty()) return fail(LayerFailure::NoPid, container_cgroup + "/cgroup.procs is empty");

  std::string mountinfo;
  std::string last_vanished;
  for (const auto& pid : *pids) {
    const std::string path = proc_root + "/" + pid + "/mountinfo";
    auto text = kernel::read_file(path);
    if (!text) {
      int e = text.error().code;
      if (e == ENOENT || e == ESRCH || e == EINVAL) {  // exited between cgroup.procs and here
        last_vanished = text.error().message;
        continue;
      }
      return fail(failure_for_errno(e), text.error().message);
    }
    if (text->empty()) {  // a live task always has "/": it exited while being read
      last_vanished = path + " is empty (the process exited)";
      continue;
    }
    mountinfo = std::move(*text);
    break;
  }
  if (mountinfo.empty()) return fail(LayerFailure::PidVanished, last_vanished);

  auto upper = overlay_root_upperdir(mountinfo);
  if (!upper) return fail(LayerFailure::NoOverlayRoot, "no overlay with an upperdir mounted on / (" + container_cgroup + ")");
  const std::string lexical = cgroup::normalize_path(*upper);
  int err = 0;
  auto real = real_path(*upper, &err);
  if (!real) {
    if (!path_under(lexical, runtime_root_real)) return fail(LayerFailure::OutsideRuntimeRoot, *upper);
    if (err == EACCES || err == EPERM) return fail(LayerFailure::PermissionDenied, *upper);
    if (err == ENOENT || err == ENOTDIR) return fail(LayerFailure::LayerNotFound, *upper);
    return fail(LayerFailure::ReadError, *upper);
  }
  if (!path_under(*real, runtime_root_real) || *real == runtime_root_real) {
    return fail(LayerFailure::OutsideRuntimeRoot, *upper + " (" + *real + ")");
  }
  out.upper_dir = std::move(*real);
  return out;
}

}  // namespace node
}  // namespace pressured
