// Every enum that pressured names (logs, metric labels, configuration) has one
// table giving both its names and its parse; each value must have exactly one
// name, distinct from the others, and parse back to itself.
#include "pressured/enum_names.hpp"

#include <initializer_list>
#include <set>
#include <vector>
#include <string_view>

#include <gtest/gtest.h>

#include "pressured/config.hpp"
#include "pressured/events.hpp"
#include "pressured/metrics.hpp"
#include "pressured/observer.hpp"
#include "pressured/signals.hpp"

namespace pressured {
namespace {

// `values` lists every enumerator (by its underlying value); the table must
// name each exactly once, with a distinct non-empty name that parses back.
template <typename E, std::size_t N>
void expect_one_name_each(const EnumName<E> (&table)[N], const std::vector<int>& values, const char* what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(N, values.size()) << "the table and the enum differ in length";
  std::set<std::string_view> names;
  for (int i : values) {
    const E v = static_cast<E>(i);
    int found = 0;
    for (const auto& e : table) found += e.value == v ? 1 : 0;
    EXPECT_EQ(found, 1) << "value " << i << " is in the table " << found << " times";
    const std::string_view n = enum_name(table, v, "");
    EXPECT_FALSE(n.empty()) << "value " << i << " has no name";
    EXPECT_TRUE(names.insert(n).second) << "name '" << n << "' used twice";
    auto back = enum_parse(table, n);
    ASSERT_TRUE(back.has_value()) << n;
    EXPECT_EQ(static_cast<int>(*back), i) << n;
  }
  EXPECT_FALSE(enum_parse(table, "no-such-name").has_value());
}

// For enums numbered 0..count-1.
template <typename E, std::size_t N>
void expect_one_name_each(const EnumName<E> (&table)[N], std::size_t count, const char* what) {
  std::vector<int> values;
  for (std::size_t i = 0; i < count; ++i) values.push_back(static_cast<int>(i));
  expect_one_name_each(table, values, what);
}

template <typename E>
std::size_t after(E last) {
  return static_cast<std::size_t>(last) + 1;
}

TEST(EnumNames, EveryValueHasOneDistinctNameThatParsesBack) {
  expect_one_name_each(kEventSourceNames, kEventSourceCount, "EventSource");
  expect_one_name_each(kBpfProgramNames, kBpfProgramCount, "BpfProgram");
  expect_one_name_each(kAttachKindNames, after(AttachKind::Tracepoint), "AttachKind");
  expect_one_name_each(kConditionNames, kConditionCount, "Condition");
  expect_one_name_each(kQosClassNames, after(QosClass::Guaranteed), "QosClass");
  expect_one_name_each(kApiActionNames, after(ApiAction::NodeEvent), "ApiAction");
  expect_one_name_each(kApiOutcomeNames, after(ApiOutcome::Unreachable), "ApiOutcome");
  expect_one_name_each(kCgroupVersionNames, after(CgroupVersion::Hybrid), "CgroupVersion");
  expect_one_name_each(kCgroupDriverNames, after(CgroupDriver::Systemd), "CgroupDriver");
  // EventType's values follow the BPF header's PRESSURED_EV_* numbers, with gaps.
  expect_one_name_each(kEventTypeNames, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 32, 33, 34, 35, 36, 48, 49},
                       "EventType");
}

TEST(EnumNames, TheSpellingsOperatorsAlreadySeeAreKept) {
  // Logs, metric labels and configurations already use these.
  EXPECT_EQ(enum_name(kEventTypeNames, EventType::MemoryEventOomKill), "memory_event_oom_kill");
  EXPECT_EQ(enum_name(kEventSourceNames, EventSource::MemcgV1Threshold), "memcg_v1_threshold");
  EXPECT_EQ(enum_name(kBpfProgramNames, BpfProgram::WorkingsetRefault), "workingset_refault");
  EXPECT_EQ(enum_name(kAttachKindNames, AttachKind::TpBtf), "tp_btf");
  EXPECT_EQ(enum_name(kApiActionNames, ApiAction::NodeStatus), "node_status");
  EXPECT_EQ(enum_name(kApiOutcomeNames, ApiOutcome::TooManyRequests), "too_many_requests");
  EXPECT_EQ(enum_name(kCgroupVersionNames, CgroupVersion::Hybrid), "hybrid");
  EXPECT_EQ(name(Condition::PIDPressure), "PIDPressure");
  EXPECT_EQ(name(QosClass::BestEffort), "BestEffort");
  EXPECT_EQ(parse_qos("Burstable"), QosClass::Burstable);
  EXPECT_FALSE(parse_qos("burstable").has_value());
  EXPECT_EQ(enum_parse(kCgroupDriverNames, "systemd"), CgroupDriver::Systemd);
  EXPECT_EQ(enum_name(kEventTypeNames, static_cast<EventType>(200)), "unknown");
}

}  // namespace
}  // namespace pressured
