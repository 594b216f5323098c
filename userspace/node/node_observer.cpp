// NodeObserver over the kernel's files (docs/observation.md): four parts,
// one job each, composed here: the node's signals (node_signals.hpp), which
// pods exist and what the metadata source says of them (pod_set.hpp),
// each pod's usage (pod_usage.hpp), and the kernel's OOM kill counters of the
// kubepods tree (oom_kills.hpp).
#include <cerrno>

#include "cgroup/layout.hpp"
#include "node/node_signals.hpp"
#include "node/oom_kills.hpp"
#include "node/pod_set.hpp"
#include "node/pod_usage.hpp"
#include "pressured/observer.hpp"

namespace pressured {
namespace {

class KernelNodeObserver final : public NodeObserver {
 public:
  KernelNodeObserver(const ObserveConfig& config, CgroupLayout layout, std::shared_ptr<PodMetadataSource> metadata,
                     std::shared_ptr<PodStorageSource> storage)
      : layout_(std::move(layout)),
        signals_(config, layout_, counters_),
        pod_set_(layout_, std::move(metadata), counters_),
        usage_(layout_, std::move(storage), counters_),
        oom_kills_(layout_.kubepods_memory_path, layout_.memory_on_v2, config.proc_root) {}

  const CgroupLayout& layout() const override { return layout_; }

  Result<NodeSnapshot> observe(TimePoint now) override {
    ++counters_.observations;
    NodeSnapshot snap;
    snap.taken_at = now;
    snap.containerfs_layout = signals_.containerfs_layout();
    if (auto r = signals_.observe(now, snap); !r) return r.error();
    const auto dirs = pod_set_.list([this] { return usage_.tracked(); });
    usage_.read_listed(dirs, now, snap.pods);
    pod_set_.merge_metadata(now, snap.pods);
    if (growth_pods_ > 0) usage_.read_likely_victims_containers(snap.pods, growth_pods_);
    snap.oom_kills = oom_kills_.read();
    return snap;
  }

  Result<SignalObservation> refresh_signal(Signal signal, TimePoint now) override {
    return signals_.refresh(signal, now);
  }

  Result<void> refresh_pod(Pod& pod, TimePoint now) override { return usage_.refresh_pod(pod, now); }

  std::vector<ContainerMemory> container_memory(const Pod& pod) override { return usage_.container_memory(pod); }
  void track_container_growth(std::size_t pods) override { growth_pods_ = pods; }

  Result<void> refresh_memory_usage(const std::vector<Pod*>& pods, TimePoint now) override {
    (void)now;
    if (pod_set_.changed_since_listing()) {
      return Error{ESTALE, "the pod cgroup set changed since the last full observation"};
    }
    return usage_.refresh_memory_usage(pods);
  }

  void set_page_counter_reader(std::shared_ptr<PageCounterReader> reader) override {
    usage_.set_page_counter_reader(std::move(reader));
  }

  std::vector<PodCgroup> list_pods() override { return pod_set_.describe(); }
  MemcgCounters read_memcg_counters() override { return signals_.read_memcg_counters(); }
  std::vector<MemcgScope> memcg_scopes() override { return signals_.memcg_scopes(); }
  const ObserverCounters& counters() const override { return counters_; }

 private:
  ObserverCounters counters_;  // first: the parts count into it
  CgroupLayout layout_;
  node::NodeSignals signals_;
  node::PodSet pod_set_;
  node::PodUsageReader usage_;
  node::OomKillCounters oom_kills_;
  std::size_t growth_pods_ = 0;
};

}  // namespace

Result<std::unique_ptr<NodeObserver>> make_node_observer(const ObserveConfig& config, CgroupLayout layout,
                                                         std::shared_ptr<PodMetadataSource> metadata,
                                                         std::shared_ptr<PodStorageSource> storage) {
  std::unique_ptr<NodeObserver> o =
      std::make_unique<KernelNodeObserver>(config, std::move(layout), std::move(metadata), std::move(storage));
  return o;
}

Result<std::unique_ptr<NodeObserver>> make_node_observer(const ObserveConfig& config,
                                                         std::shared_ptr<PodMetadataSource> metadata,
                                                         std::shared_ptr<PodStorageSource> storage) {
  auto layout = detect_layout(config);
  if (!layout) return layout.error();
  return make_node_observer(config, std::move(*layout), std::move(metadata), std::move(storage));
}

}  // namespace pressured
