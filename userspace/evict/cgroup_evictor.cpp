#include "evict/cgroup_evictor.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

#include "kernel/fd.hpp"
#include "kernel/file.hpp"
#include "kernel/parse.hpp"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

namespace pressured {

namespace {

constexpr unsigned long kPfKthread = 0x00200000;  // include/linux/sched.h

// At most `limit` bytes of a file; empty when it cannot be read (a task or
// cgroup that went away reads as empty: nothing to signal).
std::string read_small(const std::string& path, std::size_t limit = 64 * 1024) {
  auto r = kernel::read_file(path, limit);
  return r ? std::move(*r) : std::string();
}

bool write_small(const std::string& path, const std::string& value) { return kernel::write_file(path, value).ok(); }

bool is_dir(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

void collect_dirs(const std::string& dir, std::vector<std::string>& out, int depth) {
  out.push_back(dir);
  if (depth > 16) return;  // pod trees are shallow; bound the walk
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = ::readdir(d)) {
    if (e->d_type != DT_DIR) continue;  // cgroupfs fills d_type; never follow symlinks
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    collect_dirs(dir + "/" + name, out, depth + 1);
  }
  ::closedir(d);
}

int pidfd_open(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }
int pidfd_send_signal(int pidfd, int sig) { return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0)); }

}  // namespace

bool is_kernel_thread(const std::string& stat_text, const std::string& cmdline) {
  auto st = kernel::parse_proc_stat(stat_text);
  if (!st) return false;
  if (st->flags & kPfKthread) return true;
  return cmdline.empty() && st->ppid == 2;
}

Result<std::string> contained_path(const std::string& root, const std::string& path) {
  if (path.empty() || path[0] != '/') return Error{EINVAL, "target '" + path + "' is not an absolute path"};
  std::istringstream parts(path);
  std::string part;
  while (std::getline(parts, part, '/')) {
    if (part == "..") return Error{EPERM, "target '" + path + "' contains '..'"};
  }
  char buf[PATH_MAX];
  if (::realpath(root.c_str(), buf) == nullptr) return Error::from_errno(errno, "pods root " + root);
  std::string croot = buf;
  if (::realpath(path.c_str(), buf) == nullptr) return Error::from_errno(errno, "target " + path);
  std::string cpath = buf;
  if (cpath.size() <= croot.size() + 1 || cpath.compare(0, croot.size(), croot) != 0 || cpath[croot.size()] != '/') {
    return Error{EPERM, "target '" + path + "' resolves to '" + cpath + "', outside the pods root '" + croot + "'"};
  }
  return cpath;
}

CgroupEvictor::CgroupEvictor(CgroupEvictorOptions options) : opts_(std::move(options)), self_(::getpid()) {}

Result<void> CgroupEvictor::validate(const EvictionTarget& target) const {
  if (opts_.pods_root.empty()) return Error{EINVAL, "no pods root configured: refusing every eviction"};
  auto c = contained_path(opts_.pods_root, target.cgroup_path);
  if (!c) return c.error();
  return {};
}

std::vector<pid_t> CgroupEvictor::processes(const std::string& path) {
  std::vector<std::string> dirs;
  collect_dirs(path, dirs, 0);
  std::vector<pid_t> out;
  for (const auto& d : dirs) {
    std::istringstream in(read_small(d + "/cgroup.procs", 4 * 1024 * 1024));
    long p;
    while (in >> p) out.push_back(static_cast<pid_t>(p));
  }
  return out;
}

bool CgroupEvictor::is_safe_pid(pid_t pid) const {
  if (pid <= 2 || pid == self_) return false;
  std::string base = opts_.proc_root + "/" + std::to_string(pid);
  std::string stat = read_small(base + "/stat");
  if (stat.empty()) return false;  // gone or unreadable: do not guess
  return !is_kernel_thread(stat, read_small(base + "/cmdline", 16));
}

std::size_t CgroupEvictor::thaw_leftovers(const std::vector<std::string>& pod_cgroups) const {
  if (opts_.freezer_mount.empty()) return 0;
  std::size_t thawed = 0;
  for (const auto& path : pod_cgroups) {
    auto dir = contained_path(opts_.pods_root, path);  // never outside the pods root
    if (!dir) continue;
    const std::string rel = relative(*dir);
    if (rel.empty() || rel == "/") continue;
    auto root = contained_path(opts_.freezer_mount, opts_.freezer_mount + rel);
    if (!root) continue;
    std::vector<std::string> dirs{*root};
    std::error_code ec;
    for (std::filesystem::recursive_directory_iterator it(*root, ec), end; !ec && it != end; it.increment(ec)) {
      if (!it->is_symlink(ec) && it->is_directory(ec)) dirs.push_back(it->path().string());
    }
    for (const auto& d : dirs) {
      const std::string state = d + "/freezer.state";
      const std::string now = read_small(state, 64);
      if ((now.rfind("FROZEN", 0) == 0 || now.rfind("FREEZING", 0) == 0) && write_small(state, "THAWED")) ++thawed;
    }
  }
  return thawed;
}

std::string CgroupEvictor::relative(const std::string& canonical) const {
  char buf[PATH_MAX];
  std::string mount = opts_.hierarchy_mount;
  if (!mount.empty() && ::realpath(mount.c_str(), buf) != nullptr) mount = buf;
  if (!mount.empty() && canonical.compare(0, mount.size(), mount) == 0) {
    std::string rel = canonical.substr(mount.size());
    return rel.empty() ? "/" : rel;
  }
  return {};
}

std::vector<pid_t> CgroupEvictor::members(const std::string& dir) {
  std::vector<pid_t> out;
  std::istringstream in(read_small(dir + "/cgroup.procs", 4 * 1024 * 1024));
  long p;
  while (in >> p) out.push_back(static_cast<pid_t>(p));
  std::sort(out.begin(), out.end());
  return out;
}

CgroupEvictor::SignalResult CgroupEvictor::signal_tree(const std::string& dir, int sig, const std::string& pod,
                                                       std::vector<std::pair<pid_t, kernel::Fd>>* killed) const {
  // Membership is checked against the cgroup itself, never against the text
  // of /proc/<pid>/cgroup: that text is relative to the reader's cgroup
  // namespace (a containerised daemon reads "/../../kubepods/...") and says
  // nothing about which hierarchy a pod directory belongs to. Each pid is
  // first pinned with a pidfd, then the directory's cgroup.procs is read
  // again: a pinned, living process keeps its pid number, so finding the
  // number there means *that* process is in the pod now, in any namespace and
  // on every pass (memory, freezer, re-kill). A recycled number can only
  // belong to a new process after ours exited, and the pidfd then signals
  // nobody (ESRCH).
  SignalResult r;
  std::vector<std::string> dirs;
  collect_dirs(dir, dirs, 0);
  for (const auto& d : dirs) {
    std::vector<std::pair<pid_t, kernel::Fd>> pinned;
    for (pid_t pid : members(d)) {
      if (pid <= 2 || pid == self_) {
        ++r.skipped;
        spdlog::warn("evict: refusing to signal pid {} in {} (pid 1/2 or the daemon itself)", pid, d);
        continue;
      }
      kernel::Fd fd(pidfd_open(pid));
      if (!fd) {
        ++r.vanished;  // exited between listing and opening
        continue;
      }
      if (!is_safe_pid(pid)) {
        if (::access((opts_.proc_root + "/" + std::to_string(pid)).c_str(), F_OK) == 0) {
          ++r.skipped;
          spdlog::warn("evict: refusing to signal pid {} in {} (a kernel thread)", pid, d);
        } else {
          ++r.vanished;
        }
        continue;
      }
      pinned.emplace_back(pid, std::move(fd));
    }
    if (pinned.empty()) continue;
    std::vector<pid_t> now;
    if (pod.empty()) {
      now = members(d);
    } else {
      // Another hierarchy's directory: membership is the pod's whole subtree
      // in the pods root's hierarchy, read after pinning.
      std::vector<std::string> pod_dirs;
      collect_dirs(pod, pod_dirs, 0);
      for (const auto& pd : pod_dirs) {
        auto m = members(pd);
        now.insert(now.end(), m.begin(), m.end());
      }
      std::sort(now.begin(), now.end());
    }
    for (auto& [pid, fd] : pinned) {
      if (!std::binary_search(now.begin(), now.end(), pid)) {
        ++r.vanished;  // moved away or exited: not ours to signal
      } else if (pidfd_send_signal(fd.get(), sig) == 0) {
        ++r.signalled;
        if (killed != nullptr) killed->emplace_back(pid, std::move(fd));
      } else if (errno == ESRCH) {
        ++r.vanished;
      } else {
        spdlog::warn("evict: pidfd_send_signal({}, {}) failed: {}", pid, sig, std::strerror(errno));
      }
    }
  }
  return r;
}

Result<KillReport> CgroupEvictor::terminate(const EvictionTarget& target) {
  auto c = contained_path(opts_.pods_root, target.cgroup_path);
  KillReport rep;
  if (!c) {
    if (c.error().code == ENOENT && !target.cgroup_path.empty()) {
      rep.cgroup_vanished = rep.empty = true;
      return rep;
    }
    return c.error();
  }
  auto r = signal_tree(*c, SIGTERM);
  rep.signalled = r.signalled;
  rep.skipped_unsafe = r.skipped;
  rep.vanished = r.vanished;
  return rep;
}

Result<KillReport> CgroupEvictor::kill(const EvictionTarget& target) {
  KillReport rep;
  auto c = contained_path(opts_.pods_root, target.cgroup_path);
  if (!c) {
    if (c.error().code == ENOENT && !target.cgroup_path.empty()) {
      rep.cgroup_vanished = rep.empty = true;
      return rep;
    }
    return c.error();
  }
  const std::string& dir = *c;

  // v1: freeze the pod in the freezer hierarchy so nothing forks mid-kill.
  std::string freezer;
  if (!opts_.freezer_mount.empty()) {
    std::string rel = relative(dir);
    if (!rel.empty() && rel != "/") {
      std::string candidate = opts_.freezer_mount + rel;
      auto fc = contained_path(opts_.freezer_mount, candidate);
      if (fc && is_dir(*fc) && ::access((*fc + "/freezer.state").c_str(), W_OK) == 0) freezer = *fc;
    }
  }
  if (!freezer.empty() && write_small(freezer + "/freezer.state", "FROZEN")) {
    rep.froze = true;
    auto deadline = std::chrono::steady_clock::now() + opts_.freeze_wait;
    while (std::chrono::steady_clock::now() < deadline) {
      if (read_small(freezer + "/freezer.state").rfind("FROZEN", 0) == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

  // v2: cgroup.kill kills the whole subtree atomically (kernel >= 5.14).
  if (::access((dir + "/cgroup.kill").c_str(), W_OK) == 0 && write_small(dir + "/cgroup.kill", "1")) {
    rep.used_cgroup_kill = true;
  }
  if (reaper_ && mrelease_supported_ && reaper_->unsupported()) {
    mrelease_supported_ = false;  // the reaper thread met ENOSYS: reported once, here
    rep.release_unsupported = true;
  }
  std::vector<std::pair<pid_t, kernel::Fd>> killed;
  std::vector<std::pair<pid_t, kernel::Fd>>* keep = opts_.release_memory && mrelease_supported_ ? &killed : nullptr;
  auto r = signal_tree(dir, SIGKILL, {}, keep);
  rep.signalled = r.signalled;
  rep.skipped_unsafe = r.skipped;
  rep.vanished = r.vanished;
  if (!freezer.empty()) {
    // The freezer pass catches the pod's processes the first pass missed (a
    // fork racing it), and only those: a pid the freezer lists is killed only
    // if the pod's cgroup in the pods root's hierarchy lists it too.
    auto fr = signal_tree(freezer, SIGKILL, dir, keep);
    rep.signalled += fr.signalled;
    rep.skipped_unsafe += fr.skipped;
  }
  // Reaped while still frozen: a thawed victim starts its own exit at once
  // and its exit path then races the reaper (ESRCH once it dropped its mm).
  // On the reaper thread, which thaws after it, when there is one.
  if (killed.empty() || !release_on_worker(killed, rep.froze ? freezer : std::string(), dir, rep)) {
    release_memory(killed, rep);
    if (rep.froze) write_small(freezer + "/freezer.state", "THAWED");  // SIGKILLed tasks exit once thawed
  }

  // Confirm empty, bounded; re-kill stragglers (a fork racing the first pass
  // when there is no freezer).
  auto deadline = std::chrono::steady_clock::now() + opts_.empty_wait;
  int round = 0;
  while (true) {
    auto e = is_empty(target);
    if (e && *e) {
      rep.empty = true;
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    if (++round % 10 == 0) {
      auto again = signal_tree(dir, SIGKILL);
      rep.signalled += again.signalled;
      rep.skipped_unsafe = std::max(rep.skipped_unsafe, again.skipped);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!is_dir(dir)) rep.cgroup_vanished = true;
  return rep;
}

void CgroupEvictor::release_memory(std::vector<std::pair<pid_t, kernel::Fd>>& killed, KillReport& rep) {
  // Every victim has its SIGKILL by now (a group exit is under way), which is
  // what the kernel asks before it reaps an address space from outside.
  ReapResult r = reap_memory(killed);
  rep.memory_released += r.released;
  if (r.unsupported) {
    mrelease_supported_ = false;
    rep.release_unsupported = true;
  }
}

bool CgroupEvictor::release_on_worker(KilledProcesses& killed, const std::string& freezer, const std::string& dir,
                                      KillReport& rep) {
  if (!opts_.release_on_worker) return false;
  if (!reaper_) reaper_ = std::make_unique<MemoryReaper>(64, opts_.on_released);
  unique_by_pid(killed);
  const std::size_t n = killed.size();
  MemoryReaper::Job job{std::move(killed), freezer, dir};
  if (!reaper_->submit(job)) {
    killed = std::move(job.killed);
    spdlog::warn("evict: the reaper thread has too many victims queued; reaping {} here", dir);
    return false;
  }
  rep.memory_released += n;
  return true;
}

Result<bool> CgroupEvictor::is_empty(const EvictionTarget& target) const {
  auto c = contained_path(opts_.pods_root, target.cgroup_path);
  if (!c) {
    if (c.error().code == ENOENT) return true;  // the cgroup is gone: so is the pod
    return c.error();
  }
  // v2: "populated 0" in cgroup.events covers the whole subtree.
  std::string events = read_small(*c + "/cgroup.events");
  if (!events.empty()) {
    auto p = events.find("populated ");
    if (p != std::string::npos) return events[p + 10] == '0';
  }
  // v1: exited tasks leave cgroup.procs in do_exit, before they are reaped.
  return processes(*c).empty();
}

}  // namespace pressured
