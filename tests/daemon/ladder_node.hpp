#pragma once
// The fake node the decision tests of the daemon (decision_view_test,
// in_flight_decision_test) read with the real observer: pods whose working
// sets climb one MiB apart, so that which pod a full observation would evict
// is known, and the memory.available threshold they press on.

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include "fakes/fake_node.hpp"
#include "pressured/config.hpp"
#include "pressured/observer.hpp"

namespace pressured::testing {

/// Pod `i`'s uid; uids sort as their numbers do.
inline std::string pod_uid(int i) {
  char uid[64];
  std::snprintf(uid, sizeof uid, "0bb1b2c3-0000-4000-8000-%012d", i);
  return uid;
}

/// A pod's memory: its working set and inactive page cache (MiB), two pids.
inline FakePodMemory pod_memory(uint64_t ws_mib, uint64_t inactive_mib) {
  constexpr uint64_t kMiB = 1ULL << 20;
  FakePodMemory m{(ws_mib + inactive_mib) * kMiB, ws_mib * kMiB, inactive_mib * kMiB, inactive_mib * kMiB, 0};
  m.pids = 2;
  return m;
}

/// One memory.available threshold at `percent` of the node's memory.
inline EvictionConfig memory_threshold(double percent, ThresholdKind kind = ThresholdKind::Hard) {
  Threshold t;
  t.signal = Signal::MemoryAvailable;
  t.kind = kind;
  t.value.kind = ThresholdValue::Kind::Percent;
  t.value.percent = percent;
  EvictionConfig e;
  e.thresholds.push_back(t);
  return e;
}

/// A fake node (cgroup v1, cgroupfs driver) with `n` pods, pod i of QoS
/// class qos(i) (BestEffort unless given), a working set of 10 + i MiB and
/// 5 MiB of inactive page cache, and the real observer on it.
struct LadderNode {
  FakeNode fake{CgroupVersion::V1, CgroupDriver::Cgroupfs};
  std::unique_ptr<NodeObserver> obs;

  explicit LadderNode(int n, const std::function<QosClass(int)>& qos = [](int) { return QosClass::BestEffort; }) {
    for (int i = 0; i < n; ++i) fake.add_pod(pod_uid(i), qos(i), pod_memory(10 + static_cast<uint64_t>(i), 5));
    auto o = make_node_observer(fake.config());
    if (!o) throw std::runtime_error(o.error().message);
    obs = std::move(*o);
  }
  /// Rewrites pod i's memory files.
  void set(int i, const FakePodMemory& m, QosClass q = QosClass::BestEffort) {
    fake.write_memcg(fake.pod_dir(pod_uid(i), q), m);
  }
};

}  // namespace pressured::testing
