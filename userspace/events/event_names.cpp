// Names of event enums and the EventStats helpers.
#include <algorithm>

#include "pressured/events.hpp"

namespace pressured {

// The tables replace switch statements: the sizes stand in for the compiler's
// check that every enumerator has a case (tests/events check the rest).
static_assert(std::size(kEventSourceNames) == kEventSourceCount);
static_assert(std::size(kBpfProgramNames) == kBpfProgramCount);
static_assert(std::size(kAttachKindNames) == static_cast<std::size_t>(AttachKind::Tracepoint) + 1);
// Every named type has its own cell in EventStats::events (no wrap-around
// sharing), so each pressured_events_total series counts one type only.
static_assert([] {
  for (const auto& t : kEventTypeNames) {
    if (static_cast<std::size_t>(t.value) >= kEventTypeCount) return false;
  }
  return true;
}());

std::string_view name(EventSource s) { return enum_name(kEventSourceNames, s); }
std::string_view name(EventType t) { return enum_name(kEventTypeNames, t); }
std::string_view name(BpfProgram p) { return enum_name(kBpfProgramNames, p); }
std::string_view name(AttachKind k) { return enum_name(kAttachKindNames, k); }

void EventStats::extra_stats(std::vector<ExternalStat>& out) const {
  for (const auto& s : kEventSourceNames) {
    for (const auto& t : kEventTypeNames) {
      ExternalStat e;
      e.metric = "pressured_events_total";
      e.labels = "source=" + std::string(s.name) + ",type=" + std::string(t.name);
      e.help = "Kernel events received, by source and type.";
      e.value = &events[static_cast<std::size_t>(s.value)][static_cast<std::size_t>(t.value)];
      e.from_first_count = true;
      out.push_back(std::move(e));
    }
  }
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
