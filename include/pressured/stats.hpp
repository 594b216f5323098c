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
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace pressured {

/// How a stat or a family is exported: a Prometheus counter (only grows),
/// gauge (a value set anew) or histogram (observations into fixed buckets).
enum class StatKind : uint8_t { Counter, Gauge, Histogram };

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
/// in _total, a gauge's or a histogram's does not.
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

// --- Families whose label values come at the call -----------------------------

/// How the values one label is given at the calls stay bounded: label values
/// that come from other concerns (program names, container names, reasons)
/// must not grow a series without bound, nor a line without end.
struct LabelDef {
  enum class Form : uint8_t {
    Fixed,  // a value of a fixed set (an enum's name, "success"): taken as given
    Token,  // an identifier: lowercased, other characters '_', at most 48 ("unknown" when empty)
    Text,   // free text: its first max_length bytes
  };
  std::string_view name;
  Form form = Form::Fixed;
  uint16_t max_length = 0;     // Token: 48; Text: the bytes kept
  uint16_t max_values = 0;     // > 0: that many distinct values get a series, later ones count as `overflow`
  std::string_view overflow;

  /// The same label with at most `n` distinct values; later ones are
  /// counted under `other`.
  constexpr LabelDef capped(uint16_t n, std::string_view other) const {
    LabelDef l = *this;
    l.max_values = n;
    l.overflow = other;
    return l;
  }
};

/// A label whose values come from a fixed set.
constexpr LabelDef label(std::string_view name) { return {name}; }
/// A label whose values are identifiers from another concern.
constexpr LabelDef token_label(std::string_view name) { return {name, LabelDef::Form::Token, 48}; }
/// A label whose values are free text, cut at `max_length` bytes.
constexpr LabelDef text_label(std::string_view name, uint16_t max_length) {
  return {name, LabelDef::Form::Text, max_length};
}

/// A family has at most this many labels (besides the constant `node`).
inline constexpr std::size_t kMaxFamilyLabels = 6;

/// A declared family, kind-erased: what Metrics registers.
struct FamilyInfo {
  StatKind kind = StatKind::Counter;
  uint16_t index = 0;
  std::string_view name;
  std::string_view help;
  std::span<const LabelDef> labels;
  std::span<const double> buckets;  // a histogram's upper bounds; empty: given at run time
};

/// A family declared with PRESSURED_DECLARE_FAMILIES. Its type carries its
/// kind and its number of labels, so a count into a gauge, or a call with
/// one label value too few, does not compile.
template <StatKind K, std::size_t N>
struct FamilyDef {
  static_assert(N <= kMaxFamilyLabels);
  uint16_t index = 0;  // its place in the declaration list, the order Metrics registers it in
  std::string_view name;
  std::string_view help;
  std::array<LabelDef, N> labels{};
  std::span<const double> buckets;
  constexpr FamilyInfo info() const { return {K, index, name, help, labels, buckets}; }
};

template <typename... L>
constexpr std::array<LabelDef, sizeof...(L)> family_labels(L... l) {
  return {LabelDef(l)...};
}

/// Whether a family's declaration is sound: named as its kind wants, label
/// names distinct and valid, a histogram's buckets increasing.
template <StatKind K, std::size_t N>
constexpr bool family_fits(std::string_view name, const std::array<LabelDef, N>& labels,
                           std::span<const double> buckets) {
  if (!name.starts_with("pressured_") || !stat_name_fits(K, name)) return false;
  for (std::size_t i = 0; i < N; ++i) {
    const auto n = labels[i].name;
    if (n.empty() || n == "node" || n == "le" || n.starts_with("__")) return false;
    for (char c : n) {
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
    }
    if (labels[i].form == LabelDef::Form::Text && labels[i].max_length == 0) return false;
    if (labels[i].max_values > 0 && labels[i].overflow.empty()) return false;
    for (std::size_t j = 0; j < i; ++j) {
      if (labels[j].name == n) return false;
    }
  }
  if (K != StatKind::Histogram && !buckets.empty()) return false;
  for (std::size_t i = 1; i < buckets.size(); ++i) {
    if (!(buckets[i - 1] < buckets[i])) return false;
  }
  return true;
}

template <StatKind K, std::size_t N>
constexpr FamilyDef<K, N> declare_family(uint16_t index, std::string_view name, std::string_view help,
                                         std::span<const double> buckets, std::array<LabelDef, N> labels) {
  return {index, name, help, labels, buckets};
}

/// What may be a label value: text, or an enum with a name() (Signal,
/// QosClass, ThresholdKind, ...), which gives the value.
template <typename V>
concept LabelValue = std::is_convertible_v<const V&, std::string_view> ||
                     (std::is_enum_v<V> && requires(V v) {
                       { name(v) } -> std::convertible_to<std::string_view>;
                     });

/// The label values of one call, in the order the family declares its
/// labels: exactly N of them.
template <std::size_t N>
struct LabelValues {
  std::array<std::string_view, N> values{};
  template <LabelValue... V>
    requires(sizeof...(V) == N)
  constexpr LabelValues(const V&... v) : values{label_value(v)...} {}  // NOLINT: implicit, for `{a, b}` at the call

 private:
  template <LabelValue V>
  static constexpr std::string_view label_value(const V& v) {
    if constexpr (std::is_convertible_v<const V&, std::string_view>) {
      return v;
    } else {
      return name(v);
    }
  }
};

}  // namespace pressured

#define PRESSURED_FAMILY_INDEX_(id, ...) id,
#define PRESSURED_FAMILY_INFO_(id, ...) id.info(),
#define PRESSURED_FAMILY_DEF_(kind, id, metric, help, bucket_list, ...)                                                 \
  inline constexpr auto id = ::pressured::declare_family<kind>(static_cast<uint16_t>(FamilyIndex::id), metric, help, \
                                                               bucket_list, ::pressured::family_labels(__VA_ARGS__));  \
  static_assert(::pressured::family_fits<kind>(id.name, id.labels, id.buckets),                                     \
                metric ": a counter's name ends in _total, a gauge's or a histogram's does not; labels are "       \
                       "distinct [a-z0-9_] names (not node or le); buckets increase");
#define PRESSURED_FAMILY_COUNTER_(id, metric, help, ...) \
  PRESSURED_FAMILY_DEF_(::pressured::StatKind::Counter, id, metric, help, {}, __VA_ARGS__)
#define PRESSURED_FAMILY_GAUGE_(id, metric, help, ...) \
  PRESSURED_FAMILY_DEF_(::pressured::StatKind::Gauge, id, metric, help, {}, __VA_ARGS__)
#define PRESSURED_FAMILY_HISTOGRAM_(id, metric, help, bucket_list, ...) \
  PRESSURED_FAMILY_DEF_(::pressured::StatKind::Histogram, id, metric, help, bucket_list, __VA_ARGS__)

/// Declares, in the enclosing namespace, one `inline constexpr` FamilyDef per
/// COUNTER(id, name, help, labels...), GAUGE(id, name, help, labels...) and
/// HISTOGRAM(id, name, help, buckets, labels...) of LIST, each label a
/// label(), token_label() or text_label() (optionally .capped(n, "other"));
/// `kFamilies`, every family's FamilyInfo in the list's order; and
/// `kFamilyCount`.
#define PRESSURED_DECLARE_FAMILIES(LIST)                                                                        \
  enum class FamilyIndex : uint16_t { LIST(PRESSURED_FAMILY_INDEX_, PRESSURED_FAMILY_INDEX_, PRESSURED_FAMILY_INDEX_) \
                                          Count_ };                                                             \
  inline constexpr std::size_t kFamilyCount = static_cast<std::size_t>(FamilyIndex::Count_);                    \
  LIST(PRESSURED_FAMILY_COUNTER_, PRESSURED_FAMILY_GAUGE_, PRESSURED_FAMILY_HISTOGRAM_)                         \
  inline constexpr std::array<::pressured::FamilyInfo, kFamilyCount> kFamilies{                                 \
      LIST(PRESSURED_FAMILY_INFO_, PRESSURED_FAMILY_INFO_, PRESSURED_FAMILY_INFO_)}

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
