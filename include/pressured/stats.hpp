#pragma once
// A component's counters, declared once. The component lists them in one
// X-macro, each with its member name, the Prometheus series it is exported as
// (family name and constant labels) and the help text; the struct of plain
// atomics and the export table are both generated from that list, so a
// counter cannot exist without a documented series, nor a series without
// the counter behind it (the shape of Envoy's stats_macros.h):
//
//   #define PRESSURED_FOO_STATS(COUNTER)   (each line ending in a backslash)
//     COUNTER(widgets_made, "pressured_foo_widgets_total", "", "Widgets made.")
//     COUNTER(widgets_lost, "pressured_foo_failures_total", "what=widget", "Widgets lost.")
//   PRESSURED_DECLARE_STATS(FooStats, PRESSURED_FOO_STATS);
//
// The component bumps the atomics on its own path (`++stats_.widgets_made`:
// no lock, no allocation, no metrics library), so it runs the same with or
// without a Metrics: a test or a tool that builds it without one gets a
// standalone struct (the null form). Where there is a Metrics,
// `export_stats(metrics, stats)` (pressured/metrics.hpp) registers every
// counter of the list and copies the totals in at each scrape.
//
// Labels are "key=value" pairs separated by commas; several counters may
// share a family with different label values. A family that Metrics already
// serves keeps its own help text.

#include <array>
#include <atomic>
#include <cstdint>
#include <string_view>

namespace pressured {

/// One counter of a stats struct and the series it is exported as.
template <typename Stats>
struct StatDef {
  std::atomic<uint64_t> Stats::*member;
  std::string_view field;   // the member's name, for messages
  std::string_view metric;  // pressured_* family name (a counter, so ending in _total)
  std::string_view labels;  // constant labels, "key=value,key=value"; empty: none
  std::string_view help;
};

/// What Metrics needs of one counter kept outside it: the series and where
/// to read its running total.
struct ExternalCounter {
  std::string_view metric;
  std::string_view labels;
  std::string_view help;
  const std::atomic<uint64_t>* value = nullptr;
};

}  // namespace pressured

#define PRESSURED_STAT_FIELD_(member, metric, labels, help) std::atomic<uint64_t> member{0};
#define PRESSURED_STAT_DEF_(member, metric, labels, help) \
  ::pressured::StatDef<StatsSelf_>{&StatsSelf_::member, #member, metric, labels, help},

/// Declares `struct Name` with one std::atomic<uint64_t> per COUNTER of
/// LIST, and `Name::defs()`, the export table in the list's order.
#define PRESSURED_DECLARE_STATS(Name, LIST)                                      \
  struct Name {                                                                  \
    LIST(PRESSURED_STAT_FIELD_)                                                  \
    using StatsSelf_ = Name;                                                     \
    static constexpr auto defs() { return std::array{LIST(PRESSURED_STAT_DEF_)}; } \
  }
