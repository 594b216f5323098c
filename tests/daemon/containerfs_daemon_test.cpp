// The daemon with a detected containerfs layout: thresholds derived at start
// and on reload, the writable-layer victim killed.
#include <gtest/gtest.h>

#include <algorithm>

#include "daemon/daemon.hpp"
#include "fakes/fake_observer.hpp"

namespace pressured {
namespace {

using namespace std::chrono_literals;
constexpr double GiB = 1024.0 * 1024 * 1024;

using testing::DiskObserver;

TimePoint at(double s) { return TimePoint(std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s))); }

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
