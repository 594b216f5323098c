// KernelBtf, the prober's name index over raw BTF: it must find what libbpf's
// searches find (the lowest id of a name and kind), on BTF written by libbpf
// and on this host's kernel BTF, and refuse what is not BTF with a reason.
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bpf/kernel_btf.hpp"
#include "fakes/privilege.hpp"

namespace pressured {
namespace {

struct BtfDeleter {
  void operator()(struct btf* b) const { btf__free(b); }
};
using BtfPtr = std::unique_ptr<struct btf, BtfDeleter>;

std::string raw_of(const struct btf* b) {
  __u32 size = 0;
  const void* data = btf__raw_data(b, &size);
  return std::string(static_cast<const char*>(data), size);
}

// Every kind this reader walks over, names shared across kinds, a name used
// twice in one kind, and an anonymous type.
BtfPtr sample_btf() {
  BtfPtr b(btf__new_empty());
  const int u32 = btf__add_int(b.get(), "u32", 4, 0);                      // 1
  const int ptr = btf__add_ptr(b.get(), u32);                              // 2
  const int arr = btf__add_array(b.get(), u32, u32, 4);                    // 3
  btf__add_struct(b.get(), "mem_cgroup", 16);                              // 4
  btf__add_field(b.get(), "usage", u32, 0, 0);
  btf__add_field(b.get(), "parent", ptr, 32, 0);
  btf__add_union(b.get(), "", 4);                                          // 5, anonymous
  btf__add_field(b.get(), "a", u32, 0, 0);
  btf__add_enum(b.get(), "vm_event_item", 4);                              // 6
  btf__add_enum_value(b.get(), "PGSCAN_KSWAPD", 1);
  btf__add_enum_value(b.get(), "PGSTEAL_KSWAPD", 2);
  btf__add_fwd(b.get(), "task_struct", BTF_FWD_STRUCT);                    // 7
  const int proto = btf__add_func_proto(b.get(), u32);                     // 8
  btf__add_func_param(b.get(), "memcg", ptr);
  btf__add_func_param(b.get(), "item", u32);
  btf__add_func(b.get(), "mem_cgroup", BTF_FUNC_GLOBAL, proto);            // 9: same name, other kind
  const int tproto = btf__add_func_proto(b.get(), 0);                      // 10
  btf__add_func_param(b.get(), "", ptr);
  const int tptr = btf__add_ptr(b.get(), tproto);                          // 11
  btf__add_typedef(b.get(), "btf_trace_mark_victim", tptr);                // 12
  btf__add_volatile(b.get(), u32);                                         // 13
  btf__add_const(b.get(), u32);                                            // 14
  btf__add_restrict(b.get(), ptr);                                         // 15
  btf__add_float(b.get(), "double", 8);                                    // 16
  const int var = btf__add_var(b.get(), "nr_threads", BTF_VAR_GLOBAL_ALLOCATED, u32);  // 17
  btf__add_datasec(b.get(), ".data", 4);                                   // 18
  btf__add_datasec_var_info(b.get(), var, 0, 4);
  btf__add_decl_tag(b.get(), "tag", var, -1);                              // 19
  btf__add_type_tag(b.get(), "rcu", u32);                                  // 20
  btf__add_enum64(b.get(), "wide", 8, false);                              // 21
  btf__add_enum64_value(b.get(), "W", 1ull << 40);
  btf__add_typedef(b.get(), "u32", u32);                                   // 22: same name as 1, other kind
  btf__add_typedef(b.get(), "btf_trace_mark_victim", tptr);                // 23: a repeat, higher id
  (void)arr;
  return b;
}

TEST(KernelBtf, FindsWhatLibbpfFindsOnEveryKind) {
  BtfPtr b = sample_btf();
  auto k = bpf::KernelBtf::from_bytes(raw_of(b.get()), "sample");
  ASSERT_TRUE(k) << k.error().message;
  const auto& btf = **k;
  ASSERT_EQ(btf.type_count(), btf__type_cnt(b.get()));
  EXPECT_FALSE(btf.mapped());
  for (__u32 id = 1; id < btf__type_cnt(b.get()); ++id) {
    const struct btf_type* t = btf__type_by_id(b.get(), id);
    ASSERT_EQ(btf.type(static_cast<int>(id))->info, t->info) << id;
    const char* n = btf__name_by_offset(b.get(), t->name_off);
    if (!n || !*n) continue;
    EXPECT_EQ(btf.find(n, static_cast<int>(btf_kind(t))), btf__find_by_name_kind(b.get(), n, btf_kind(t))) << n;
    EXPECT_EQ(btf.find(n), btf__find_by_name(b.get(), n)) << n;
  }
  EXPECT_EQ(btf.find("mem_cgroup", BTF_KIND_STRUCT), 4);
  EXPECT_EQ(btf.find("mem_cgroup", BTF_KIND_FUNC), 9);
  EXPECT_EQ(btf.find("mem_cgroup"), 4) << "any kind: the lowest id";
  EXPECT_EQ(btf.find("u32", BTF_KIND_TYPEDEF), 22);
  EXPECT_EQ(btf.find("btf_trace_mark_victim", BTF_KIND_TYPEDEF), 12) << "a repeated name: the lowest id";
  EXPECT_EQ(btf.find("btf_trace_mark_victim", BTF_KIND_STRUCT), 0);
  EXPECT_EQ(btf.find("no_such_type"), 0);
  EXPECT_EQ(btf.find(""), 0) << "anonymous types have no name to find";
  EXPECT_EQ(btf.type(0), nullptr);
  EXPECT_EQ(btf.type(static_cast<int>(btf.type_count())), nullptr);
}

// Names that share long prefixes and lengths (as the kernel's btf_trace_*
// do) all stay findable.
TEST(KernelBtf, ManyNamesWithOneShapeAreAllFound) {
  BtfPtr b(btf__new_empty());
  const int u32 = btf__add_int(b.get(), "u32", 4, 0);
  std::vector<std::string> names;
  for (int i = 0; i < 5000; ++i) {
    names.push_back("btf_trace_mm_vmscan_" + std::to_string(100000 + i) + "_begin");
    btf__add_typedef(b.get(), names.back().c_str(), u32);
  }
  auto k = bpf::KernelBtf::from_bytes(raw_of(b.get()), "sample");
  ASSERT_TRUE(k) << k.error().message;
  for (std::size_t i = 0; i < names.size(); ++i)
    ASSERT_EQ((*k)->find(names[i], BTF_KIND_TYPEDEF), static_cast<int>(i) + 2) << names[i];
}

TEST(KernelBtf, RefusesWhatIsNotBtfWithAReason) {
  auto empty = bpf::KernelBtf::from_bytes("", "empty");
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().message.find("empty: shorter than a BTF header"), std::string::npos) << empty.error().message;

  BtfPtr b = sample_btf();
  std::string raw = raw_of(b.get());
  std::string bad_magic = raw;
  bad_magic[0] = 'x';
  auto m = bpf::KernelBtf::from_bytes(bad_magic, "bad");
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("magic"), std::string::npos) << m.error().message;

  auto cut = bpf::KernelBtf::from_bytes(raw.substr(0, raw.size() - 10), "cut");
  ASSERT_FALSE(cut);
  EXPECT_NE(cut.error().message.find("cut: "), std::string::npos) << cut.error().message;

  // A kind this reader does not know (a newer kernel's): refused, so the
  // prober falls back to libbpf, instead of being walked with a wrong size.
  BtfPtr one(btf__new_empty());
  btf__add_int(one.get(), "u32", 4, 0);
  std::string unknown = raw_of(one.get());
  struct btf_header hdr {};
  std::memcpy(&hdr, unknown.data(), sizeof(hdr));
  struct btf_type t {};
  std::memcpy(&t, unknown.data() + hdr.hdr_len + hdr.type_off, sizeof(t));
  t.info = (t.info & ~(0x1fu << 24)) | (31u << 24);
  std::memcpy(unknown.data() + hdr.hdr_len + hdr.type_off, &t, sizeof(t));
  auto u = bpf::KernelBtf::from_bytes(unknown, "future");
  ASSERT_FALSE(u);
  EXPECT_NE(u.error().message.find("unknown BTF kind 31"), std::string::npos) << u.error().message;

  auto missing = bpf::KernelBtf::open("/nonexistent/vmlinux");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("/nonexistent/vmlinux"), std::string::npos) << missing.error().message;
}

// This host's kernel BTF, read by KernelBtf and by libbpf: the same ids for
// the names the attach choices ask and for a spread of every kind.
// Read (kernels before 6.16) or mapped (6.16+; on an older kernel the map is
// refused and this reads too).
class KernelBtfHost : public ::testing::TestWithParam<bool> {};

TEST_P(KernelBtfHost, AgreesWithLibbpfOnTheKernelsBtf) {
  PRESSURED_REQUIRE(std::ifstream("/sys/kernel/btf/vmlinux").good(), "kernel BTF (/sys/kernel/btf/vmlinux)");
  auto k = bpf::KernelBtf::open("/sys/kernel/btf/vmlinux", GetParam());
  ASSERT_TRUE(k) << k.error().message;
  BtfPtr b(btf__parse("/sys/kernel/btf/vmlinux", nullptr));
  ASSERT_TRUE(b);
  const auto& btf = **k;
  ASSERT_EQ(btf.type_count(), btf__type_cnt(b.get()));
  for (const char* n : {"btf_trace_mark_victim", "btf_trace_cgroup_mkdir", "btf_trace_sched_process_fork",
                        "btf_trace_mod_memcg_lruvec_state", "page_counter_try_charge", "psi_memstall_enter",
                        "bpf_iter_cgroup", "mem_cgroup", "task_struct", "no_such_type_xyz"}) {
    EXPECT_EQ(btf.find(n), std::max(0, btf__find_by_name(b.get(), n))) << n;
    EXPECT_EQ(btf.find(n, BTF_KIND_TYPEDEF), std::max(0, btf__find_by_name_kind(b.get(), n, BTF_KIND_TYPEDEF))) << n;
    EXPECT_EQ(btf.find(n, BTF_KIND_FUNC), std::max(0, btf__find_by_name_kind(b.get(), n, BTF_KIND_FUNC))) << n;
  }
  // A spread of ids: each found by its own name and kind at the lowest id libbpf finds.
  for (__u32 id = 1; id < btf__type_cnt(b.get()); id += 97) {
    const struct btf_type* t = btf__type_by_id(b.get(), id);
    ASSERT_EQ(btf.type(static_cast<int>(id))->info, t->info) << id;
    const char* n = btf__name_by_offset(b.get(), t->name_off);
    if (!n || !*n) continue;
    EXPECT_EQ(btf.find(n, static_cast<int>(btf_kind(t))), btf__find_by_name_kind(b.get(), n, btf_kind(t))) << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Ways, KernelBtfHost, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? std::string("Mapped") : std::string("Read"); });

}  // namespace
}  // namespace pressured
