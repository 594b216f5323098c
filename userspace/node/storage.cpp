// Per-pod ephemeral storage: an iterative, bounded walk of pod log and
// emptyDir directories and of the containers' writable layers (overlay upper
// dirs, node/writable_layers.hpp) that never follows symlinks nor crosses
// filesystems.
#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cgroup/discovery.hpp"
#include "cgroup/layout.hpp"
#include "common/periodic_worker.hpp"
#include "kernel/fd.hpp"
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

  uint64_t visited = 0;  // entries looked at, counted or not (hard links seen before)

  /// Every entry looked at costs time: checks the deadline now and then.
  bool tick() {
    if (exhausted) return false;
    if ((++visited & 255) == 0 && std::chrono::steady_clock::now() > deadline) exhausted = true;
    return !exhausted;
  }

  /// An entry that is counted spends one of the entry budget.
  bool spend() {
    if (exhausted) return false;
    if (entries_left == 0) {
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

// One directory of the walk: its inode (to check the way back up), the
// subdirectories still to enter, and the entry directly below the root it
// belongs to (an index into `children`; kNoChild when none is kept).
struct WalkFrame {
  ino_t ino = 0;
  std::vector<std::pair<std::string, std::size_t>> pending;
  std::size_t child = 0;
};
constexpr std::size_t kNoChild = static_cast<std::size_t>(-1);

// Counts the entries of the directory open at `dir` into `out` (and the
// frame's child), and queues its subdirectories on the same device in
// `frame.pending`. False when the budget ran out.
bool read_directory(int dir, dev_t dev, bool is_root, WalkFrame& frame, PodDiskUsage& out, WalkBudget& budget,
                    std::set<std::pair<dev_t, ino_t>>& seen, std::vector<NamedStorageUsage>* children) {
  kernel::Fd copy(::fcntl(dir, F_DUPFD_CLOEXEC, 0));
  DIR* d = copy ? ::fdopendir(copy.get()) : nullptr;
  if (d == nullptr) {
    ++budget.errors;
    return true;
  }
  (void)copy.release();  // the DIR owns it now (closedir)
  bool within = true;
  while (struct dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    if (!budget.tick()) {
      within = false;
      break;
    }
    struct stat st {};
    if (::fstatat(dir, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      ++budget.errors;
      continue;
    }
    if (st.st_dev != dev) continue;  // a mount point below: another filesystem
    // Deduplicate before spending: thousands of links to one file cost a
    // stat each, not the entry budget (they would hide the rest of the tree).
    if (st.st_nlink > 1 && !S_ISDIR(st.st_mode)) {
      if (seen.count({st.st_dev, st.st_ino})) continue;
    }
    if (!budget.spend()) {
      within = false;
      break;
    }
    if (st.st_nlink > 1 && !S_ISDIR(st.st_mode)) seen.emplace(st.st_dev, st.st_ino);
    const auto bytes = static_cast<uint64_t>(st.st_blocks) * 512;
    out.bytes += bytes;
    out.inodes += 1;
    std::size_t child = frame.child;
    if (children != nullptr) {
      if (is_root) {
        children->push_back(NamedStorageUsage{e->d_name, 0, 0});
        child = children->size() - 1;
      }
      (*children)[child].bytes += bytes;
      (*children)[child].inodes += 1;
    }
    if (S_ISDIR(st.st_mode)) frame.pending.emplace_back(e->d_name, child);
  }
  ::closedir(d);
  return within;
}

// Adds the usage of the tree at `root` (a directory) to `out`, however deep:
// the walk holds one directory open at a time (plus its listing while it is
// read), enters a subdirectory by openat() and comes back by "..", checked
// to be the directory it came from, so the only bound is the walk's budget
// (every directory costs an entry). A directory moved away while the walk is
// inside it ends the walk of this tree: the usage is then a lower bound
// (complete = false) and an error is counted. Hard links are counted once
// per walk via `seen` (only for nlink > 1). With `children`, the usage of
// each entry directly below `root` (with its subtree) is added to the entry
// of that name as well (an emptyDir volume, a container's logs).
// Returns 0, or the errno when `root` itself cannot be opened (ENOENT:
// nothing to count).
int walk_tree(const std::string& root, PodDiskUsage& out, WalkBudget& budget, std::set<std::pair<dev_t, ino_t>>& seen,
              std::vector<NamedStorageUsage>* children = nullptr) {
  kernel::Fd cur(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!cur) {
    int err = errno;
    if (err != ENOENT) ++budget.errors;
    return err;
  }
  struct stat rst {};
  if (::fstat(cur.get(), &rst) != 0) {
    int err = errno;
    ++budget.errors;
    return err;
  }
  const dev_t dev = rst.st_dev;
  out.bytes += static_cast<uint64_t>(rst.st_blocks) * 512;
  out.inodes += 1;
  std::vector<WalkFrame> stack;
  stack.push_back(WalkFrame{rst.st_ino, {}, kNoChild});
  bool unread = true;  // the top frame's entries are still to be read
  while (!stack.empty()) {
    WalkFrame& f = stack.back();
    if (unread) {
      unread = false;
      if (!read_directory(cur.get(), dev, stack.size() == 1, f, out, budget, seen, children)) {
        out.complete = false;
        break;
      }
    }
    if (!f.pending.empty()) {
      auto [name, child] = std::move(f.pending.back());
      f.pending.pop_back();
      kernel::Fd sub(::openat(cur.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      struct stat st {};
      if (!sub || ::fstat(sub.get(), &st) != 0) {
        ++budget.errors;  // removed or replaced since it was listed
        continue;
      }
      if (st.st_dev != dev) continue;  // mounted over since it was listed
      stack.push_back(WalkFrame{st.st_ino, {}, child});
      cur = std::move(sub);
      unread = true;
      continue;
    }
    stack.pop_back();
    if (stack.empty()) break;
    kernel::Fd up(::openat(cur.get(), "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat ust {};
    if (!up || ::fstat(up.get(), &ust) != 0 || ust.st_dev != dev || ust.st_ino != stack.back().ino) {
      ++budget.errors;  // moved while walked: ".." is no longer where the walk came from
      out.complete = false;
      break;
    }
    cur = std::move(up);
  }
  return 0;
}

// Adds the named parts of one walk to those of the pod (by name: a pod may
// have several log directories).
void add_named(std::vector<NamedStorageUsage>& into, const std::vector<NamedStorageUsage>& parts) {
  for (const auto& p : parts) {
    auto it = std::find_if(into.begin(), into.end(), [&](const NamedStorageUsage& n) { return n.name == p.name; });
    if (it == into.end()) {
      into.push_back(p);
    } else {
      it->bytes += p.bytes;
      it->inodes += p.inodes;
    }
  }
}

// Memory-medium emptyDir volumes are tmpfs mounts below `empty_dir_root`:
// walk_tree() does not cross into them (their pages are memory, not the
// pod's disk usage, as the kubelet counts it), yet their sizeLimit is
// enforced all the same. Each is walked on its own and added to `volumes`
// only, never to the pod's total.
void add_memory_volumes(const std::string& empty_dir_root, WalkBudget& budget,
                        std::set<std::pair<dev_t, ino_t>>& seen, std::vector<NamedStorageUsage>& volumes) {
  kernel::Fd rfd(::open(empty_dir_root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!rfd) return;  // no emptyDir at all (or counted as an error by the walk already)
  struct stat rst {};
  DIR* d = ::fstat(rfd.get(), &rst) == 0 ? ::fdopendir(rfd.get()) : nullptr;
  if (d == nullptr) return;
  (void)rfd.release();  // the DIR owns it now (closedir)
  std::vector<std::string> mounts;
  while (struct dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    struct stat st {};
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (st.st_dev == rst.st_dev) continue;  // on the nodefs: walked with the others
    struct statfs fs {};
    const std::string path = empty_dir_root + "/" + e->d_name;
    if (::statfs(path.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC) mounts.push_back(e->d_name);
  }
  ::closedir(d);
  for (const auto& name : mounts) {
    PodDiskUsage part;
    if (walk_tree(empty_dir_root + "/" + name, part, budget, seen) == 0) {
      volumes.push_back(NamedStorageUsage{name, part.bytes, part.inodes});
    }
  }
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
    const auto deadline = t0 + budget_;
    std::set<std::pair<dev_t, ino_t>> seen;
    std::unordered_map<std::string, PodDiskUsage> result;
    auto usage_for = [&](const std::string& uid) -> PodDiskUsage& {
      auto [it, inserted] = result.try_emplace(uid);
      if (inserted) it->second.measured_at = now;
      return it->second;
    };
    // 1. Every pod's directories first, nothing walked yet, so that each pod
    //    gets a fair share of the budget: one pod's huge tree can neither hide
    //    the others nor push its own writable layer past the budget.
    std::map<std::string, PodRoots> roots;  // by uid: a stable order
    // Logs: <logs>/<namespace>_<name>_<uid>
    for (const auto& n : list_dir(logs_)) {
      auto us = n.rfind('_');
      if (us == std::string::npos || us + 1 >= n.size()) continue;
      roots[n.substr(us + 1)].logs.push_back(logs_ + "/" + n);
    }
    // emptyDir volumes: <nodefs>/pods/<uid>/volumes/kubernetes.io~empty-dir
    for (const auto& uid : list_dir(pods_dir_)) {
      roots[uid].empty_dirs.push_back(pods_dir_ + "/" + uid + "/volumes/kubernetes.io~empty-dir");
    }
    WalkBudget resolving;
    resolving.deadline = deadline;
    WritableLayerStats layers = resolve_writable_layers(resolving, roots, usage_for);

    // 2. Walk pod by pod; each gets the remaining budget (time and entries)
    //    divided by the pods still to walk, so what one leaves unused goes to
    //    the next.
    uint64_t entries_left = max_entries_, entries = 0, errors = resolving.errors;
    std::vector<std::string> truncated;
    std::size_t pods_left = roots.size();
    for (auto& [uid, r] : roots) {
      PodDiskUsage& u = usage_for(uid);
      WalkBudget b;
      auto now_steady = std::chrono::steady_clock::now();
      auto remaining = std::chrono::duration_cast<Duration>(deadline > now_steady ? deadline - now_steady
                                                                                 : std::chrono::steady_clock::duration(0));
      b.deadline = now_steady + remaining / static_cast<int64_t>(pods_left);
      b.entries_left = entries_left / pods_left;
      --pods_left;
      // Logs and emptyDirs split by container and by volume: the kubelet's
      // per-container and per-volume limits need them.
      for (const auto& l : r.logs) {
        PodDiskUsage part;
        std::vector<NamedStorageUsage> containers;
        walk_tree(l, part, b, seen, &containers);
        add_part(u, part, u.breakdown.logs_bytes, u.breakdown.logs_inodes);
        add_named(u.breakdown.container_logs, containers);
      }
      for (const auto& ed : r.empty_dirs) {
        PodDiskUsage part;
        std::vector<NamedStorageUsage> volumes;
        walk_tree(ed, part, b, seen, &volumes);
        add_part(u, part, u.breakdown.empty_dir_bytes, u.breakdown.empty_dir_inodes);
        add_memory_volumes(ed, b, seen, volumes);
        add_named(u.breakdown.empty_dir_volumes, volumes);
      }
      for (const auto& layer : r.layers) walk_layer(uid, layer, u, b, seen, layers);
      if (b.exhausted) u.complete = false;
      if (!u.complete) truncated.push_back(uid);
      entries_left -= std::min(entries_left, b.entries);
      entries += b.entries;
      errors += b.errors;
    }
    auto dt = std::chrono::steady_clock::now() - t0;
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [uid, u] : result) cache_[uid] = u;
    for (auto it = cache_.begin(); it != cache_.end();) {
      if (!result.count(it->first)) it = cache_.erase(it);
      else ++it;
    }
    counters_.truncated_pods = truncated.size();
    if (!truncated.empty()) {
      ++counters_.incomplete_walks;
      std::string some;
      for (std::size_t i = 0; i < truncated.size() && i < 5; ++i) some += (i ? ", " : "") + truncated[i];
      spdlog::warn("ephemeral storage walk cut at its fair share of the budget for {} of {} pods ({}{}); their "
                   "usage is a lower bound ({} entries, {} ms)",
                   truncated.size(), roots.size(), some, truncated.size() > 5 ? ", ..." : "", entries,
                   std::chrono::duration_cast<std::chrono::milliseconds>(dt).count());
    }
    counters_.layer_containers = layers.containers;
    counters_.layers_measured = layers.layers;
    counters_.layers_unmeasured = layers.unresolved_total();
    counters_.entries = entries;
    counters_.errors += errors;
    counters_.last_walk_us = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(dt).count());
    ++counters_.walks;
    layers_ = std::move(layers);
    last_walk_ = std::chrono::duration_cast<Duration>(dt);
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
    const auto v = counters_.values();
    PodStorageStats st;
    st.walks = v.walks;
    st.incomplete_walks = v.incomplete_walks;
    st.truncated_pods = v.truncated_pods;
    st.entries = v.entries;
    st.errors = v.errors;
    st.last_walk_duration = last_walk_;
    st.writable_layers = layers_;
    return st;
  }

  std::vector<ExternalStat> exported_stats() const override { return stat_list(counters_); }

 private:
  struct Layer {
    std::string upper_dir, container_id;
  };
  struct PodRoots {
    std::vector<std::string> logs, empty_dirs;
    std::vector<Layer> layers;
  };

  // Resolves the writable layer of every container below every pod cgroup
  // into `roots` (each upper dir once); nothing is walked here. Failures are
  // counted by reason, logged at warn once per reason, and never stop it.
  template <typename UsageFor>
  WritableLayerStats resolve_writable_layers(WalkBudget& b, std::map<std::string, PodRoots>& roots, UsageFor&& usage_for) {
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
      PodRoots& r = roots[pod.uid];
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
          r.layers.push_back(Layer{layer.upper_dir, c.id});
          continue;
        }
        layer_failed(ls, u, pod.uid, c.id, *layer.failure, layer.detail);
      }
    }
    return ls;
  }

  void walk_layer(const std::string& uid, const Layer& layer, PodDiskUsage& u, WalkBudget& b,
                  std::set<std::pair<dev_t, ino_t>>& seen, WritableLayerStats& ls) {
    PodDiskUsage part;
    int e = walk_tree(layer.upper_dir, part, b, seen);
    if (e == 0) {
      ++ls.layers;
      ++u.breakdown.writable_layers;
      add_part(u, part, u.breakdown.writable_layers_bytes, u.breakdown.writable_layers_inodes);
      u.breakdown.container_layers.push_back(NamedStorageUsage{layer.container_id, part.bytes, part.inodes});
      return;
    }
    LayerFailure f = e == ENOENT || e == ENOTDIR ? LayerFailure::LayerNotFound
                     : e == EACCES || e == EPERM ? LayerFailure::PermissionDenied
                                                 : LayerFailure::ReadError;
    layer_failed(ls, u, uid, layer.container_id, f, layer.upper_dir + ": " + std::strerror(e));
  }

  void layer_failed(WritableLayerStats& ls, PodDiskUsage& u, const std::string& uid, const std::string& container,
                    LayerFailure failure, const std::string& detail) {
    auto f = static_cast<std::size_t>(failure);
    ++ls.unresolved[f];
    ++u.breakdown.unresolved_containers;
    // A container starting or exiting has no process for a moment: expected.
    const bool expected = failure == LayerFailure::NoPid || failure == LayerFailure::PidVanished;
    if (!expected && !warned_failure_[f]) {
      warned_failure_[f] = true;
      spdlog::warn("writable layer of container {} in pod {} not counted ({}): {}", container, uid, name(failure), detail);
    } else {
      spdlog::debug("writable layer of container {} in pod {} not counted ({}): {}", container, uid, name(failure),
                    detail);
    }
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
  // The numbers, lock-free for the scrape; set with the details below under
  // mu_, so that stats() sees one walk's values together.
  PodStorageCounters counters_;
  WritableLayerStats layers_;  // the last walk's, under mu_
  Duration last_walk_{0};      // under mu_
  PeriodicWorker worker_;
};

}  // namespace

std::unique_ptr<PodStorageSource> make_pod_storage_source(const ObserveConfig& config) {
  return std::make_unique<WalkingStorageSource>(config);
}

}  // namespace pressured
