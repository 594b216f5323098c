// Host (root): the prober's kernel BTF is freed before libbpf parses its own
// copy to load the object, and read again when asked after that.
#include <atomic>
#include <string>

#include <gtest/gtest.h>

#include "bpf/bpf_events.hpp"
#include "bpf/features.hpp"
#include "fakes/privilege.hpp"
#include "pressured/events.hpp"

namespace pressured {
namespace {

// The real prober; records each release and each BTF question after one.
class CountingFeatures final : public BpfFeatures {
 public:
  explicit CountingFeatures(const BpfFeatures& real) : real_(real) {}
  bool bpf_available() const override { return real_.bpf_available(); }
  bool has_btf_type(std::string_view n) const override { return asked(real_.has_btf_type(n)); }
  bool can_attach(AttachKind k, std::string_view t, std::string* why) const override {
    return real_.can_attach(k, t, why);
  }
  int tracepoint_arity(std::string_view tp) const override { return asked(real_.tracepoint_arity(tp)); }
  int function_arity(std::string_view fn) const override { return asked(real_.function_arity(fn)); }
  bool has_atomics() const override { return real_.has_atomics(); }
  void release_kernel_btf() const override {
    ++releases;
    real_.release_kernel_btf();
  }

  mutable std::atomic<int> releases{0};
  mutable std::atomic<int> asked_after_release{0};

 private:
  template <typename T>
  T asked(T v) const {
    if (releases > 0) ++asked_after_release;
    return v;
  }
  const BpfFeatures& real_;
};

TEST(KernelBpfFeaturesHost, ReleasedBtfIsReadAgain) {
  PRESSURED_REQUIRE_ROOT();
  auto f = make_kernel_bpf_features();
  PRESSURED_REQUIRE(f->has_btf_type("btf_trace_mark_victim"), "kernel BTF with btf_trace_mark_victim");
  const int arity = f->tracepoint_arity("mark_victim");
  ASSERT_GE(arity, 1);
  f->release_kernel_btf();
  EXPECT_TRUE(f->has_btf_type("btf_trace_mark_victim"));
  f->release_kernel_btf();
  EXPECT_EQ(f->tracepoint_arity("mark_victim"), arity);
  f->release_kernel_btf();
  f->release_kernel_btf();  // twice in a row: nothing held, nothing freed
  std::string why;
  EXPECT_TRUE(f->can_attach(AttachKind::TpBtf, "mark_victim", &why)) << why;
  EXPECT_FALSE(f->can_attach(AttachKind::TpBtf, "no_such_tracepoint_xyz", &why));
  EXPECT_EQ(why, "not in BTF");
}

// Every choice that needs the BTF is made before the object loads; where
// every chosen program loads, nothing asks for it afterwards.
TEST(KernelBpfFeaturesHost, BtfReleasedBeforeTheObjectLoads) {
  PRESSURED_REQUIRE_ROOT();
  auto real = make_kernel_bpf_features();
  PRESSURED_REQUIRE(real->bpf_available(), "BPF");
  CountingFeatures features(*real);
  EventStats stats;
  bpf::BpfEventsOptions o;
  auto src = bpf::BpfEventSource::create(o, features, stats);
  ASSERT_TRUE(src) << src.error().message;
  PRESSURED_REQUIRE(stats.load_refusals().empty(), "a kernel where every chosen program loads at once");
  EXPECT_EQ(features.releases.load(), 1);
  EXPECT_EQ(features.asked_after_release.load(), 0);
}

}  // namespace
}  // namespace pressured
