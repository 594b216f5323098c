// Host (root): the tracepoint flavours are not attached to probe them; their
// real attach is the probe. A refused attach makes BpfEventSource load the
// object again with the next flavour of that program's chain, and the other
// programs keep theirs. The refusal is injected (BpfEventsOptions::fail_attach):
// this kernel attaches every flavour it is offered.
#include <string>

#include <gtest/gtest.h>

#include "bpf/bpf_events.hpp"
#include "bpf/features.hpp"
#include "fakes/privilege.hpp"
#include "pressured/events.hpp"

namespace pressured {
namespace {

AttachKind kind_of(const EventStats& s, BpfProgram p) {
  return static_cast<AttachKind>(s.attach[static_cast<std::size_t>(p)].load());
}

std::unique_ptr<BpfFeatures> host_features_with_tp_btf() {
  auto f = make_kernel_bpf_features();
  if (!f->bpf_available() || !f->can_attach(AttachKind::TpBtf, "mark_victim")) return nullptr;
  return f;
}

// The object loaded again after `program`'s flavour `failing` (a skeleton
// program name) failed to attach: `program` runs `expected` with the failure
// in its reason, and every other program keeps its plain choice.
void expect_fallback(BpfFeatures& features, BpfProgram program, const std::string& failing, AttachKind expected,
                     const std::string& reason) {
  EventStats plain_stats;
  {
    auto plain = bpf::BpfEventSource::create(bpf::BpfEventsOptions{}, features, plain_stats);
    ASSERT_TRUE(plain) << plain.error().message;
  }
  ASSERT_NE(kind_of(plain_stats, program), expected) << plain_stats.attach_reason(program);

  EventStats stats;
  bpf::BpfEventsOptions o;
  o.fail_attach = {failing};
  auto src = bpf::BpfEventSource::create(o, features, stats);
  ASSERT_TRUE(src) << src.error().message;
  EXPECT_TRUE((*src)->attached(program));
  EXPECT_EQ(kind_of(stats, program), expected);
  const std::string why = stats.attach_reason(program);
  EXPECT_NE(why.find(reason), std::string::npos) << why;
  EXPECT_TRUE(stats.load_refusals().empty());
  for (std::size_t i = 0; i < kBpfProgramCount; ++i) {
    const auto p = static_cast<BpfProgram>(i);
    if (p == program) continue;
    EXPECT_EQ(kind_of(stats, p), kind_of(plain_stats, p)) << name(p) << ": " << stats.attach_reason(p);
  }
}

// raw_tp first (the lifecycle and reclaim tracepoints): tp_btf is the fallback.
TEST(AttachFallbackHost, AFailedRawTpAttachFallsToTpBtf) {
  PRESSURED_REQUIRE_ROOT();
  auto features = host_features_with_tp_btf();
  PRESSURED_REQUIRE(features, "BPF with tp_btf programs and btf_trace_mark_victim");
  expect_fallback(*features, BpfProgram::OomVictim, "raw_mark_victim", AttachKind::TpBtf,
                  "tp_btf mark_victim (fallback; raw_tp mark_victim: attach failed: Invalid argument)");
}

// tp_btf first (the memcg hooks; here the reclaim stats, whose program the
// charge hook does not share): raw_tp is the fallback.
TEST(AttachFallbackHost, AFailedTpBtfAttachFallsToRawTp) {
  PRESSURED_REQUIRE_ROOT();
  auto features = host_features_with_tp_btf();
  PRESSURED_REQUIRE(features, "BPF with tp_btf programs and btf_trace_mark_victim");
  if (!features->can_attach(AttachKind::TpBtf, "count_memcg_events"))
    GTEST_SKIP() << "NOT APPLICABLE before 6.14: no count_memcg_events tracepoint, so no program here puts tp_btf first";
  expect_fallback(*features, BpfProgram::MemcgReclaimStats, "btf_memcg_events", AttachKind::RawTp,
                  "raw_tp count_memcg_events (fallback; tp_btf count_memcg_events: attach failed: Invalid argument)");
}

TEST(AttachFallbackHost, EveryFlavourFailingToAttachLeavesThatProgramOff) {
  PRESSURED_REQUIRE_ROOT();
  auto features = host_features_with_tp_btf();
  PRESSURED_REQUIRE(features, "BPF with tp_btf programs and btf_trace_mark_victim");
  EventStats stats;
  bpf::BpfEventsOptions o;
  o.fail_attach = {"raw_mark_victim", "btf_mark_victim"};
  auto src = bpf::BpfEventSource::create(o, *features, stats);
  ASSERT_TRUE(src) << src.error().message;
  EXPECT_FALSE((*src)->attached(BpfProgram::OomVictim));
  EXPECT_EQ(kind_of(stats, BpfProgram::OomVictim), AttachKind::Off);
  const std::string why = stats.attach_reason(BpfProgram::OomVictim);
  EXPECT_NE(why.find("attach of tp_btf mark_victim failed after probe: Invalid argument"), std::string::npos) << why;
  EXPECT_NE(why.find("raw_tp mark_victim: attach failed: Invalid argument"), std::string::npos) << why;
  EXPECT_TRUE((*src)->attached(BpfProgram::CgroupMkdir)) << "the others stay attached";
}

}  // namespace
}  // namespace pressured
