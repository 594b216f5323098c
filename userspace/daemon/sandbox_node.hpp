#pragma once
// A sandbox "node" for the demo: <memory mount>/<name>/kubepods with the QoS
// tiers below it, a memory limit on kubepods, and pods running bounded
// workloads. Everything lives below the sandbox directory this object created
// (plus its mirror in the v1 freezer hierarchy) and is removed by the
// destructor, also on failure. Nothing else is ever written.

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pressured/result.hpp"
#include "pressured/signals.hpp"

namespace pressured {

struct SandboxPod {
  std::string uid;
  std::string name;
  QosClass qos = QosClass::BestEffort;
  std::string rel;  // below the sandbox root, e.g. kubepods/besteffort/pod<uid>
  pid_t pid = -1;
};

class SandboxNode {
 public:
  /// Finds the memory controller (v1 /sys/fs/cgroup/memory, or the v2 root
  /// with memory enabled) and creates <mount>/<name>/kubepods{,/burstable,/besteffort}.
  static Result<std::unique_ptr<SandboxNode>> create(const std::string& name, uint64_t limit_bytes);
  ~SandboxNode();
  SandboxNode(const SandboxNode&) = delete;
  SandboxNode& operator=(const SandboxNode&) = delete;

  const std::string& memory_mount() const { return mount_; }
  bool v2() const { return v2_; }
  /// The kubelet --cgroup-root for the daemon: "/<name>".
  std::string cgroup_root() const { return "/" + name_; }
  /// Absolute path of `rel` below the sandbox root (memory hierarchy).
  std::string path(const std::string& rel) const { return root_ + "/" + rel; }
  std::string kubepods() const { return path("kubepods"); }

  /// Creates the pod cgroup (and its freezer mirror on v1) and starts argv in it.
  Result<SandboxPod> start_pod(const std::string& uid, const std::string& name, QosClass qos,
                               const std::vector<std::string>& argv);
  /// Processes left in a pod cgroup (0 when gone).
  std::size_t processes(const SandboxPod& pod) const;
  /// Current usage of a cgroup below the root (memory.usage_in_bytes / memory.current).
  uint64_t usage(const std::string& rel) const;
  /// Kernel OOM kills of tasks below kubepods (v2 memory.events of kubepods; v1
  /// memory.oom_control summed over its tree, as v1 counts a kill in the victim's memcg).
  uint64_t oom_kills() const;
  /// Reaps exited children (non-blocking).
  void reap();
  /// Kills every process of the sandbox and removes every directory.
  void destroy();

 private:
  SandboxNode() = default;
  std::string name_, mount_, root_, freezer_root_;
  bool v2_ = false;
  std::vector<pid_t> children_;
};

}  // namespace pressured
