// Attach-mode selection with a fake prober: each kernel profile gets the
// fallback the chain promises, with a reason that names what was refused.
#include <cerrno>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bpf/catalogue.hpp"
#include "bpf/features.hpp"
#include "bpf/perf_paranoid.hpp"
#include "bpf/programs.hpp"
#include "fakes/kernel_release.hpp"
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
  std::map<AttachKind, std::string> why_by_kind;                 // the refusal's words (default "EPERM")
  mutable int probes = 0;

  bool bpf_available() const override { return available; }
  bool has_btf_type(std::string_view n) const override { return btf.count(std::string(n)) > 0; }
  bool can_attach(AttachKind k, std::string_view t, std::string* why) const override {
    ++probes;
    if (refused_kinds.count(k) || refused_targets.count({k, std::string(t)})) {
      auto w = why_by_kind.find(k);
      if (why) *why = w == why_by_kind.end() ? "EPERM" : w->second;
      return false;
    }
    return true;
  }
  int tracepoint_arity(std::string_view) const override { return 2; }
  std::map<std::string, int> function_arities;  // unknown: -1
  int function_arity(std::string_view fn) const override {
    auto it = function_arities.find(std::string(fn));
    return it == function_arities.end() ? -1 : it->second;
  }
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
  f.btf.insert("psi_memstall_enter");
  f.btf.insert("psi_memstall_leave");
  f.refused_kinds = {AttachKind::TpBtf, AttachKind::Fentry, AttachKind::Kprobe};
  return f;
}

// Debian 6.1: no memcg stat tracepoints; fentry, tp_btf and kprobes work.
FakeFeatures vm_61() {
  FakeFeatures f = host_618();
  f.btf.erase("btf_trace_mod_memcg_lruvec_state");
  f.btf.erase("btf_trace_count_memcg_events");
  f.btf.insert("__count_memcg_events");  // out of line before the 6.14 rename + tracepoint
  f.refused_kinds.clear();
  return f;
}

// arm64 Debian 6.1 in the DaemonSet's container: fentry attach refused (no
// ftrace direct calls before 6.4), kprobes refused by kernel.perf_event_paranoid=3.
FakeFeatures arm64_61_container() {
  FakeFeatures f = vm_61();
  f.refused_kinds = {AttachKind::Fentry, AttachKind::Kprobe};
  f.why_by_kind[AttachKind::Fentry] = "attach: Unknown error 524";
  f.why_by_kind[AttachKind::Kprobe] = bpf::perf_event_refusal("perf_event_open kprobe", EACCES, 3);
  return f;
}

TEST(AttachSelect, KprobesRefusedByPerfParanoidSayTheSysctlFirst) {
  auto sel = bpf::select_programs(arm64_61_container(), nullptr);
  for (auto p : {BpfProgram::MemcgCharge, BpfProgram::MemcgReclaimStats, BpfProgram::MemstallEnter,
                 BpfProgram::MemstallLeave}) {
    const auto& c = sel.choices[static_cast<std::size_t>(p)];
    EXPECT_EQ(c.kind, AttachKind::Off) << name(p);
    // What pressured_bpf_program_info keeps of it (128 characters) names the sysctl and the remedy.
    const std::string label = c.reason.substr(0, 128);
    EXPECT_EQ(label.rfind("kernel.perf_event_paranoid=3 refuses kprobes", 0), 0u) << name(p) << ": " << c.reason;
    EXPECT_NE(label.find("kernel.perf_event_paranoid=2"), std::string::npos) << name(p) << ": " << c.reason;
    // The whole refusal follows, for the log.
    EXPECT_NE(c.reason.find("kprobe"), std::string::npos) << c.reason;
    EXPECT_NE(c.reason.find("PSI and the other hooks cover it"), std::string::npos) << c.reason;
  }
  // Programs whose tracepoints attach are untouched.
  const auto& oom = sel.choices[static_cast<std::size_t>(BpfProgram::OomVictim)];
  EXPECT_EQ(oom.kind, AttachKind::RawTp);
  EXPECT_EQ(oom.reason.find("perf_event_paranoid"), std::string::npos) << oom.reason;
}

TEST(AttachSelect, OtherKprobeRefusalsDoNotBlameTheSysctl) {
  auto f = arm64_61_container();
  f.why_by_kind[AttachKind::Kprobe] = bpf::perf_event_refusal("perf_event_open kprobe", EACCES, 2);
  auto sel = bpf::select_programs(f, nullptr);
  const auto& c = sel.choices[static_cast<std::size_t>(BpfProgram::MemstallEnter)];
  EXPECT_EQ(c.kind, AttachKind::Off);
  EXPECT_EQ(c.reason.rfind("every candidate refused", 0), 0u) << c.reason;
  EXPECT_EQ(c.reason.find("perf_event_paranoid"), std::string::npos) << c.reason;
}

// The memcg hooks whose tp_btf flavour reads its typed argument by plain loads.
bool tp_btf_first(BpfProgram p) {
  return p == BpfProgram::MemcgCharge || p == BpfProgram::MemcgReclaimStats || p == BpfProgram::WorkingsetRefault;
}

TEST(AttachSelect, HostPicksRawTpEverywhere) {
  auto f = host_618();
  for (std::size_t i = 0; i < kBpfProgramCount; ++i) {
    auto p = static_cast<BpfProgram>(i);
    if (p == BpfProgram::MemstallEnter || p == BpfProgram::MemstallLeave) continue;  // no tracepoint: below
    auto c = choose_attach(attach_chain(p), f);
    EXPECT_EQ(c.kind, AttachKind::RawTp) << name(p) << ": " << c.reason;
    if (tp_btf_first(p)) {
      EXPECT_NE(c.reason.find("tp_btf"), std::string::npos) << "reason must say tp_btf was refused: " << c.reason;
    } else {
      EXPECT_EQ(c.reason.find("tp_btf"), std::string::npos) << "raw_tp comes first, nothing was refused: " << c.reason;
    }
    EXPECT_FALSE(bpf::program_for(p, c.kind, c.target).empty()) << name(p);
  }
  auto charge = choose_attach(attach_chain(BpfProgram::MemcgCharge), f);
  EXPECT_EQ(charge.target, "mod_memcg_lruvec_state");
}

TEST(AttachSelect, Vm61PicksRawTpAndFentryOnPageCounter) {
  auto f = vm_61();
  auto charge = choose_attach(attach_chain(BpfProgram::MemcgCharge), f);
  EXPECT_EQ(charge.kind, AttachKind::Fentry);
  EXPECT_EQ(charge.target, "page_counter_try_charge");
  EXPECT_NE(charge.reason.find("not in kernel BTF"), std::string::npos) << charge.reason;
  EXPECT_EQ(choose_attach(attach_chain(BpfProgram::OomVictim), f).kind, AttachKind::RawTp);
  EXPECT_EQ(choose_attach(attach_chain(BpfProgram::CgroupRmdir), f).kind, AttachKind::RawTp);
}

// Where raw_tp programs are refused (a policy on the program type), the
// tracepoints that put it first take their tp_btf flavour: the same body.
TEST(AttachSelect, RawTpRefusedTakesTheTpBtfFlavour) {
  auto f = vm_61();
  f.refused_kinds = {AttachKind::RawTp};
  for (std::size_t i = 0; i < kBpfProgramCount; ++i) {
    auto p = static_cast<BpfProgram>(i);
    auto chain = attach_chain(p);
    if (chain.empty() || chain.front().kind != AttachKind::RawTp) continue;
    auto c = choose_attach(chain, f);
    EXPECT_EQ(c.kind, AttachKind::TpBtf) << name(p) << ": " << c.reason;
    EXPECT_NE(c.reason.find("raw_tp"), std::string::npos) << "reason must say raw_tp was refused: " << c.reason;
  }
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

TEST(AttachSelect, HostActivityHooks) {
  auto f = host_618();
  auto stats = choose_attach(attach_chain(BpfProgram::MemcgReclaimStats), f);
  EXPECT_EQ(stats.kind, AttachKind::RawTp);
  EXPECT_EQ(stats.target, "count_memcg_events");
  auto refault = choose_attach(attach_chain(BpfProgram::WorkingsetRefault), f);
  auto charge = choose_attach(attach_chain(BpfProgram::MemcgCharge), f);
  EXPECT_EQ(refault.kind, charge.kind);
  EXPECT_EQ(refault.target, "mod_memcg_lruvec_state");
  // The refault counting shares the charge hook's program (no second program on that tracepoint).
  EXPECT_EQ(bpf::program_for(BpfProgram::WorkingsetRefault, refault.kind, refault.target),
            bpf::program_for(BpfProgram::MemcgCharge, charge.kind, charge.target));
  for (auto p : {BpfProgram::MemstallEnter, BpfProgram::MemstallLeave}) {
    auto c = choose_attach(attach_chain(p), f);
    EXPECT_EQ(c.kind, AttachKind::Off) << name(p);
    EXPECT_NE(c.reason.find("fentry psi_memstall_"), std::string::npos) << c.reason;
    EXPECT_NE(c.reason.find("kprobe psi_memstall_"), std::string::npos) << c.reason;
  }
}

TEST(AttachSelect, Vm61ActivityHooksUseFentry) {
  auto f = vm_61();
  auto stats = choose_attach(attach_chain(BpfProgram::MemcgReclaimStats), f);
  EXPECT_EQ(stats.kind, AttachKind::Fentry);
  EXPECT_EQ(stats.target, "__count_memcg_events");
  EXPECT_NE(stats.reason.find("btf_trace_count_memcg_events"), std::string::npos) << stats.reason;
  auto refault = choose_attach(attach_chain(BpfProgram::WorkingsetRefault), f);
  EXPECT_EQ(refault.kind, AttachKind::Off) << "6.1 has no memcg stat tracepoint";
  EXPECT_NE(refault.reason.find("btf_trace_mod_memcg_lruvec_state"), std::string::npos) << refault.reason;
  for (auto p : {BpfProgram::MemstallEnter, BpfProgram::MemstallLeave}) {
    auto c = choose_attach(attach_chain(p), f);
    EXPECT_EQ(c.kind, AttachKind::Fentry) << name(p) << ": " << c.reason;
  }
  // fentry refused: kprobe on the same functions.
  f.refused_kinds = {AttachKind::Fentry};
  EXPECT_EQ(choose_attach(attach_chain(BpfProgram::MemcgReclaimStats), f).kind, AttachKind::Kprobe);
  auto enter = choose_attach(attach_chain(BpfProgram::MemstallEnter), f);
  EXPECT_EQ(enter.kind, AttachKind::Kprobe);
  EXPECT_NE(enter.reason.find("fentry psi_memstall_enter: EPERM"), std::string::npos) << enter.reason;
  // Neither the tracepoint nor the old function: off, naming both.
  f.btf.erase("__count_memcg_events");
  auto none = choose_attach(attach_chain(BpfProgram::MemcgReclaimStats), f);
  EXPECT_EQ(none.kind, AttachKind::Off);
  EXPECT_NE(none.reason.find("__count_memcg_events"), std::string::npos) << none.reason;
}

TEST(AttachSelect, MemstallProgramsArePaired) {
  auto f = vm_61();
  f.refused_targets = {{AttachKind::Fentry, "psi_memstall_leave"}, {AttachKind::Kprobe, "psi_memstall_leave"}};
  auto enter = choose_attach(attach_chain(BpfProgram::MemstallEnter), f);
  auto leave = choose_attach(attach_chain(BpfProgram::MemstallLeave), f);
  ASSERT_EQ(enter.kind, AttachKind::Fentry);
  ASSERT_EQ(leave.kind, AttachKind::Off);
  bpf::pair_choices(enter, leave);
  EXPECT_EQ(enter.kind, AttachKind::Off);
  EXPECT_NE(enter.reason.find("its pair is off"), std::string::npos) << enter.reason;
  EXPECT_EQ(leave.kind, AttachKind::Off);
  // Both on: untouched.
  auto e2 = choose_attach(attach_chain(BpfProgram::MemstallEnter), vm_61());
  auto l2 = choose_attach(attach_chain(BpfProgram::MemstallLeave), vm_61());
  bpf::pair_choices(e2, l2);
  EXPECT_EQ(e2.kind, AttachKind::Fentry);
  EXPECT_EQ(l2.kind, AttachKind::Fentry);
}

TEST(AttachSelect, OldCounterFunctionWithAnotherSignatureIsRefused) {
  auto f = vm_61();
  f.function_arities["__count_memcg_events"] = 3;
  EXPECT_EQ(choose_attach(attach_chain(BpfProgram::MemcgReclaimStats), f).kind, AttachKind::Fentry);
  f.function_arities["__count_memcg_events"] = 4;  // a kernel where the function means something else
  auto c = choose_attach(attach_chain(BpfProgram::MemcgReclaimStats), f);
  EXPECT_EQ(c.kind, AttachKind::Off);
  EXPECT_NE(c.reason.find("signature differs (4 parameters, the handler reads 3)"), std::string::npos) << c.reason;
}

// Load refusals: which (program, flavour) the fake kernel's verifier refuses.
class FakeLoad final : public bpf::ProgramLoadProbe {
 public:
  std::map<std::pair<BpfProgram, AttachKind>, std::string> refused;
  mutable std::vector<std::pair<BpfProgram, AttachKind>> asked;
  bool can_load(BpfProgram p, const AttachCandidate& c, std::string* why) const override {
    asked.emplace_back(p, c.kind);
    auto it = refused.find({p, c.kind});
    if (it == refused.end()) return true;
    if (why) *why = it->second;
    return false;
  }
};

// Debian 5.10: like 6.1 for BTF and attach probes (fentry attaches), but the
// verifier refuses the real fentry charge handler (measured: -22).
FakeFeatures vm_510() { return vm_61(); }

// Every program but `changed` has the flavour it has in `plain`.
void expect_same_choices_but(const bpf::Selection& sel, const bpf::Selection& plain, BpfProgram changed) {
  for (std::size_t i = 0; i < kBpfProgramCount; ++i) {
    if (static_cast<BpfProgram>(i) == changed) continue;
    EXPECT_EQ(sel.choices[i].kind, plain.choices[i].kind) << name(static_cast<BpfProgram>(i));
    EXPECT_EQ(sel.choices[i].target, plain.choices[i].target) << name(static_cast<BpfProgram>(i));
  }
}

TEST(SelectPrograms, WithoutALoadProbeTheFirstAttachableFlavourIsChosen) {
  auto f = vm_510();
  auto sel = bpf::select_programs(f, nullptr);
  EXPECT_EQ(sel.choices[static_cast<std::size_t>(BpfProgram::MemcgCharge)].kind, AttachKind::Fentry);
  EXPECT_TRUE(sel.load_refusals.empty());
}

TEST(SelectPrograms, ARefusedLoadFallsToTheNextFlavourAndSparesTheOthers) {
  auto f = vm_510();
  FakeLoad load;
  load.refused[{BpfProgram::MemcgCharge, AttachKind::Fentry}] = "Invalid argument (R1 invalid mem access 'inv')";
  auto sel = bpf::select_programs(f, &load);
  const auto& charge = sel.choices[static_cast<std::size_t>(BpfProgram::MemcgCharge)];
  EXPECT_EQ(charge.kind, AttachKind::Kprobe);
  EXPECT_EQ(charge.target, "page_counter_try_charge");
  EXPECT_NE(charge.reason.find("fentry page_counter_try_charge: program refused at load: Invalid argument"), std::string::npos)
      << charge.reason;
  ASSERT_EQ(sel.load_refusals.size(), 1u);
  EXPECT_EQ(sel.load_refusals[0].program, BpfProgram::MemcgCharge);
  EXPECT_EQ(sel.load_refusals[0].kind, AttachKind::Fentry);
  EXPECT_EQ(sel.load_refusals[0].target, "page_counter_try_charge");
  EXPECT_EQ(sel.load_refusals[0].why, "Invalid argument (R1 invalid mem access 'inv')");
  // Every other program keeps what it had without the refusal.
  auto plain = bpf::select_programs(f, nullptr);
  expect_same_choices_but(sel, plain, BpfProgram::MemcgCharge);
}

TEST(SelectPrograms, TheLoadProbeIsAskedOnlyAboutCandidatesThatCanAttach) {
  auto f = vm_510();
  f.refused_kinds = {AttachKind::RawTp};
  FakeLoad load;
  auto sel = bpf::select_programs(f, &load);
  std::set<std::pair<BpfProgram, AttachKind>> asked(load.asked.begin(), load.asked.end());
  EXPECT_EQ(asked.size(), load.asked.size()) << "a candidate was asked twice";
  for (const auto& [p, k] : load.asked) {
    EXPECT_NE(k, AttachKind::RawTp) << name(p) << ": raw_tp cannot attach, so it must not be loaded";
    EXPECT_EQ(sel.choices[static_cast<std::size_t>(p)].kind, k) << name(p) << ": asked about a flavour not chosen";
  }
  // Programs with no attachable flavour (refaults: 6.14+ only) are never asked about.
  EXPECT_EQ(asked.count({BpfProgram::WorkingsetRefault, AttachKind::TpBtf}), 0u);
}

TEST(SelectPrograms, EveryFlavourRefusedIsOffWithEachReasonAndPairsFollow) {
  auto f = vm_510();
  FakeLoad load;
  load.refused[{BpfProgram::MemstallLeave, AttachKind::Fentry}] = "Invalid argument";
  load.refused[{BpfProgram::MemstallLeave, AttachKind::Kprobe}] = "Permission denied";
  auto sel = bpf::select_programs(f, &load);
  const auto& leave = sel.choices[static_cast<std::size_t>(BpfProgram::MemstallLeave)];
  const auto& enter = sel.choices[static_cast<std::size_t>(BpfProgram::MemstallEnter)];
  EXPECT_EQ(leave.kind, AttachKind::Off);
  EXPECT_NE(leave.reason.find("fentry psi_memstall_leave: program refused at load: Invalid argument"), std::string::npos) << leave.reason;
  EXPECT_NE(leave.reason.find("kprobe psi_memstall_leave: program refused at load: Permission denied"), std::string::npos)
      << leave.reason;
  EXPECT_EQ(enter.kind, AttachKind::Off) << "memstall enter without leave is useless";
  EXPECT_NE(enter.reason.find("its pair is off"), std::string::npos) << enter.reason;
  EXPECT_EQ(sel.load_refusals.size(), 2u);
}

// The tracepoint flavours are checked against BTF only: their real attach is
// the probe, and a refused one hands the program to the next flavour.
TEST(SelectPrograms, AFailedAttachFallsToTheNextFlavourAndSparesTheOthers) {
  auto f = vm_510();
  auto plain = bpf::select_programs(f, nullptr);
  ASSERT_EQ(plain.choices[static_cast<std::size_t>(BpfProgram::OomVictim)].kind, AttachKind::RawTp);
  std::vector<bpf::AttachRefusal> refused{
      {BpfProgram::OomVictim, AttachKind::RawTp, "mark_victim", "Invalid argument"}};
  auto sel = bpf::select_programs(f, nullptr, refused);
  const auto& victim = sel.choices[static_cast<std::size_t>(BpfProgram::OomVictim)];
  EXPECT_EQ(victim.kind, AttachKind::TpBtf);
  EXPECT_EQ(victim.target, "mark_victim");
  EXPECT_NE(victim.reason.find("fallback; raw_tp mark_victim: attach failed: Invalid argument"), std::string::npos)
      << victim.reason;
  EXPECT_TRUE(sel.load_refusals.empty()) << "an attach failure is not a load refusal";
  expect_same_choices_but(sel, plain, BpfProgram::OomVictim);
}

// x86's fentry probe stops at the load: a refused trampoline attach falls to the kprobe.
TEST(SelectPrograms, AFailedFentryAttachFallsToTheKprobe) {
  auto f = vm_510();
  std::vector<bpf::AttachRefusal> refused{
      {BpfProgram::MemcgCharge, AttachKind::Fentry, "page_counter_try_charge", "Device or resource busy"}};
  auto sel = bpf::select_programs(f, nullptr, refused);
  const auto& charge = sel.choices[static_cast<std::size_t>(BpfProgram::MemcgCharge)];
  EXPECT_EQ(charge.kind, AttachKind::Kprobe);
  EXPECT_NE(charge.reason.find("fentry page_counter_try_charge: attach failed: Device or resource busy"),
            std::string::npos)
      << charge.reason;
}

// A refusal names one program's flavour: the refault hook on the same
// tracepoint keeps its choice, and a program whose every flavour failed is
// off with each failure (and its memstall pair with it).
TEST(SelectPrograms, EveryFlavourFailingToAttachIsOffWithEachReason) {
  auto f = vm_510();
  std::vector<bpf::AttachRefusal> refused{
      {BpfProgram::MemstallEnter, AttachKind::Fentry, "psi_memstall_enter", "Invalid argument"},
      {BpfProgram::MemstallEnter, AttachKind::Kprobe, "psi_memstall_enter", "No such file or directory"},
      {BpfProgram::CgroupMkdir, AttachKind::RawTp, "cgroup_rmdir", "Invalid argument"},  // another program's target
  };
  auto sel = bpf::select_programs(f, nullptr, refused);
  const auto& enter = sel.choices[static_cast<std::size_t>(BpfProgram::MemstallEnter)];
  const auto& leave = sel.choices[static_cast<std::size_t>(BpfProgram::MemstallLeave)];
  EXPECT_EQ(enter.kind, AttachKind::Off);
  EXPECT_NE(enter.reason.find("every candidate refused: fentry psi_memstall_enter: attach failed: Invalid argument; "
                              "kprobe psi_memstall_enter: attach failed: No such file or directory"),
            std::string::npos)
      << enter.reason;
  EXPECT_EQ(leave.kind, AttachKind::Off);
  EXPECT_NE(leave.reason.find("its pair is off"), std::string::npos) << leave.reason;
  EXPECT_EQ(sel.choices[static_cast<std::size_t>(BpfProgram::CgroupRmdir)].kind, AttachKind::RawTp);
  EXPECT_EQ(sel.choices[static_cast<std::size_t>(BpfProgram::CgroupMkdir)].kind, AttachKind::RawTp);
}

TEST(SelectPrograms, VerifierLastLineNamesTheRefusal) {
  const std::string out =
      "libbpf: prog 'fentry_try_charge': BPF program load failed: Invalid argument\n"
      "libbpf: prog 'fentry_try_charge': -- BEGIN PROG LOAD LOG --\n"
      "0: R1=ctx(id=0,off=0,imm=0) R10=fp0\n"
      "; int BPF_PROG(fentry_try_charge, struct page_counter *counter, unsigned long nr_pages)\n"
      "0: (79) r6 = *(u64 *)(r1 +0)\n"
      "func 'page_counter_try_charge' arg0 has btf_id 5 type STRUCT 'page_counter'\n"
      "1: (07) r6 += -232\n"
      "R6 pointer arithmetic on ptr_to_btf_id prohibited\n"
      "processed 2 insns (limit 1000000) max_states_per_insn 0 total_states 0 peak_states 0 mark_read 0\n"
      "-- END PROG LOAD LOG --\n"
      "libbpf: prog 'fentry_try_charge': failed to load: -22\n"
      "libbpf: failed to load object 'pressured_events'\n";
  EXPECT_EQ(bpf::verifier_last_line(out), "R6 pointer arithmetic on ptr_to_btf_id prohibited");
  // No verifier log (a CO-RE relocation failed before the kernel saw it): libbpf's failure line.
  EXPECT_EQ(bpf::verifier_last_line("libbpf: prog 'x': relo #3: failed to resolve\nlibbpf: done\n"),
            "prog 'x': relo #3: failed to resolve");
  EXPECT_EQ(bpf::verifier_last_line(""), "");
}

// The real prober on this host: the measured machine facts. Tracepoints are
// answered from BTF (their real attach is the probe); kprobes really attach.
TEST(KernelBpfFeaturesHost, ProbesAnswerFromBtfOrReallyAttach) {
  PRESSURED_REQUIRE_ROOT();
  auto f = make_kernel_bpf_features();
  PRESSURED_REQUIRE(f->bpf_available(), "BPF (ring buffer map)");
  PRESSURED_REQUIRE(f->has_btf_type("btf_trace_mark_victim"), "kernel BTF with btf_trace_mark_victim");
  std::string why;
  EXPECT_TRUE(f->can_attach(AttachKind::RawTp, "mark_victim", &why)) << why;
  EXPECT_FALSE(f->can_attach(AttachKind::RawTp, "no_such_tracepoint_xyz", &why));
  EXPECT_EQ(why, "not in BTF");
  EXPECT_TRUE(f->can_attach(AttachKind::TpBtf, "mark_victim", &why)) << why;
  EXPECT_TRUE(f->can_attach(AttachKind::TpBtf, "cgroup_mkdir", &why)) << why;
  EXPECT_FALSE(f->can_attach(AttachKind::TpBtf, "no_such_tracepoint_xyz", &why));
  EXPECT_EQ(why, "not in BTF");
  EXPECT_GE(f->tracepoint_arity("mark_victim"), 1);
  if (f->has_btf_type("psi_memstall_enter")) {
    EXPECT_EQ(f->function_arity("psi_memstall_enter"), 1);
  }
  EXPECT_EQ(f->function_arity("no_such_function_xyz"), -1);
  // BPF cmpxchg and fetch arrived in 5.12: older kernels get the _plain twins.
  const auto version = testing::kernel_major_minor();
  ASSERT_TRUE(version) << "the kernel's release from uname(2)";
  EXPECT_EQ(f->has_atomics(), testing::kernel_at_least(5, 12))
      << "kernel " << version->first << "." << version->second;
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
