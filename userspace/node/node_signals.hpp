#pragma once
// The node's eviction signals (docs/observation.md, "Signals"): memory and
// allocatable memory by the kubelet's formulas, the filesystems, PIDs and
// PSI, with the sysctls and capacities they need, the last good value of
// each when a read fails (stale), and the page counters the kernel alarms
// are planned from. One part of the kernel NodeObserver; the pod set and
// the pods' usage are the others (pod_set.hpp, pod_usage.hpp).

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <map>
#include <vector>

#include "kernel/hot_file.hpp"
#include "kernel/parse.hpp"
#include "node/containerfs_layout.hpp"
#include "pressured/observer.hpp"

namespace pressured::node {

class NodeSignals {
 public:
  /// Reads through `layout` and `config` (proc root, filesystem paths, the
  /// memory.available mode); detects the containerfs layout once, as the
  /// kubelet does (a runtime moved to other disks restarts anyway).
  /// `counters` (stale_signal_reads) must outlive it.
  NodeSignals(ObserveConfig config, CgroupLayout layout, ObserverCounters& counters);

  /// Every signal into `snap` (signals, PSI details): a group whose read
  /// fails gives its last good values marked stale (absent if never read),
  /// counted and logged once. Re-reads MemTotal and the sysctls first.
  /// Error only when memory.available cannot be read at all.
  Result<void> observe(TimePoint now, NodeSnapshot& snap);

  /// One signal, read fresh (the capacities as of the last observe()).
  /// Error when it is not observed on this node (ENOTSUP) or the read failed.
  Result<SignalObservation> refresh(Signal signal, TimePoint now);

  /// kubepods' and the node scope's page counters, read now.
  MemcgCounters read_memcg_counters();
  /// kubepods and its QoS tiers that exist, with their cgroup ids.
  std::vector<MemcgScope> memcg_scopes() const;

  ContainerfsLayout containerfs_layout() const { return containerfs_.layout; }

 private:
  enum class Group : uint8_t { Memory, Allocatable, Nodefs, Imagefs, Pid, PsiMemory, PsiIo, Containerfs, Count };
  static Group group_of(Signal s);

  void refresh_static();
  void set(SignalSet& out, Signal s, double value, double capacity, TimePoint now);
  const char* usage_file() const { return v2_ ? "/memory.current" : "/memory.usage_in_bytes"; }
  std::optional<uint64_t> read_children_usage();
  // Ok(true): observed; Ok(false): not observed on this node; Error: read failed.
  Result<bool> read_group(Group g, TimePoint now, SignalSet& out);
  Result<bool> fail_memory(const Error& e);

  ObserveConfig cfg_;
  CgroupLayout layout_;
  ObserverCounters& counters_;
  ContainerfsDetection containerfs_;
  bool v2_ = false;

  kernel::HotFile meminfo_, root_usage_, root_stat_, kp_usage_, kp_stat_, kp_limit_, psi_memory_, psi_io_, psi_cpu_,
      loadavg_;
  kernel::HotFile min_free_kbytes_, pid_max_file_, threads_max_file_;
  std::string scope_path_;  // kubepods' parent
  bool scope_is_root_ = false;
  kernel::HotFile scope_usage_;                          // its usage file, when it is not the hierarchy root
  std::map<std::string, kernel::HotFile> root_children_;  // at a root: each child's usage file, by name
  std::string buf_;
  std::optional<kernel::MemInfo> meminfo_cache_;
  uint64_t min_free_bytes_ = 0, pid_max_ = 0, threads_max_ = 0, kp_limit_value_ = 0;
  bool kp_limit_read_ = false;
  bool static_loaded_ = false;
  std::optional<PsiStats> psi_memory_detail_, psi_io_detail_;
  std::string memory_error_;
  std::array<std::optional<SignalObservation>, kSignalCount> last_good_{};
  std::array<bool, static_cast<std::size_t>(Group::Count)> warned_groups_{};
};

}  // namespace pressured::node
