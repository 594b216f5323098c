#pragma once
// A sandbox cgroup tree for host integration tests.
//
// Safety: everything happens below <controller mount>/pressured-test-<pid>-<tag>,
// which this object creates and removes (also when the test fails: the
// destructor kills what runs inside *its own* tree and removes it bottom-up).
// Nothing outside that directory is ever written.

#include <sys/types.h>

#include <cstdint>

#include <string>
#include <vector>

namespace pressured::testing {

class SandboxCgroup {
 public:
  /// Creates <mount>/pressured-test-<pid>-<tag>. `mount` is a controller's
  /// hierarchy root, e.g. /sys/fs/cgroup/memory (v1) or /sys/fs/cgroup (v2).
  /// On failure ok() is false and error() says why.
  SandboxCgroup(std::string mount, std::string tag);
  ~SandboxCgroup();
  SandboxCgroup(const SandboxCgroup&) = delete;
  SandboxCgroup& operator=(const SandboxCgroup&) = delete;

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  /// Absolute path of the sandbox root.
  const std::string& path() const { return root_; }
  /// Absolute path of `rel` below the root ("" is the root).
  std::string path(const std::string& rel) const;

  /// mkdir -p of `rel` below the root. Returns false on error.
  bool make(const std::string& rel);
  /// Writes `value` to <root>/<rel>/<file>. Returns false on error.
  bool write(const std::string& rel, const std::string& file, const std::string& value);
  /// Reads <root>/<rel>/<file>; empty on error.
  std::string read(const std::string& rel, const std::string& file) const;
  /// Forks, moves the child into <rel>, and execs argv (argv[0] is a path).
  /// Returns the pid or -1 (error() says why when the child neither exec'd
  /// nor failed within 60 s). The child is killed by the destructor if alive.
  pid_t spawn(const std::string& rel, const std::vector<std::string>& argv);
  /// Kills every process in the sandbox tree (SIGKILL) and waits for our
  /// children, 30 s each at most (one that does not die is named on stderr).
  void kill_all();

  // ---- cgroup v2 (additive; v1 users are unaffected) ----------------------

  /// True when the sandbox lives on a cgroup v2 (unified) hierarchy.
  bool v2() const { return v2_; }
  /// v2: mkdir -p of `rel` with `controller` enabled on the way down: every
  /// directory from the sandbox root to rel's parent gets "+controller" in its
  /// cgroup.subtree_control, written only where it is not enabled yet. Only
  /// directories inside the sandbox are written; the hierarchy root above the
  /// sandbox must already offer the controller (error() says so otherwise).
  /// v1: same as make(). Returns false on error (error() says why).
  bool make_with(const std::string& rel, const std::string& controller = "memory");
  /// v2: enables `controller` for the children of <rel> unless already enabled.
  /// v1: nothing to do, true.
  bool enable_controller(const std::string& rel, const std::string& controller = "memory");
  /// Hard memory limit on <rel>: v2 memory.max (plus memory.swap.max 0 where
  /// the kernel has it), v1 memory.limit_in_bytes (plus memory.swappiness 0).
  bool set_memory_max(const std::string& rel, uint64_t bytes);
  /// v2 memory.high (throttling and `high` events in memory.events). v1 has no
  /// such file: false.
  bool set_memory_high(const std::string& rel, uint64_t bytes);
  /// Moves process `pid` into <rel> (writes cgroup.procs).
  bool move(const std::string& rel, pid_t pid);
  /// Whether <rel> has the memory controller's interface files.
  bool has_memory(const std::string& rel) const;
  /// Counter `key` of a flat-keyed file such as memory.events ("oom_kill 1");
  /// -1 when the file or key is missing.
  long long read_key(const std::string& rel, const std::string& file, const std::string& key) const;

  /// The cgroup v2 root (/sys/fs/cgroup) when it is a unified hierarchy whose
  /// root offers the memory controller to children (memory in its
  /// cgroup.subtree_control); empty otherwise, with `why` (if given) saying
  /// what is missing. Does not check for root: see PRESSURED_REQUIRE_ROOT.
  static std::string find_v2_memory_mount(std::string* why = nullptr);

  /// True if `mount` looks like a usable memory-controller hierarchy and we are root.
  static bool memory_controller_available(const std::string& mount);
  /// The memory controller's hierarchy on this machine: v1 /sys/fs/cgroup/memory
  /// or the v2 root when it has memory in cgroup.controllers; empty if neither.
  static std::string find_memory_mount();

 private:
  std::string root_;
  std::string error_;
  bool ok_ = false;
  std::vector<pid_t> children_;
  bool v2_ = false;
};

}  // namespace pressured::testing
