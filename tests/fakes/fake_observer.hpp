#pragma once
// Hand-written NodeObservers for the daemon's tests: snapshots
// built from fields the test sets, no cgroup tree behind them. Two, because
// they answer different questions (a fake tree the real observer reads is
// fake_node.hpp):
//  - FakeObserver: memory and PID signals from the pods' working sets, memcg
//    counters and scopes, a failure switch: the decision loop's tests.
//  - DiskObserver: nodefs/containerfs signals and pods with writable layers:
//    the daemon with a detected containerfs layout.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pressured/observer.hpp"

namespace pressured::testing {

class FakeObserver final : public NodeObserver {
 public:
  FakeObserver() { layout_.kubepods_memory_path = "/fake/kubepods"; }
  const CgroupLayout& layout() const override { return layout_; }
  Result<NodeSnapshot> observe(TimePoint now) override {
    if (fail) return Error{EIO, "fake failure"};
    NodeSnapshot s;
    s.taken_at = now;
    uint64_t used = 0;
    for (const auto& p : pods) used += p.usage.memory_working_set_bytes;
    SignalObservation o;
    o.capacity = static_cast<double>(capacity);
    o.value = static_cast<double>(capacity > used ? capacity - used : 0);
    o.observed_at = now;
    s.signal(Signal::AllocatableMemoryAvailable) = o;
    if (node_available) {
      SignalObservation n = *node_available;
      n.observed_at = now;
      s.signal(Signal::MemoryAvailable) = n;
    }
    if (pid_available) s.signal(Signal::PidAvailable) = *pid_available;
    s.pods = pods;
    s.oom_kills = oom_kills;
    return s;
  }
  Result<SignalObservation> refresh_signal(Signal, TimePoint) override { return Error{ENOTSUP, "fake"}; }
  Result<void> refresh_pod(Pod&, TimePoint) override { return {}; }
  MemcgCounters read_memcg_counters() override { return memcg; }
  std::vector<MemcgScope> memcg_scopes() override { return scopes; }
  std::vector<PodCgroup> list_pods() override { return {}; }
  const ObserverCounters& counters() const override { static const ObserverCounters none; return none; }

  Pod& add(const std::string& uid, QosClass qos, uint64_t ws, uint64_t request = 0) {
    Pod p;
    p.uid = uid;
    p.name = uid;
    p.namespace_ = "ns";
    p.qos = qos;
    p.metadata_known = true;
    p.usage.memory_working_set_bytes = ws;
    p.requests.memory_bytes = request;
    p.termination_grace_period_seconds = 5;
    p.cgroup_path = "/fake/kubepods/pod" + uid;
    pods.push_back(p);
    return pods.back();
  }
  Pod* find(const std::string& uid) {
    for (auto& p : pods) {
      if (p.uid == uid) return &p;
    }
    return nullptr;
  }

  CgroupLayout layout_;
  std::vector<Pod> pods;
  uint64_t capacity = uint64_t{1024} << 20;  // 1 GiB
  bool fail = false;
  std::optional<SignalObservation> node_available;  // memory.available, when set
  std::optional<SignalObservation> pid_available;   // pid.available, when set
  MemcgCounters memcg;                              // what read_memcg_counters() reads
  std::vector<MemcgScope> scopes;                   // what memcg_scopes() lists
  std::optional<std::vector<MemcgOomKills>> oom_kills;  // the kernel's OOM kill counters a full observation reads
};

class DiskObserver final : public NodeObserver {
 public:
  static constexpr double kGiB = 1024.0 * 1024 * 1024;
  DiskObserver() { layout_.kubepods_memory_path = "/fake/kubepods"; }
  const CgroupLayout& layout() const override { return layout_; }
  Result<NodeSnapshot> observe(TimePoint now) override {
    NodeSnapshot s;
    s.taken_at = now;
    s.containerfs_layout = ContainerfsLayout::Separate;
    s.signal(Signal::NodefsAvailable) = SignalObservation{50 * kGiB, 100 * kGiB, now, false};
    s.signal(Signal::ContainerfsAvailable) = SignalObservation{containerfs_available, 100 * kGiB, now, false};
    for (const auto& p : pods) {
      if (std::find(gone.begin(), gone.end(), p.uid) == gone.end()) s.pods.push_back(p);
    }
    return s;
  }
  Result<SignalObservation> refresh_signal(Signal, TimePoint) override { return Error{ENOTSUP, "fake"}; }
  Result<void> refresh_pod(Pod&, TimePoint) override { return {}; }
  MemcgCounters read_memcg_counters() override { return {}; }
  std::vector<MemcgScope> memcg_scopes() override { return {}; }
  std::vector<PodCgroup> list_pods() override { return {}; }
  const ObserverCounters& counters() const override { static const ObserverCounters none; return none; }

  void add(const std::string& uid, double total, double layers) {
    Pod p;
    p.uid = p.name = uid;
    p.namespace_ = "ns";
    p.qos = QosClass::Burstable;
    p.metadata_known = true;
    p.usage.ephemeral_storage_bytes = static_cast<uint64_t>(total);
    EphemeralStorageBreakdown b;
    b.writable_layers_measured = true;
    b.writable_layers_bytes = static_cast<uint64_t>(layers);
    p.ephemeral_storage = b;
    p.cgroup_path = "/fake/kubepods/pod" + uid;
    pods.push_back(p);
  }

  CgroupLayout layout_;
  std::vector<Pod> pods;
  std::vector<std::string> gone;
  double containerfs_available = 50 * kGiB;
};

}  // namespace pressured::testing
