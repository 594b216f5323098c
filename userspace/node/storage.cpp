// Per-pod ephemeral storage: an iterative, bounded walk of pod log and
// emptyDir directories and of the containers' writable layers (overlay upper
// dirs, node/writable_layers.hpp) that never follows symlinks nor crosses
// filesystems.
#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cgroup/discovery.hpp"
#include "common/periodic_worker.hpp"
#include "node/writable_layers.hpp"
#include "pressured/observer.hpp"

namespace pressured {
namespace {

struct WalkBudget {
  std::chrono::steady_clock::time_point deadline;
  uint64_t entries_left = 0;
  bool exhausted = false;
  uint64_t errors = 0;
  uint64_t entries = 0;

  bool spend() {
    if (exhausted) return false;
    if (entries_left == 0 || ((entries & 255) == 0 && std::chrono::steady_clock::now() > deadline)) {
      exhausted = true;
      return false;
    }
    --entries_left;
    ++entries;
    return true;
  }

  /// Checks the deadline between units of work that spend() does not see
  /// (resolving a container's layer reads /proc files).
  bool expired() {
    if (!exhausted && std::chrono::steady_clock::now() > deadline) exhausted = true;
    return exhausted;
  }
};

constexpr std::size_t kMaxDepth = 128;

// Adds the usage of the tree at `root` (a directory) to `out`. Hard links are
// counted once per walk via `seen` (only for nlink > 1). Returns 0, or the
// errno when `root` itself cannot be opened (ENOENT: nothing to count).
int walk_tree(const std::string& root, PodDiskUsage& out, WalkBudget& budget, std::set<std::pair<dev_t, ino_t>>& seen) {
  int rfd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (rfd < 0) {
    int err = errno;
    if (err != ENOENT) ++budget.errors;
    return err;
  }
  struct stat rst {};
  if (::fstat(rfd, &rst) != 0) {
    int err = errno;
    ::close(rfd);
    ++budget.errors;
    return err;
  }
  const dev_t dev = rst.st_dev;
  out.bytes += static_cast<uint64_t>(rst.st_blocks) * 512;
  out.inodes += 1;
  DIR* top = ::fdopendir(rfd);
  if (top == nullptr) {
    int err = errno;
    ::close(rfd);
    ++budget.errors;
    return err;
  }
  std::vector<DIR*> stack{top};
  while (!stack.empty()) {
    DIR* d = stack.back();
    struct dirent* e = ::readdir(d);
    if (e == nullptr) {
      ::closedir(d);
      stack.pop_back();
      continue;
    }
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    if (!budget.spend()) {
      out.complete = false;
      break;
    }
    struct stat st {};
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      ++budget.errors;
      continue;
    }
    if (st.st_dev != dev) continue;  // a mount point below: another filesystem
    if (st.st_nlink > 1 && !S_ISDIR(st.st_mode)) {
      if (!seen.emplace(st.st_dev, st.st_ino).second) continue;
    }
    out.bytes += static_cast<uint64_t>(st.st_blocks) * 512;
    out.inodes += 1;
    if (S_ISDIR(st.st_mode)) {
      if (stack.size() >= kMaxDepth) {
        out.complete = false;
        continue;
      }
      int fd = ::openat(::dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) {
        ++budget.errors;
        continue;
      }
      DIR* sub = ::fdopendir(fd);
      if (sub == nullptr) {
        ::close(fd);
        ++budget.errors;
        continue;
      }
      stack.push_back(sub);
    }
  }
  for (DIR* d : stack) ::closedir(d);
  return 0;
}

// Adds a part's walk to the pod's total.
void add_part(PodDiskUsage& total, const PodDiskUsage& part, uint64_t& part_bytes, uint64_t& part_inodes) {
  total.bytes += part.bytes;
  total.inodes += part.inodes;
  total.complete = total.complete && part.complete;
  part_bytes += part.bytes;
  part_inodes += part.inodes;
}

std::optional<std::string> real_path(const std::string& p, int* err) {
  char buf[PATH_MAX];
  if (::realpath(p.c_str(), buf) == nullptr) {
    *err = errno;
    return std::nullopt;
  }
  return std::string(buf);
}

std::string base_name(const std::string& p) {
  auto slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::vector<std::string> list_dir(const std::string& path) {
  std::vector<std::string> out;
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return out;
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') out.emplace_back(e->d_name);
  }
  ::closedir(d);
  return out;
}

class WalkingStorageSource final : public PodStorageSource {
 public:
  explicit WalkingStorageSource(const ObserveConfig& c)
      : cfg_(c), logs_(c.pod_logs_path), pods_dir_(c.nodefs_path + "/pods"), budget_(c.disk_walk_budget),
        max_entries_(c.disk_walk_max_entries) {}
  ~WalkingStorageSource() override { stop(); }

  void walk_now(TimePoint now) override {
    std::lock_guard<std::mutex> walking(walk_mu_);  // one walk at a time (thread and direct callers)
    auto t0 = std::chrono::steady_clock::now();
    WalkBudget b;
    b.deadline = t0 + budget_;
    b.entries_left = max_entries_;
    std::set<std::pair<dev_t, ino_t>> seen;
    std::unordered_map<std::string, PodDiskUsage> result;
    auto usage_for = [&](const std::string& uid) -> PodDiskUsage& {
      auto [it, inserted] = result.try_emplace(uid);
      if (inserted) it->second.measured_at = now;
      return it->second;
    };
    // Logs: <logs>/<namespace>_<name>_<uid>
    for (const auto& n : list_dir(logs_)) {
      auto us = n.rfind('_');
      if (us == std::string::npos || us + 1 >= n.size()) continue;
      PodDiskUsage& u = usage_for(n.substr(us + 1));
      PodDiskUsage part;
      walk_tree(logs_ + "/" + n, part, b, seen);
      add_part(u, part, u.breakdown.logs_bytes, u.breakdown.logs_inodes);
    }
    // emptyDir volumes: <nodefs>/pods/<uid>/volumes/kubernetes.io~empty-dir
    for (const auto& uid : list_dir(pods_dir_)) {
      std::string ed = pods_dir_ + "/" + uid + "/volumes/kubernetes.io~empty-dir";
      PodDiskUsage& u = usage_for(uid);
      PodDiskUsage part;
      walk_tree(ed, part, b, seen);
      add_part(u, part, u.breakdown.empty_dir_bytes, u.breakdown.empty_dir_inodes);
    }
    // Writable layers of the containers in each pod cgroup.
    WritableLayerStats layers = walk_writable_layers(b, seen, usage_for);
    if (b.exhausted) {
      for (auto& [uid, u] : result) u.complete = u.complete && !b.exhausted;
    }
    auto dt = std::chrono::steady_clock::now() - t0;
    std::lock_guard<std::mutex> lock(mu_);
    // Pods the walk did not reach keep their previous value.
    for (auto& [uid, u] : result) cache_[uid] = u;
    for (auto it = cache_.begin(); it != cache_.end();) {
      if (!result.count(it->first) && !b.exhausted) it = cache_.erase(it);
      else ++it;
    }
    ++stats_.walks;
    if (b.exhausted) {
      ++stats_.incomplete_walks;
      spdlog::warn("ephemeral storage walk stopped at its budget ({} entries, {} ms)", b.entries,
                   std::chrono::duration_cast<std::chrono::milliseconds>(dt).count());
    }
    stats_.writable_layers = std::move(layers);
    stats_.entries = b.entries;
    stats_.errors += b.errors;
    stats_.last_walk_duration = std::chrono::duration_cast<Duration>(dt);
  }

  std::optional<PodDiskUsage> lookup(const std::string& uid) const override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(uid);
    if (it == cache_.end()) return std::nullopt;
    return it->second;
  }

  void start(Duration interval, const Clock& clock) override {
    worker_.start(interval, [this, &clock] { walk_now(clock.now()); });
  }

  void stop() override { worker_.stop(); }

  PodStorageStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  // Resolves and walks the writable layer of every container below every pod
  // cgroup; each upper dir is counted once. Failures are counted by reason,
  // logged at warn once per reason, and never stop the walk.
  template <typename UsageFor>
  WritableLayerStats walk_writable_layers(WalkBudget& b, std::set<std::pair<dev_t, ino_t>>& seen, UsageFor&& usage_for) {
    WritableLayerStats ls;
    const std::string configured = cfg_.runtime_root.empty() ? cfg_.imagefs_path : cfg_.runtime_root;
    int err = 0;
    auto root = real_path(configured, &err);
    if (!root) {
      ls.not_measured_reason = "runtime root " + configured + ": " + std::strerror(err);
    } else if (*root == "/") {
      ls.not_measured_reason = "runtime root " + configured + " resolves to /";
      root.reset();
    }
    std::optional<CgroupLayout> layout;
    if (root) {
      auto l = detect_layout(cfg_);
      if (l) layout = std::move(*l);
      else ls.not_measured_reason = "cgroup layout: " + l.error().message;
    }
    if (!root || !layout) {
      if (!warned_not_measured_) {
        warned_not_measured_ = true;
        spdlog::warn("writable container layers are not counted in pod ephemeral storage: {}", ls.not_measured_reason);
      }
      return ls;
    }
    warned_not_measured_ = false;  // warn again if it is lost later
    ls.measured = true;
    ls.runtime_root = *root;
    std::set<std::string> counted;
    for (const auto& pod : cgroup::scan_pods(*layout)) {
      if (b.expired()) break;
      PodDiskUsage& u = usage_for(pod.uid);
      u.breakdown.writable_layers_measured = true;
      for (const auto& c : cgroup::scan_containers(pod.memory_path)) {
        if (b.expired()) break;
        // CRI-O's conmon monitors a container from a cgroup of its own in
        // the pod; it is not a container and has no rootfs.
        if (base_name(c.memory_path).starts_with("crio-conmon-")) {
          ++ls.skipped;
          continue;
        }
        ++ls.containers;
        ++u.breakdown.containers;
        auto layer = node::resolve_container_layer(c.memory_path, cfg_.proc_root, *root);
        if (!layer.failure) {
          if (!counted.insert(layer.upper_dir).second) {
            ++ls.shared;
            continue;
          }
          PodDiskUsage part;
          int e = walk_tree(layer.upper_dir, part, b, seen);
          if (e == 0) {
            ++ls.layers;
            ++u.breakdown.writable_layers;
            add_part(u, part, u.breakdown.writable_layers_bytes, u.breakdown.writable_layers_inodes);
            continue;
          }
          layer.failure = e == ENOENT || e == ENOTDIR ? LayerFailure::LayerNotFound
                          : e == EACCES || e == EPERM ? LayerFailure::PermissionDenied
                                                      : LayerFailure::ReadError;
          layer.detail = layer.upper_dir + ": " + std::strerror(e);
        }
        auto f = static_cast<std::size_t>(*layer.failure);
        ++ls.unresolved[f];
        ++u.breakdown.unresolved_containers;
        // A container starting or exiting has no process for a moment: expected.
        const bool expected = *layer.failure == LayerFailure::NoPid || *layer.failure == LayerFailure::PidVanished;
        if (!expected && !warned_failure_[f]) {
          warned_failure_[f] = true;
          spdlog::warn("writable layer of container {} in pod {} not counted ({}): {}", c.id, pod.uid,
                       name(*layer.failure), layer.detail);
        } else {
          spdlog::debug("writable layer of container {} in pod {} not counted ({}): {}", c.id, pod.uid,
                        name(*layer.failure), layer.detail);
        }
      }
    }
    return ls;
  }

  ObserveConfig cfg_;
  std::mutex walk_mu_;
  bool warned_not_measured_ = false;  // walk thread only
  std::array<bool, static_cast<std::size_t>(LayerFailure::Count)> warned_failure_{};
  std::string logs_, pods_dir_;
  Duration budget_;
  uint64_t max_entries_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, PodDiskUsage> cache_;
  PodStorageStats stats_;
  PeriodicWorker worker_;
};

}  // namespace

std::unique_ptr<PodStorageSource> make_pod_storage_source(const ObserveConfig& config) {
  return std::make_unique<WalkingStorageSource>(config);
}

}  // namespace pressured
