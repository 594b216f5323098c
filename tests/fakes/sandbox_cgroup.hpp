#pragma once
// A sandbox cgroup tree for host integration tests.
//
// Safety: everything happens below <controller mount>/pressured-test-<pid>-<tag>,
// which this object creates and removes (also when the test fails: the
// destructor kills what runs inside *its own* tree and removes it bottom-up).
// Nothing outside that directory is ever written.

#include <sys/types.h>

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
  /// Returns the pid or -1. The child is killed by the destructor if alive.
  pid_t spawn(const std::string& rel, const std::vector<std::string>& argv);
  /// Kills every process in the sandbox tree (SIGKILL) and waits for our children.
  void kill_all();

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
};

}  // namespace pressured::testing
