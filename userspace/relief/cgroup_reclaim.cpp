#include "relief/cgroup_reclaim.hpp"

#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

#include "kernel/file.hpp"

namespace pressured {

bool memory_reclaim_available(const std::string& cgroup_dir) {
  return ::access((cgroup_dir + "/memory.reclaim").c_str(), W_OK) == 0;
}

bool path_within(const std::string& root, const std::string& path) {
  if (root.empty() || root.front() != '/' || path.size() <= root.size()) return false;
  if (path.compare(0, root.size(), root) != 0 || (root.back() != '/' && path[root.size()] != '/')) return false;
  // No component may climb out again.
  for (std::size_t i = root.size(); i < path.size();) {
    std::size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    const std::string_view c(path.data() + i, j - i);
    if (c == ".." || c == ".") return false;
    i = j + 1;
  }
  return true;
}

CgroupReclaimWriter::CgroupReclaimWriter(std::string pods_root) : pods_root_(std::move(pods_root)) {
  while (pods_root_.size() > 1 && pods_root_.back() == '/') pods_root_.pop_back();
}

Result<uint64_t> CgroupReclaimWriter::reclaim(const std::string& cgroup_path, uint64_t bytes) {
  if (!path_within(pods_root_, cgroup_path)) {
    return Error{EPERM, fmt::format("{}: not below the pods root {}: never reclaimed", cgroup_path, pods_root_)};
  }
  const std::string file = cgroup_path + "/memory.reclaim";
  auto before = kernel::read_u64(cgroup_path + "/memory.current");
  if (!before) return before.error();
  Result<void> w = Error{EINVAL, ""};
  if (swappiness_.load() != Swappiness::Refused) {
    w = kernel::write_file(file, fmt::format("{} swappiness=0", bytes));
    if (!w && w.error().code == EINVAL && swappiness_.load() == Swappiness::Unknown) {
      swappiness_ = Swappiness::Refused;  // a kernel before the argument: ask without it from now on
    } else if (w || w.error().code == EAGAIN) {
      swappiness_ = Swappiness::Accepted;
    }
  }
  if (swappiness_.load() == Swappiness::Refused) w = kernel::write_file(file, std::to_string(bytes));
  if (w) return bytes;
  if (w.error().code != EAGAIN) return w.error();
  // EAGAIN: the kernel gave back less than asked; how much is what memory.current lost.
  auto after = kernel::read_u64(cgroup_path + "/memory.current");
  if (!after) return after.error();
  return *before > *after ? *before - *after : 0;
}

}  // namespace pressured
