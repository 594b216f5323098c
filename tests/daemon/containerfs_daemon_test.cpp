// The daemon with a detected containerfs layout: thresholds derived at start
// and on reload, the writable-layer victim killed.
#include <gtest/gtest.h>

#include <algorithm>

#include "daemon/daemon.hpp"

namespace pressured {
namespace {

using namespace std::chrono_literals;
constexpr double GiB = 1024.0 * 1024 * 1024;

TimePoint at(double s) { return TimePoint(std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s))); }

// Disk signals and pods with writable layers; nothing else.
class DiskObserver final : public NodeObserver {
 public:
  DiskObserver() { layout_.kubepods_memory_path = "/fake/kubepods"; }
  const CgroupLayout& layout() const override { return layout_; }
  Result<NodeSnapshot> observe(TimePoint now) override {
    NodeSnapshot s;
    s.taken_at = now;
    s.containerfs_layout = ContainerfsLayout::Separate;
    s.signal(Signal::NodefsAvailable) = SignalObservation{50 * GiB, 100 * GiB, now, false};
    s.signal(Signal::ContainerfsAvailable) = SignalObservation{containerfs_available, 100 * GiB, now, false};
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
  double containerfs_available = 50 * GiB;
};

class Recorder final : public Evictor {
 public:
  Result<void> validate(const EvictionTarget& t) const override {
    if (t.cgroup_path.rfind("/fake/kubepods/", 0) != 0) return Error{EPERM, "outside the pods root"};
    return {};
  }
  Result<KillReport> terminate(const EvictionTarget& t) override { return kill(t); }
  Result<KillReport> kill(const EvictionTarget& t) override {
    calls.push_back("kill " + t.uid);
    KillReport r;
    r.empty = true;
    return r;
  }
  Result<bool> is_empty(const EvictionTarget&) const override { return true; }
  std::vector<std::string> calls;
};

Config nodefs_config(double percent) {
  Config c;
  Threshold t;
  t.signal = Signal::NodefsAvailable;
  t.value.kind = ThresholdValue::Kind::Percent;
  t.value.percent = percent;
  c.eviction.thresholds = {t};
  c.eviction.pressure_transition_period = 0s;
  return c;
}

bool has(const Config& c, Signal s, double percent) {
  return std::any_of(c.eviction.thresholds.begin(), c.eviction.thresholds.end(),
                     [&](const Threshold& t) { return t.signal == s && t.value.percent == percent; });
}

TEST(DaemonContainerfs, DerivesAtStartAndOnReloadAndKillsTheLargestLayer) {
  DiskObserver obs;
  obs.add("logs", 20 * GiB, 1 * GiB);
  obs.add("layer", 6 * GiB, 5 * GiB);
  Recorder ev;
  Result<Config> next = nodefs_config(3);
  DaemonDeps deps;
  deps.observer = &obs;
  deps.evictor = &ev;
  deps.boot_id = "test-boot";
  deps.containerfs_layout = ContainerfsLayout::Separate;
  deps.reload = [&next] { return next; };
  Daemon d(nodefs_config(10), deps);
  EXPECT_TRUE(has(d.config(), Signal::ContainerfsAvailable, 10));

  d.evaluate(at(1), "test", std::nullopt);
  EXPECT_TRUE(ev.calls.empty()) << "50Gi of 100Gi available";

  obs.containerfs_available = 4 * GiB;  // below the derived 10%
  d.evaluate(at(2), "test", std::nullopt);
  EXPECT_EQ(ev.calls, std::vector<std::string>{"kill layer"});
  EXPECT_TRUE(d.last_decisions().conditions[static_cast<std::size_t>(Condition::DiskPressure)]);

  // A reload derives again, from the new nodefs threshold (3%: 4Gi is fine).
  obs.gone.push_back("layer");
  ASSERT_TRUE(d.reload());
  EXPECT_TRUE(has(d.config(), Signal::ContainerfsAvailable, 3));
  EXPECT_FALSE(has(d.config(), Signal::ContainerfsAvailable, 10));
  d.evaluate(at(30), "test", std::nullopt);
  EXPECT_EQ(ev.calls, std::vector<std::string>{"kill layer"});
}

TEST(DaemonContainerfs, UnknownLayoutDerivesNothing) {
  DiskObserver obs;
  Recorder ev;
  DaemonDeps deps;
  deps.observer = &obs;
  deps.evictor = &ev;
  Daemon d(nodefs_config(10), deps);
  EXPECT_EQ(d.config().eviction.thresholds.size(), 1u);
}

}  // namespace
}  // namespace pressured
