// Plugin answers (docs/plugins.md, "Guarantees"): whatever plugins answer,
// over whatever node, the merge keeps pressured's guarantees:
//  - a pod the engine may never evict (critical, static, no metadata) is never a victim;
//  - a lane whose hard threshold had a candidate still has one;
//  - a proposal never decides a hard eviction;
//  - a victim other than the engine's names the plugin that moved it;
//  - every reason that reaches the "why" is printable and at most 200 characters.
// The input drives the pods, the thresholds met and every plugin's answers.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdlib>
#include <set>

#include "plugins/merge.hpp"

using namespace pressured;
using namespace pressured::plugins;

namespace {

std::string uid_of(FuzzedDataProvider& in, std::size_t pods) {
  // Mostly a pod of the node, sometimes anything at all.
  if (in.ConsumeBool()) return "p" + std::to_string(in.ConsumeIntegralInRange<std::size_t>(0, pods + 1));
  return in.ConsumeRandomLengthString(40);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  NodeSnapshot snap;
  const std::size_t pods = in.ConsumeIntegralInRange<std::size_t>(0, 12);
  for (std::size_t i = 0; i < pods; ++i) {
    Pod p;
    p.uid = "p" + std::to_string(i);
    p.name = p.uid;
    p.namespace_ = "ns";
    p.metadata_known = true;
    p.qos = static_cast<QosClass>(in.ConsumeIntegralInRange<int>(0, 2));
    p.priority = in.ConsumeIntegral<int32_t>();
    p.critical = in.ConsumeProbability<float>() < 0.15f;
    p.static_pod = in.ConsumeProbability<float>() < 0.15f;
    p.metadata_unavailable = in.ConsumeProbability<float>() < 0.1f;
    p.usage.memory_working_set_bytes = in.ConsumeIntegral<uint32_t>();
    p.usage.pids = in.ConsumeIntegral<uint16_t>();
    p.requests.memory_bytes = in.ConsumeIntegral<uint32_t>();
    snap.pods.push_back(p);
  }
  SignalObservation mem;
  mem.value = 100;
  mem.capacity = 1000;
  snap.signal(Signal::MemoryAvailable) = mem;
  SignalObservation pid = mem;
  snap.signal(Signal::PidAvailable) = pid;
  EvictionConfig cfg;
  for (Signal s : {Signal::MemoryAvailable, Signal::PidAvailable}) {
    Threshold t;
    t.signal = s;
    t.kind = in.ConsumeBool() ? ThresholdKind::Hard : ThresholdKind::Soft;
    t.value.quantity = in.ConsumeBool() ? 200 : 50;  // met or not
    cfg.thresholds.push_back(t);
  }
  Engine engine(cfg);
  const TimePoint now = TimePoint(std::chrono::seconds(in.ConsumeIntegralInRange<int>(0, 1000)));
  Decisions d = engine.evaluate(snap, now);
  const Decisions before = d;

  std::vector<Answers> answers;
  const std::size_t plugins = in.ConsumeIntegralInRange<std::size_t>(0, 3);
  for (std::size_t k = 0; k < plugins; ++k) {
    Answers a;
    a.plugin = "plugin" + std::to_string(k);
    const std::size_t n = in.ConsumeIntegralInRange<std::size_t>(0, 20);
    for (std::size_t i = 0; i < n; ++i) {
      const auto lane = in.ConsumeIntegralInRange<std::size_t>(0, kLaneCount - 1);
      switch (in.ConsumeIntegralInRange<int>(0, 3)) {
        case 0:
        case 1:
          a.adjustments[lane].push_back(Adjustment{uid_of(in, pods),
                                                   static_cast<Action>(in.ConsumeIntegralInRange<int>(0, 2)),
                                                   in.ConsumeRandomLengthString(300)});
          break;
        case 2: a.proposals[lane].push_back(Proposal{uid_of(in, pods), in.ConsumeRandomLengthString(300)}); break;
        case 3:
          a.thresholds.push_back(ThresholdReport{in.ConsumeRandomLengthString(70), in.ConsumeFloatingPoint<double>(),
                                                 in.ConsumeFloatingPoint<double>(), in.ConsumeBool(),
                                                 in.ConsumeBool() ? ThresholdKind::Hard : ThresholdKind::Soft,
                                                 in.ConsumeIntegral<int64_t>(), static_cast<Lane>(lane)});
          break;
      }
    }
    answers.push_back(std::move(a));
  }
  std::array<bool, kLaneCount> held{};
  for (auto& h : held) h = in.ConsumeBool();
  MergeState state;
  (void)apply_answers(d, snap, cfg, {}, held, answers, now, MergeOptions{}, state);

  std::set<std::size_t> hard_lanes;
  for (const Eviction& e : before.candidates) {
    if (e.kind == ThresholdKind::Hard) hard_lanes.insert(static_cast<std::size_t>(*lane_of(e.signal)));
  }
  for (const Eviction& e : d.candidates) {
    const auto lane = lane_of(e.signal);
    if (!lane) std::abort();
    hard_lanes.erase(static_cast<std::size_t>(*lane));
    const Pod* victim = nullptr;
    for (const Pod& p : snap.pods) {
      if (p.uid == e.uid) victim = &p;
    }
    if (victim == nullptr || never_evicted(*victim, cfg)) std::abort();
    bool moved_by_plugin = false;
    for (const PluginNote& n : e.plugin_notes) {
      if (n.action == "propose" && e.kind == ThresholdKind::Hard) std::abort();
      if (n.reason.size() > 200 && n.action != "protect-overridden") std::abort();
      for (char c : n.reason) {
        if (c < 0x20 || c >= 0x7f) std::abort();
      }
      moved_by_plugin = true;
    }
    bool engine_chose = false;
    for (const Eviction& b : before.candidates) engine_chose |= b.uid == e.uid && b.signal == e.signal;
    if (!engine_chose && !moved_by_plugin) std::abort();
  }
  if (!hard_lanes.empty()) std::abort();  // a hard threshold's candidate was taken away
  return 0;
}
