#pragma once
// Each pod's usage (docs/observation.md, "Per pod"): memory usage, working
// set, limit, v2 events, pod PSI and pids from the pod cgroup's files, kept
// open per pod; the page counters alone, from the files or in one batch (the
// BPF cgroup iterator), for decisions between full observations; the last
// good usage of a pod whose files fail (stale); the storage walker's cached
// disk usage. One part of the kernel NodeObserver; which pods exist is the
// pod set's (pod_set.hpp).

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cgroup/discovery.hpp"
#include "kernel/hot_file.hpp"
#include "pressured/observer.hpp"

namespace pressured::node {

class PodUsageReader {
 public:
  /// `storage` may be null (no ephemeral storage); `counters` (stale and
  /// vanished pods, reopened cgroups, page-counter batches) must outlive it.
  PodUsageReader(CgroupLayout layout, std::shared_ptr<PodStorageSource> storage, ObserverCounters& counters);

  /// A full observation's pods: reads each of `dirs` (the pod set's listing)
  /// in full into `out`, in order. A pod whose cgroup went away between the
  /// listing and the read is left out (vanished_pods); one whose files fail
  /// while its cgroup exists is kept with its last usage, stale
  /// (stale_pod_reads, logged once). A cgroup recreated under the same path
  /// is reopened (reopened_cgroups). The files of pods not listed are closed.
  void read_listed(const std::vector<cgroup::PodDir>& dirs, TimePoint now, std::vector<Pod>& out);

  /// NodeObserver::refresh_pod: one pod read in full, in place.
  Result<void> refresh_pod(Pod& pod, TimePoint now);

  /// NodeObserver::refresh_memory_usage without the pod-set check (the
  /// caller's): each pod's page counter, batched when a reader is set.
  Result<void> refresh_memory_usage(const std::vector<Pod*>& pods);

  /// NodeObserver::set_page_counter_reader.
  void set_page_counter_reader(std::shared_ptr<PageCounterReader> reader);

  /// The pod cgroups whose files are kept (the last listing), each with the
  /// cgroup id its files read now.
  std::vector<cgroup::PodDir> tracked() const;

  /// Each container cgroup's working set below the pod's (NodeObserver::container_memory),
  /// with its usage, its memory.pressure (v2) and, for a container read
  /// before (an earlier call for the pod), its working set then and how long ago.
  std::vector<ContainerMemory> container_memory(const Pod& pod);

  /// container_memory() of the `n` pods of `pods` furthest over their memory
  /// request (working set - request; stale pods and pods without stats left
  /// out), for the readings only: what those containers grew by is then known
  /// at their eviction (NodeObserver::track_container_growth).
  void read_likely_victims_containers(const std::vector<Pod>& pods, std::size_t n);

 private:
  struct PodState {
    PodCgroup cg;
    kernel::HotFile usage, stat, limit, events, pressure, pids;
    std::optional<uint64_t> limit_cache;
    bool limit_read = false;
    bool pids_file_missing = false;
    PodUsage last_usage;
    bool ever_read = false;  // one read succeeded: the pod has stats
    uint64_t last_pids = 0;
    uint64_t seen_gen = 0;
    // The last container_memory reading of each container, by id (the containers of that reading only).
    struct ContainerReading {
      uint64_t working_set = 0;
      std::chrono::steady_clock::time_point at;
    };
    std::unordered_map<std::string, ContainerReading> containers;
    void open_paths(const CgroupLayout& l);
  };
  using States = std::unordered_map<std::string, PodState>;  // by memory path

  States::iterator add_state(const cgroup::PodDir& d);
  void recreate(PodState& st, uint64_t ino);
  // Reads one pod's usage into `pod` (usage, limit, events, pressure, pids);
  // its usage and limit from `batched` where given (a walk of this
  // observation), from its files otherwise.
  Result<void> read_pod(PodState& st, Pod& pod, bool full, const PageCounterSample* batched = nullptr);
  void merge_storage(Pod& pod) const;
  std::string batch_root(const std::vector<Pod*>& pods) const;
  Result<void> usage_from_batch(const std::vector<Pod*>& pods);
  /// One walk of `root` into page_samples_, sorted by cgroup id; false (the
  /// reader dropped, said once in the log) where the kernel refuses it.
  bool walk_page_counters(const std::string& root, uint32_t depth);
  /// The sample of cgroup `id` in page_samples_, or null.
  const PageCounterSample* batched_sample(uint64_t id) const;

  CgroupLayout layout_;
  std::shared_ptr<PodStorageSource> storage_;
  ObserverCounters& counters_;
  bool v2_ = false;
  std::string buf_;
  States pods_;
  uint64_t gen_ = 0;
  std::shared_ptr<PageCounterReader> page_reader_;  // null: one usage file per pod
  std::vector<PageCounterSample> page_samples_;      // the last batch (kept: no allocation per decision)
  bool warned_pod_read_ = false;
};

}  // namespace pressured::node
