#pragma once
// A component's stats, declared once. The component lists them in one
// X-macro, each with its member name, the Prometheus series it is exported as
// (family name and constant labels) and the help text; the struct of plain
// atomics, a snapshot of plain values and the export table are all generated
// from that list, so a stat cannot exist without a documented series, nor a
// series without the stat behind it (the shape of Envoy's stats_macros.h).
// Two kinds: a COUNTER only grows (its family ends in _total); a GAUGE is a
// value set anew, e.g. a count in the last observation (no _total):
//
//   #define PRESSURED_FOO_STATS(COUNTER, GAUGE)   (each line ending in a backslash)
//     COUNTER(widgets_made, "pressured_foo_widgets_total", "", "Widgets made.")
//     COUNTER(widgets_lost, "pressured_foo_failures_total", "what=widget", "Widgets lost.")
//     GAUGE(widgets_queued, "pressured_foo_widgets_queued", "", "Widgets waiting, now.")
//   PRESSURED_DECLARE_STATS(FooStats, PRESSURED_FOO_STATS);
//
// The component bumps or sets the atomics on its own path
// (`++stats_.widgets_made`, `stats_.widgets_queued = n`: no lock, no
// allocation, no metrics library), so it runs the same with or without a
// Metrics: a test or a tool that builds it without one gets a standalone
// struct (the null form); `values()` copies it into plain numbers
// (`FooStats::Values`). Where there is a Metrics,
// `export_stats(metrics, stats)` (pressured/metrics.hpp) registers every stat
// of the list and copies the values in at each scrape.
//
// Labels are "key=value" pairs separated by commas; several stats may share
// a family with different label values. A family that Metrics already serves
// keeps its own help text. Series whose label values come from an enum's name
// table rather than from the list (the reactor's events by source and type)
// are added by a `void extra_stats(std::vector<ExternalStat>&) const` member,
// which export_stats calls when the struct has one.

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pressured {

/// How a stat is exported: a Prometheus counter (only grows) or gauge.
enum class StatKind : uint8_t { Counter, Gauge };

/// One stat of a stats struct and the series it is exported as.
template <typename Stats>
struct StatDef {
  std::atomic<uint64_t> Stats::*member;
  StatKind kind;
  std::string_view field;   // the member's name, for messages
  std::string_view metric;  // pressured_* family name (_total for a counter, never for a gauge)
  std::string_view labels;  // constant labels, "key=value,key=value"; empty: none
  std::string_view help;
};

/// Whether a family name fits its kind (Prometheus naming): a counter's ends
/// in _total, a gauge's does not.
constexpr bool stat_name_fits(StatKind kind, std::string_view metric) {
  return metric.ends_with("_total") == (kind == StatKind::Counter);
}

/// What Metrics needs of one stat kept outside it: the series, its kind and
/// where to read its value.
struct ExternalStat {
  std::string_view metric;
  std::string labels;  // "key=value,key=value"; copied at export
  std::string_view help;
  const std::atomic<uint64_t>* value = nullptr;
  StatKind kind = StatKind::Counter;
  /// A counter whose series appears with its first count rather than at 0
  /// from the export on: for label sets most of which never occur on a node
  /// (an event source and a type it never sends).
  bool from_first_count = false;
};

/// Every stat of a PRESSURED_DECLARE_STATS struct (plus its extra_stats()
/// when it has one) as Metrics registers them: what export_stats exports,
/// and what a component behind an interface hands on for export without
/// knowing Metrics (e.g. PodMetadataSource::exported_stats).
template <typename Stats>
std::vector<ExternalStat> stat_list(const Stats& stats) {
  constexpr auto defs = Stats::defs();
  std::vector<ExternalStat> out;
  out.reserve(defs.size());
  for (const auto& d : defs) out.push_back({d.metric, std::string(d.labels), d.help, &(stats.*(d.member)), d.kind});
  if constexpr (requires(std::vector<ExternalStat>& v) { stats.extra_stats(v); }) stats.extra_stats(out);
  return out;
}

}  // namespace pressured

#define PRESSURED_STAT_FIELD_(member, metric, labels, help) std::atomic<uint64_t> member{0};
#define PRESSURED_STAT_VALUE_(member, metric, labels, help) uint64_t member = 0;
#define PRESSURED_STAT_LOAD_(member, metric, labels, help) member.load(std::memory_order_relaxed),
#define PRESSURED_STAT_COUNTER_DEF_(member, metric, labels, help) \
  ::pressured::StatDef<StatsSelf_>{&StatsSelf_::member, ::pressured::StatKind::Counter, #member, metric, labels, help},
#define PRESSURED_STAT_GAUGE_DEF_(member, metric, labels, help) \
  ::pressured::StatDef<StatsSelf_>{&StatsSelf_::member, ::pressured::StatKind::Gauge, #member, metric, labels, help},

/// Declares `struct Name` with one std::atomic<uint64_t> per COUNTER and
/// GAUGE of LIST; `Name::defs()`, the export table in the list's order; and
/// `Name::Values`, the same members as plain numbers, filled by values().
#define PRESSURED_DECLARE_STATS(Name, LIST)                                                               \
  struct Name {                                                                                           \
    LIST(PRESSURED_STAT_FIELD_, PRESSURED_STAT_FIELD_)                                                    \
    using StatsSelf_ = Name;                                                                              \
    static constexpr auto defs() {                                                                        \
      return std::array{LIST(PRESSURED_STAT_COUNTER_DEF_, PRESSURED_STAT_GAUGE_DEF_)};                    \
    }                                                                                                     \
    struct Values {                                                                                       \
      LIST(PRESSURED_STAT_VALUE_, PRESSURED_STAT_VALUE_)                                                  \
    };                                                                                                    \
    /** Every stat's value now (each read on its own, not one atomic snapshot). */                        \
    Values values() const { return Values{LIST(PRESSURED_STAT_LOAD_, PRESSURED_STAT_LOAD_)}; }            \
  }
