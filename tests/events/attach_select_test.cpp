// Attach-mode selection with a fake prober: each kernel profile gets the
// fallback the chain promises, with a reason that names what was refused.
#include <fstream>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "bpf/programs.hpp"
#include "fakes/privilege.hpp"
#include "pressured/events.hpp"

namespace pressured {
namespace {

class FakeFeatures final : public BpfFeatures {
 public:
  bool available = true;
  std::set<std::string> btf;
  std::set<AttachKind> refused_kinds;                            // e.g. fentry, tp_btf: EPERM
  std::set<std::pair<AttachKind, std::string>> refused_targets;  // specific refusals
  mutable int probes = 0;

  bool bpf_available() const override { return available; }
  bool has_btf_type(std::string_view n) const override { return btf.count(std::string(n)) > 0; }
  bool can_attach(AttachKind k, std::string_view t, std::string* why) const override {
    ++probes;
    if (refused_kinds.count(k) || refused_targets.count({k, std::string(t)})) {
      if (why) *why = "EPERM";
      return false;
    }
    return true;
  }
  int tracepoint_arity(std::string_view) const override { return 2; }
};

// This machine (6.18): every tracepoint in BTF, tp_btf and fentry refused, kprobes cannot attach.
FakeFeatures host_618() {
  FakeFeatures f;
  for (const char* tp : {"mod_memcg_lruvec_state", "count_memcg_events", "mm_vmscan_memcg_reclaim_begin",
                         "mm_vmscan_memcg_reclaim_end", "mm_vmscan_direct_reclaim_begin",
                         "mm_vmscan_direct_reclaim_end", "mm_vmscan_wakeup_kswapd", "mark_victim", "cgroup_mkdir",
                         "cgroup_rmdir", "cgroup_notify_populated", "sched_process_fork", "sched_process_free"})
    f.btf.insert(std::string("btf_trace_") + tp);
  f.btf.insert("page_counter_try_charge");
  f.refused_kinds = {AttachKind::TpBtf, AttachKind::Fentry, AttachKind::Kprobe};
  return f;
}

// Debian 6.1: no memcg stat tracepoints; fentry, tp_btf and kprobes work.
FakeFeatures vm_61() {
  FakeFeatures f = host_618();
  f.btf.erase("btf_trace_mod_memcg_lruvec_state");
  f.btf.erase("btf_trace_count_memcg_events");
  f.refused_kinds.clear();
  return f;
}

TEST(AttachSelect, HostPicksRawTpEverywhere) {
  auto f = host_618();
  for (std::size_t i = 0; i < kBpfProgramCount; ++i) {
    auto p = static_cast<BpfProgram>(i);
    auto c = choose_attach(attach_chain(p), f);
    EXPECT_EQ(c.kind, AttachKind::RawTp) << name(p) << ": " << c.reason;
    EXPECT_NE(c.reason.find("tp_btf"), std::string::npos) << "reason must say tp_btf was refused: " << c.reason;
    EXPECT_FALSE(bpf::program_for(p, c.kind, c.target).empty()) << name(p);
  }
  auto charge = choose_attach(attach_chain(BpfProgram::MemcgCharge), f);
  EXPECT_EQ(charge.target, "mod_memcg_lruvec_state");
}

TEST(AttachSelect, Vm61PicksTpBtfAndFentryOnPageCounter) {
  auto f = vm_61();
  auto charge = choose_attach(attach_chain(BpfProgram::MemcgCharge), f);
  EXPECT_EQ(charge.kind, AttachKind::Fentry);
  EXPECT_EQ(charge.target, "page_counter_try_charge");
  EXPECT_NE(charge.reason.find("not in kernel BTF"), std::string::npos) << charge.reason;
  EXPECT_EQ(choose_attach(attach_chain(BpfProgram::OomVictim), f).kind, AttachKind::TpBtf);
  EXPECT_EQ(choose_attach(attach_chain(BpfProgram::CgroupRmdir), f).kind, AttachKind::TpBtf);
}

TEST(AttachSelect, FentryRefusedFallsBackToKprobe) {
  auto f = vm_61();
  f.refused_kinds = {AttachKind::Fentry};
  auto charge = choose_attach(attach_chain(BpfProgram::MemcgCharge), f);
  EXPECT_EQ(charge.kind, AttachKind::Kprobe);
  EXPECT_NE(charge.reason.find("fentry page_counter_try_charge: EPERM"), std::string::npos) << charge.reason;
}

TEST(AttachSelect, KprobeAttachRefusedFallsToNearbyTracepoint) {
  // Kprobe programs load where kprobes are compiled out: only the attach tells.
  auto f = host_618();
  f.btf.erase("btf_trace_mod_memcg_lruvec_state");
  auto charge = choose_attach(attach_chain(BpfProgram::MemcgCharge), f);
  EXPECT_EQ(charge.kind, AttachKind::RawTp);
  EXPECT_EQ(charge.target, "count_memcg_events");
}

TEST(AttachSelect, NothingWorksMeansOffWithEveryReason) {
  auto f = host_618();
  f.refused_kinds.insert(AttachKind::RawTp);
  auto c = choose_attach(attach_chain(BpfProgram::MemcgCharge), f);
  EXPECT_EQ(c.kind, AttachKind::Off);
  EXPECT_NE(c.reason.find("every candidate refused"), std::string::npos);
  EXPECT_NE(c.reason.find("kprobe page_counter_try_charge: EPERM"), std::string::npos) << c.reason;
}

TEST(AttachSelect, BpfUnavailableNeverProbes) {
  auto f = host_618();
  f.available = false;
  auto c = choose_attach(attach_chain(BpfProgram::OomVictim), f);
  EXPECT_EQ(c.kind, AttachKind::Off);
  EXPECT_EQ(c.reason, "BPF unavailable");
  EXPECT_EQ(f.probes, 0);
}

TEST(AttachSelect, EveryChainIsNonEmptyAndMapped) {
  for (std::size_t i = 0; i < kBpfProgramCount; ++i) {
    auto p = static_cast<BpfProgram>(i);
    auto chain = attach_chain(p);
    ASSERT_FALSE(chain.empty()) << name(p);
    for (const auto& c : chain) EXPECT_FALSE(bpf::program_for(p, c.kind, c.target).empty()) << name(p);
  }
}

// The real prober on this host: the measured machine facts.
TEST(KernelBpfFeaturesHost, ProbesReallyAttach) {
  PRESSURED_REQUIRE_ROOT();
  auto f = make_kernel_bpf_features();
  PRESSURED_REQUIRE(f->bpf_available(), "BPF (ring buffer map)");
  PRESSURED_REQUIRE(f->has_btf_type("btf_trace_mark_victim"), "kernel BTF with btf_trace_mark_victim");
  std::string why;
  EXPECT_TRUE(f->can_attach(AttachKind::RawTp, "mark_victim", &why)) << why;
  EXPECT_FALSE(f->can_attach(AttachKind::RawTp, "no_such_tracepoint_xyz", &why));
  EXPECT_GE(f->tracepoint_arity("mark_victim"), 1);
  // Kprobe: record what this kernel does; on this host the attach must fail even though the program loads.
  std::string kwhy;
  bool kprobe = f->can_attach(AttachKind::Kprobe, "page_counter_try_charge", &kwhy);
  RecordProperty("kprobe", kprobe ? "ok" : kwhy);
  if (!std::ifstream("/sys/bus/event_source/devices/kprobe/type")) {
    EXPECT_FALSE(kprobe) << "no kprobe PMU, yet the probe claims kprobes attach";
  }
}

}  // namespace
}  // namespace pressured
