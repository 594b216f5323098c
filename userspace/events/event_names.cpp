// Names of event enums and the EventStats helpers.
#include <algorithm>

#include "pressured/events.hpp"

namespace pressured {

std::string_view name(EventSource s) {
  switch (s) {
    case EventSource::Bpf: return "bpf";
    case EventSource::Psi: return "psi";
    case EventSource::MemcgV1Threshold: return "memcg_v1_threshold";
    case EventSource::MemoryEventsV2: return "memory_events_v2";
    case EventSource::Timer: return "timer";
    case EventSource::Resync: return "resync";
  }
  return "unknown";
}

std::string_view name(EventType t) {
  switch (t) {
    case EventType::ThresholdUp: return "threshold_up";
    case EventType::ThresholdDown: return "threshold_down";
    case EventType::MemcgReclaimBegin: return "memcg_reclaim_begin";
    case EventType::MemcgReclaimEnd: return "memcg_reclaim_end";
    case EventType::DirectReclaimBegin: return "direct_reclaim_begin";
    case EventType::DirectReclaimEnd: return "direct_reclaim_end";
    case EventType::KswapdWakeup: return "kswapd_wakeup";
    case EventType::OomVictim: return "oom_victim";
    case EventType::CgroupMkdir: return "cgroup_mkdir";
    case EventType::CgroupRmdir: return "cgroup_rmdir";
    case EventType::CgroupPopulated: return "cgroup_populated";
    case EventType::PidAlarmUp: return "pid_alarm_up";
    case EventType::PidAlarmDown: return "pid_alarm_down";
    case EventType::Memstall: return "memstall";
    case EventType::PsiTrigger: return "psi_trigger";
    case EventType::MemoryEventHigh: return "memory_event_high";
    case EventType::MemoryEventMax: return "memory_event_max";
    case EventType::MemoryEventOom: return "memory_event_oom";
    case EventType::MemoryEventOomKill: return "memory_event_oom_kill";
    case EventType::RingBufferOverflow: return "ring_buffer_overflow";
    case EventType::Resync: return "resync";
  }
  return "unknown";
}

std::string_view name(BpfProgram p) {
  switch (p) {
    case BpfProgram::MemcgCharge: return "memcg_charge";
    case BpfProgram::MemcgReclaimBegin: return "memcg_reclaim_begin";
    case BpfProgram::MemcgReclaimEnd: return "memcg_reclaim_end";
    case BpfProgram::DirectReclaimBegin: return "direct_reclaim_begin";
    case BpfProgram::DirectReclaimEnd: return "direct_reclaim_end";
    case BpfProgram::KswapdWakeup: return "kswapd_wakeup";
    case BpfProgram::OomVictim: return "oom_victim";
    case BpfProgram::CgroupMkdir: return "cgroup_mkdir";
    case BpfProgram::CgroupRmdir: return "cgroup_rmdir";
    case BpfProgram::CgroupPopulated: return "cgroup_populated";
    case BpfProgram::TaskFork: return "task_fork";
    case BpfProgram::TaskFree: return "task_free";
    case BpfProgram::MemcgReclaimStats: return "memcg_reclaim_stats";
    case BpfProgram::WorkingsetRefault: return "workingset_refault";
    case BpfProgram::MemstallEnter: return "memstall_enter";
    case BpfProgram::MemstallLeave: return "memstall_leave";
  }
  return "unknown";
}

std::string_view name(AttachKind k) {
  switch (k) {
    case AttachKind::Off: return "off";
    case AttachKind::TpBtf: return "tp_btf";
    case AttachKind::RawTp: return "raw_tp";
    case AttachKind::Fentry: return "fentry";
    case AttachKind::Kprobe: return "kprobe";
    case AttachKind::Tracepoint: return "tracepoint";
  }
  return "unknown";
}

void EventStats::set_attach(BpfProgram p, AttachKind k, std::string reason) {
  auto i = static_cast<std::size_t>(p);
  std::lock_guard lock(mu_);
  attach[i].store(static_cast<uint8_t>(k));
  reasons_[i] = std::move(reason);
}

std::string EventStats::attach_reason(BpfProgram p) const {
  std::lock_guard lock(mu_);
  return reasons_[static_cast<std::size_t>(p)];
}

void EventStats::add_load_refusal(BpfProgram p, AttachKind k, std::string target, std::string why) {
  std::lock_guard lock(mu_);
  load_refusals_.push_back({p, k, std::move(target), std::move(why)});
}

std::vector<EventStats::LoadRefusal> EventStats::load_refusals() const {
  std::lock_guard lock(mu_);
  return load_refusals_;
}

void EventStats::set_bpf_status(std::string s) {
  std::lock_guard lock(mu_);
  bpf_status_ = std::move(s);
}

std::string EventStats::bpf_status() const {
  std::lock_guard lock(mu_);
  return bpf_status_;
}

void EventStats::record_latency(Duration d) {
  int64_t ns = std::max<int64_t>(0, d.count());
  std::size_t b = 0;
  while (b < kLatencyBucketsUs.size() && ns > static_cast<int64_t>(kLatencyBucketsUs[b]) * 1000) ++b;
  latency_buckets[b].fetch_add(1, std::memory_order_relaxed);
  latency_sum_ns.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
  latency_count.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace pressured
