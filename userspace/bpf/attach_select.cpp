// Fallback chains and the pure attach-mode selection (tested with a fake prober).
#include "bpf/catalogue.hpp"

#include <string>
#include <utility>

#include "bpf/perf_paranoid.hpp"
#include "bpf/programs.hpp"
#include "pressured/events.hpp"

namespace pressured {

namespace {

struct ChainEntry {
  BpfProgram program;
  AttachKind kind;
  std::string_view target;
  std::string_view skel_program;
  int arity = -1;  // fentry/kprobe: parameters the handler reads (checked against BTF)
};

// Best first. The hot memcg tracepoints (the charge hook's 6.14+ memcg stat
// tracepoint, then fentry -> kprobe on page_counter_try_charge, then the
// nearby count_memcg_events tracepoint; the reclaim stats): tp_btf, whose
// typed memcg argument is read by plain loads, then raw_tp. The other
// tracepoints: raw_tp, then tp_btf. Their two flavours share one body (the
// arguments are scalars or read through helpers), so they run alike, and a
// raw_tp program loads without the two searches of the kernel's BTF a tp_btf
// one costs (libbpf's for the target's id, the verifier's for its arguments):
// about 0.1 ms a program, 1.2 ms of a start for the eleven (measured).
constexpr ChainEntry kChains[] = {
    {BpfProgram::MemcgCharge, AttachKind::TpBtf, "mod_memcg_lruvec_state", "btf_memcg_lruvec"},
    {BpfProgram::MemcgCharge, AttachKind::RawTp, "mod_memcg_lruvec_state", "raw_memcg_lruvec"},
    {BpfProgram::MemcgCharge, AttachKind::Fentry, "page_counter_try_charge", "fentry_try_charge"},
    {BpfProgram::MemcgCharge, AttachKind::Kprobe, "page_counter_try_charge", "kprobe_try_charge"},
    {BpfProgram::MemcgCharge, AttachKind::RawTp, "count_memcg_events", "raw_memcg_count_events"},
    {BpfProgram::MemcgReclaimBegin, AttachKind::RawTp, "mm_vmscan_memcg_reclaim_begin", "raw_memcg_reclaim_begin"},
    {BpfProgram::MemcgReclaimBegin, AttachKind::TpBtf, "mm_vmscan_memcg_reclaim_begin", "btf_memcg_reclaim_begin"},
    {BpfProgram::MemcgReclaimEnd, AttachKind::RawTp, "mm_vmscan_memcg_reclaim_end", "raw_memcg_reclaim_end"},
    {BpfProgram::MemcgReclaimEnd, AttachKind::TpBtf, "mm_vmscan_memcg_reclaim_end", "btf_memcg_reclaim_end"},
    {BpfProgram::DirectReclaimBegin, AttachKind::RawTp, "mm_vmscan_direct_reclaim_begin", "raw_direct_reclaim_begin"},
    {BpfProgram::DirectReclaimBegin, AttachKind::TpBtf, "mm_vmscan_direct_reclaim_begin", "btf_direct_reclaim_begin"},
    {BpfProgram::DirectReclaimEnd, AttachKind::RawTp, "mm_vmscan_direct_reclaim_end", "raw_direct_reclaim_end"},
    {BpfProgram::DirectReclaimEnd, AttachKind::TpBtf, "mm_vmscan_direct_reclaim_end", "btf_direct_reclaim_end"},
    {BpfProgram::KswapdWakeup, AttachKind::RawTp, "mm_vmscan_wakeup_kswapd", "raw_kswapd_wakeup"},
    {BpfProgram::KswapdWakeup, AttachKind::TpBtf, "mm_vmscan_wakeup_kswapd", "btf_kswapd_wakeup"},
    {BpfProgram::OomVictim, AttachKind::RawTp, "mark_victim", "raw_mark_victim"},
    {BpfProgram::OomVictim, AttachKind::TpBtf, "mark_victim", "btf_mark_victim"},
    {BpfProgram::CgroupMkdir, AttachKind::RawTp, "cgroup_mkdir", "raw_cgroup_mkdir"},
    {BpfProgram::CgroupMkdir, AttachKind::TpBtf, "cgroup_mkdir", "btf_cgroup_mkdir"},
    {BpfProgram::CgroupRmdir, AttachKind::RawTp, "cgroup_rmdir", "raw_cgroup_rmdir"},
    {BpfProgram::CgroupRmdir, AttachKind::TpBtf, "cgroup_rmdir", "btf_cgroup_rmdir"},
    {BpfProgram::CgroupPopulated, AttachKind::RawTp, "cgroup_notify_populated", "raw_cgroup_populated"},
    {BpfProgram::CgroupPopulated, AttachKind::TpBtf, "cgroup_notify_populated", "btf_cgroup_populated"},
    {BpfProgram::TaskFork, AttachKind::RawTp, "sched_process_fork", "raw_task_fork"},
    {BpfProgram::TaskFork, AttachKind::TpBtf, "sched_process_fork", "btf_task_fork"},
    {BpfProgram::TaskFree, AttachKind::RawTp, "sched_process_free", "raw_task_free"},
    {BpfProgram::TaskFree, AttachKind::TpBtf, "sched_process_free", "btf_task_free"},
    // Per-memcg reclaim scan/steal: the 6.14+ tracepoint, then the out-of-line
    // counter function older kernels have (same arguments).
    {BpfProgram::MemcgReclaimStats, AttachKind::TpBtf, "count_memcg_events", "btf_memcg_events"},
    {BpfProgram::MemcgReclaimStats, AttachKind::RawTp, "count_memcg_events", "raw_memcg_events"},
    {BpfProgram::MemcgReclaimStats, AttachKind::Fentry, "__count_memcg_events", "fentry_memcg_events", 3},
    {BpfProgram::MemcgReclaimStats, AttachKind::Kprobe, "__count_memcg_events", "kprobe_memcg_events", 3},
    // Refaults are node_stat_item updates on the memcg stat tracepoint: the
    // charge hook's own programs count them (no second program on that hot
    // tracepoint). BpfEventSource marks this one attached only when the charge
    // hook runs the same program.
    {BpfProgram::WorkingsetRefault, AttachKind::TpBtf, "mod_memcg_lruvec_state", "btf_memcg_lruvec"},
    {BpfProgram::WorkingsetRefault, AttachKind::RawTp, "mod_memcg_lruvec_state", "raw_memcg_lruvec"},
    // Memstalls: no tracepoint exists; fentry, then kprobe.
    {BpfProgram::MemstallEnter, AttachKind::Fentry, "psi_memstall_enter", "fentry_memstall_enter"},
    {BpfProgram::MemstallEnter, AttachKind::Kprobe, "psi_memstall_enter", "kprobe_memstall_enter"},
    {BpfProgram::MemstallLeave, AttachKind::Fentry, "psi_memstall_leave", "fentry_memstall_leave"},
    {BpfProgram::MemstallLeave, AttachKind::Kprobe, "psi_memstall_leave", "kprobe_memstall_leave"},
};

bool is_tracepoint_kind(AttachKind k) {
  return k == AttachKind::TpBtf || k == AttachKind::RawTp || k == AttachKind::Tracepoint;
}

}  // namespace

std::vector<AttachCandidate> attach_chain(BpfProgram p) {
  std::vector<AttachCandidate> out;
  for (const auto& e : kChains) {
    if (e.program == p) out.push_back({e.kind, std::string(e.target), e.arity});
  }
  return out;
}

namespace bpf {
std::string_view program_for(BpfProgram p, AttachKind kind, std::string_view target) {
  for (const auto& e : kChains) {
    if (e.program == p && e.kind == kind && e.target == target) return e.skel_program;
  }
  return {};
}

void pair_choices(AttachChoice& a, AttachChoice& b) {
  if ((a.kind == AttachKind::Off) == (b.kind == AttachKind::Off)) return;
  auto& on = a.kind == AttachKind::Off ? b : a;
  const auto& off = a.kind == AttachKind::Off ? a : b;
  on.kind = AttachKind::Off;
  on.target.clear();
  on.reason = "its pair is off (" + off.reason + ")";
}
}  // namespace bpf

namespace {
const bpf::AttachRefusal* attach_refusal(const std::vector<bpf::AttachRefusal>& refused, BpfProgram p,
                                         const AttachCandidate& c) {
  for (const auto& r : refused) {
    if (r.program == p && r.kind == c.kind && r.target == c.target) return &r;
  }
  return nullptr;
}

AttachChoice choose_one(BpfProgram p, const std::vector<AttachCandidate>& chain, const BpfFeatures& features,
                        const bpf::ProgramLoadProbe* load, std::vector<bpf::LoadRefusal>* refusals,
                        const std::vector<bpf::AttachRefusal>& attach_refused) {
  AttachChoice choice;
  std::string refused;
  auto add_refusal = [&refused](const AttachCandidate& c, const std::string& why) {
    if (!refused.empty()) refused += "; ";
    refused += std::string(name(c.kind)) + " " + c.target + ": " + why;
  };
  if (!features.bpf_available()) {
    choice.reason = "BPF unavailable";
    return choice;
  }
  for (const auto& c : chain) {
    std::string btf_name = is_tracepoint_kind(c.kind) ? "btf_trace_" + c.target : c.target;
    if (!features.has_btf_type(btf_name)) {
      add_refusal(c, "not in kernel BTF (" + btf_name + ")");
      continue;
    }
    if (c.arity >= 0 && !is_tracepoint_kind(c.kind)) {
      int have = features.function_arity(c.target);
      if (have >= 0 && have != c.arity) {
        add_refusal(c, "signature differs (" + std::to_string(have) + " parameters, the handler reads " +
                           std::to_string(c.arity) + ")");
        continue;
      }
    }
    std::string why;
    if (!features.can_attach(c.kind, c.target, &why)) {
      add_refusal(c, why.empty() ? "attach refused" : why);
      continue;
    }
    if (const auto* r = attach_refusal(attach_refused, p, c)) {
      add_refusal(c, "attach failed: " + r->why);
      continue;
    }
    if (load && !load->can_load(p, c, &why)) {
      if (why.empty()) why = "refused";
      add_refusal(c, "program refused at load: " + why);
      if (refusals) refusals->push_back({p, c.kind, c.target, why});
      continue;
    }
    choice.kind = c.kind;
    choice.target = c.target;
    choice.reason = std::string(name(c.kind)) + " " + c.target;
    if (!refused.empty()) choice.reason += " (fallback; " + refused + ")";
    return choice;
  }
  choice.reason = chain.empty() ? "no candidates" : "every candidate refused: " + refused;
  return choice;
}
}  // namespace

AttachChoice choose_attach(const std::vector<AttachCandidate>& chain, const BpfFeatures& features) {
  return choose_one(BpfProgram::MemcgCharge, chain, features, nullptr, nullptr, {});
}

namespace bpf {
Selection select_programs(const BpfFeatures& features, const ProgramLoadProbe* load,
                          const std::vector<AttachRefusal>& attach_refused) {
  Selection s;
  for (std::size_t i = 0; i < kBpfProgramCount; ++i) {
    auto p = static_cast<BpfProgram>(i);
    s.choices[i] = choose_one(p, attach_chain(p), features, load, &s.load_refusals, attach_refused);
  }
  // Memstalls are timed from enter to leave: one without the other is useless.
  pair_choices(s.choices[static_cast<std::size_t>(BpfProgram::MemstallEnter)],
               s.choices[static_cast<std::size_t>(BpfProgram::MemstallLeave)]);
  // An operator reads the reason of an off program first in a 128-character
  // metric label: when the sysctl is why, it comes first.
  for (auto& c : s.choices) {
    if (c.kind == AttachKind::Off) c.reason = lead_with_perf_paranoid(std::move(c.reason));
  }
  return s;
}
}  // namespace bpf

}  // namespace pressured
