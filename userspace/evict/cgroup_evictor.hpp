#pragma once
// The real Evictor: signals every process of a pod's cgroup tree through
// pidfds, freezes the pod on cgroup v1 during the final kill, uses cgroup.kill
// on cgroup v2, and never touches anything outside its pods root, pid 1, the
// daemon itself or a kernel thread. See docs/daemon.md "Eviction mechanics".

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "evict/memory_reaper.hpp"
#include "kernel/fd.hpp"
#include "pressured/evictor.hpp"

namespace pressured {

struct CgroupEvictorOptions {
  /// Absolute path of the pods root in the memory hierarchy (e.g.
  /// /sys/fs/cgroup/memory/kubepods). Targets must be strictly below it.
  std::string pods_root;
  /// The memory hierarchy's mount (e.g. /sys/fs/cgroup/memory); used to find
  /// the pod's relative path in the freezer hierarchy.
  std::string hierarchy_mount;
  /// v1 freezer hierarchy (e.g. /sys/fs/cgroup/freezer); empty: no freezing.
  std::string freezer_mount;
  std::string proc_root = "/proc";
  /// How long kill() waits for the cgroup to become empty before returning.
  Duration empty_wait{std::chrono::milliseconds(2000)};
  /// How long kill() waits for the freezer to report FROZEN.
  Duration freeze_wait{std::chrono::milliseconds(100)};
  /// After the SIGKILL, reap each killed process's address space with
  /// process_mrelease(2) (Linux 5.15+, as Android's lmkd does): its anonymous
  /// memory comes back in the daemon's context, without waiting for the
  /// victim's exit path to run. A kernel without the call (ENOSYS) turns it
  /// off for the evictor's life, reported once in the KillReport.
  bool release_memory = false;
  /// Reap on a thread of the evictor's own (MemoryReaper), which also thaws
  /// a v1 victim once reaped: kill() returns once the signals are sent, and
  /// the reactor can take its next decision meanwhile. KillReport's
  /// memory_released then counts the processes handed to that thread.
  bool release_on_worker = false;
  /// Called on the reaper thread after each victim's reaping: the memory is
  /// back and nothing else wakes the daemon for an uncharge (the daemon posts
  /// an evaluation to its reactor). Must be thread-safe.
  std::function<void()> on_released;
};

/// Pure check: is `pid` a kernel thread, given the text of /proc/<pid>/stat
/// and /proc/<pid>/cmdline? (PF_KTHREAD in the flags field, or an empty
/// cmdline with kthreadd, pid 2, as parent.)
bool is_kernel_thread(const std::string& stat_text, const std::string& cmdline);

/// Lexical + canonical containment: `path` resolves (symlinks followed) to a
/// directory strictly below `root` (also resolved), and contains no `..`.
Result<std::string> contained_path(const std::string& root, const std::string& path);

class CgroupEvictor final : public Evictor {
 public:
  explicit CgroupEvictor(CgroupEvictorOptions options);

  Result<void> validate(const EvictionTarget& target) const override;
  Result<KillReport> terminate(const EvictionTarget& target) override;
  Result<KillReport> kill(const EvictionTarget& target) override;
  Result<bool> is_empty(const EvictionTarget& target) const override;

  /// v1: thaws the freezer cgroups (and their children) of `pod_cgroups`
  /// (memory-hierarchy paths below the pods root: the victims a restarted
  /// daemon finds in its checkpoint) that a crash left FROZEN or FREEZING
  /// between the freeze and the thaw of a kill. Only those: a pod paused by
  /// its runtime stays paused. Returns how many were thawed.
  std::size_t thaw_leftovers(const std::vector<std::string>& pod_cgroups) const;

  /// Every process in the cgroup tree at `path` (recursive, no symlinks).
  static std::vector<pid_t> processes(const std::string& path);

  const CgroupEvictorOptions& options() const { return opts_; }
  /// Address spaces the reaper thread reaped so far (release_on_worker).
  std::size_t reaped_on_worker() const { return reaper_ ? reaper_->reaped() : 0; }

 private:
  struct SignalResult {
    std::size_t signalled = 0, skipped = 0, vanished = 0;
  };
  // Signals every process below `dir` through pidfds after the safety checks.
  // A pinned pid is signalled only if it is still listed below `pod`, the
  // pod's directory in the pods root's hierarchy (`dir` itself when empty): the
  // v1 freezer pass walks another hierarchy, whose lists prove nothing about
  // which processes are the pod's.
  // With `killed`, the pidfds of the processes signalled are moved there.
  SignalResult signal_tree(const std::string& dir, int sig, const std::string& pod = {},
                           std::vector<std::pair<pid_t, kernel::Fd>>* killed = nullptr) const;
  // process_mrelease(2) on each pidfd (once per pid); counts into `rep`.
  void release_memory(std::vector<std::pair<pid_t, kernel::Fd>>& killed, KillReport& rep);
  // Hands the reaping (and the thaw of `freezer`, when not empty) to the
  // reaper thread; false when it has no room: the caller does both.
  bool release_on_worker(KilledProcesses& killed, const std::string& freezer, const std::string& dir, KillReport& rep);
  bool is_safe_pid(pid_t pid) const;
  // The pids in one directory's own cgroup.procs, sorted.
  static std::vector<pid_t> members(const std::string& dir);
  std::string relative(const std::string& canonical) const;

  CgroupEvictorOptions opts_;
  pid_t self_;
  bool mrelease_supported_ = true;  // until the kernel answers ENOSYS
  std::unique_ptr<MemoryReaper> reaper_;  // release_on_worker only
};

}  // namespace pressured
