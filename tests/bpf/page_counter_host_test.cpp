// The batched page-counter read (bpf/pressured_events.bpf.c page_counters_walk,
// userspace/bpf/page_counter_iter.cpp): one BPF cgroup-iterator walk must give
// what every tier's and pod's usage file says, for the cgroups of the walked
// subtree down to the depth asked, and follow cgroups removed and created again.
//
// Host part (root, BPF, a kernel with the cgroup iterator): a sandbox
// kubepods tree limited to 256 MiB, a bounded workload holding 16 MiB in one
// pod's container (tests/events/alloc.c; 30 s cap).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "bpf/bpf_events.hpp"
#include "bpf/features.hpp"
#include "fakes/event_test_helpers.hpp"
#include "fakes/privilege.hpp"
#include "fakes/sandbox_cgroup.hpp"

namespace pressured {
namespace {

using namespace std::chrono_literals;
using events_test::alloc_path;
using testing::SandboxCgroup;
constexpr uint64_t MiB = 1ULL << 20;

uint64_t inode_of(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

uint64_t usage_file(const SandboxCgroup& sb, const std::string& rel) {
  const std::string text = sb.read(rel, sb.v2() ? "memory.current" : "memory.usage_in_bytes");
  return text.empty() ? UINT64_MAX : std::strtoull(text.c_str(), nullptr, 10);
}

// The limit file's value (v1 prints the page counter's maximum for none);
// none for v2's "max".
std::optional<uint64_t> limit_file(const SandboxCgroup& sb, const std::string& rel) {
  const std::string text = sb.read(rel, sb.v2() ? "memory.max" : "memory.limit_in_bytes");
  if (text.rfind("max", 0) == 0) return std::nullopt;
  return std::strtoull(text.c_str(), nullptr, 10);
}

std::map<uint64_t, uint64_t> by_id(const std::vector<PageCounterSample>& v) {
  std::map<uint64_t, uint64_t> out;
  for (const auto& s : v) out[s.cgroup_id] = s.usage_bytes;
  return out;
}

// Both flavours of the walk: the one the kernel takes (plain loads on 6.2+,
// probe reads on 6.1) and, forced, one probe read a field.
class HostPageCounters : public ::testing::TestWithParam<bool> {};

// The daemon's page-counter reader, in the probe-read flavour if asked. The
// BPF source it comes from is released here: the reader holds references
// of its own.
std::shared_ptr<PageCounterReader> load_reader(const BpfFeatures& features, bool probe_reads, std::string& why) {
  EventStats stats;
  bpf::BpfEventsOptions options;
  options.probe_page_walk = probe_reads;
  auto src = bpf::BpfEventSource::create(options, features, stats);
  if (!src) {
    why = src.error().message;
    return nullptr;
  }
  auto reader = (*src)->page_counter_reader();
  if (!reader) why = "the page-counter iterator did not load (see the warning above)";
  return reader;
}

TEST_P(HostPageCounters, OneWalkGivesEveryTierAndPodItsUsageFile) {
  PRESSURED_REQUIRE_ROOT();
  const std::string mount = SandboxCgroup::find_memory_mount();
  PRESSURED_REQUIRE(SandboxCgroup::memory_controller_available(mount), "a memory cgroup controller");
  PRESSURED_REQUIRE(::access(alloc_path().c_str(), X_OK) == 0, "tests/events_alloc built");
  auto features = make_kernel_bpf_features();
  PRESSURED_REQUIRE(features->bpf_available(), "BPF");
  if (!features->has_btf_type("bpf_iter_cgroup"))
    GTEST_SKIP() << "NOT APPLICABLE before 6.1: the kernel has no BPF cgroup iterator (decisions read usage files)";

  SandboxCgroup sb(mount, "page-counters");
  ASSERT_TRUE(sb.ok()) << sb.error();
  for (const char* d : {"kubepods/burstable/podA/ctr", "kubepods/besteffort/podB", "kubepods/podG/ctr"})
    ASSERT_TRUE(sb.make_with(d)) << sb.error();
  ASSERT_TRUE(sb.set_memory_max("kubepods", 256 * MiB)) << sb.error();
  // 16 MiB touched at once, held 30 s at most (the sandbox kills it at the end).
  pid_t w = sb.spawn("kubepods/burstable/podA/ctr", {alloc_path(), "16", "16", "0", "30000"});
  ASSERT_GT(w, 0);
  for (int i = 0; i < 100 && usage_file(sb, "kubepods/burstable/podA") < 16 * MiB; ++i) std::this_thread::sleep_for(100ms);
  ASSERT_GE(usage_file(sb, "kubepods/burstable/podA"), 16 * MiB) << "the workload did not start";

  std::string why;
  auto reader = load_reader(*features, GetParam(), why);
  ASSERT_TRUE(reader) << why;

  std::vector<PageCounterSample> samples;
  auto r = reader->read(sb.path("kubepods"), 2, samples);
  if (!r && r.error().code == EBADF && !sb.v2()) {
    PRESSURED_REQUIRE(false, "a kernel whose cgroup iterator walks v1 hierarchies (" + r.error().message + ")");
  }
  ASSERT_TRUE(r) << r.error().message;
  auto got = by_id(samples);
  EXPECT_EQ(got.size(), samples.size()) << "a cgroup recorded twice";

  // Recorded: the root, the tiers, the pods, and Guaranteed pods' containers
  // (two levels down); not the containers of tier pods (three levels down).
  const std::vector<std::string> recorded{"kubepods",      "kubepods/burstable",      "kubepods/besteffort",
                                          "kubepods/podG", "kubepods/burstable/podA", "kubepods/besteffort/podB",
                                          "kubepods/podG/ctr"};
  EXPECT_EQ(samples.size(), recorded.size());
  EXPECT_EQ(got.count(inode_of(sb.path("kubepods/burstable/podA/ctr"))), 0u) << "a container of a tier pod";
  for (const auto& rel : recorded) {
    const uint64_t id = inode_of(sb.path(rel));
    ASSERT_NE(id, 0u) << rel;
    auto it = got.find(id);
    ASSERT_NE(it, got.end()) << rel << " (cgroup id " << id << ") missing from the walk";
    // The same page counter the file prints, read a moment later: idle
    // cgroups do not move; the workload only holds what it touched.
    const uint64_t file = usage_file(sb, rel);
    EXPECT_NEAR(static_cast<double>(it->second), static_cast<double>(file), 256.0 * 1024) << rel;
    // The limit, as the limit file prints it (none above kubepods' own).
    auto sample = std::find_if(samples.begin(), samples.end(), [&](const PageCounterSample& x) { return x.cgroup_id == id; });
    ASSERT_NE(sample, samples.end());
    if (auto file_limit = limit_file(sb, rel)) {
      EXPECT_EQ(sample->limit_bytes, *file_limit) << rel;
    } else {
      EXPECT_GE(sample->limit_bytes, uint64_t{1} << 62) << rel << ": \"max\" is the page counter's maximum";
    }
  }
  auto kubepods_sample = std::find_if(samples.begin(), samples.end(), [&](const PageCounterSample& x) {
    return x.cgroup_id == inode_of(sb.path("kubepods"));
  });
  ASSERT_NE(kubepods_sample, samples.end());
  EXPECT_EQ(kubepods_sample->limit_bytes, 256 * MiB) << "the limit the test set";
  EXPECT_GE(got[inode_of(sb.path("kubepods/burstable/podA"))], 16 * MiB);
  EXPECT_GE(got[inode_of(sb.path("kubepods"))], got[inode_of(sb.path("kubepods/burstable/podA"))])
      << "hierarchical: kubepods holds its pods";

  // The walk goes two levels down at most (kubepods' tiers and pods): a
  // deeper one is refused, never cut short silently.
  std::vector<PageCounterSample> deeper;
  auto three = reader->read(sb.path("kubepods"), 3, deeper);
  ASSERT_FALSE(three);
  EXPECT_EQ(three.error().code, EINVAL);
  EXPECT_TRUE(deeper.empty());

  // One level under a tier: its pods, not their containers.
  ASSERT_TRUE(reader->read(sb.path("kubepods/burstable"), 1, samples));
  got = by_id(samples);
  EXPECT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples.front().cgroup_id, inode_of(sb.path("kubepods/burstable"))) << "the root comes first";
  EXPECT_EQ(got.count(inode_of(sb.path("kubepods/burstable/podA"))), 1u);
  EXPECT_EQ(got.count(inode_of(sb.path("kubepods/burstable/podA/ctr"))), 0u);

  // A walk rooted at podB itself (its own attached iterator), before and
  // after podB is removed and created again: the second follows the new one.
  ASSERT_TRUE(reader->read(sb.path("kubepods/besteffort/podB"), 1, samples));
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].cgroup_id, inode_of(sb.path("kubepods/besteffort/podB")));

  // A pod removed and created again under the same path: the next walk of
  // kubepods (same attached iterator) has its new id, not the old one.
  const uint64_t old_b = inode_of(sb.path("kubepods/besteffort/podB"));
  ASSERT_EQ(::rmdir(sb.path("kubepods/besteffort/podB").c_str()), 0);
  ASSERT_TRUE(sb.make_with("kubepods/besteffort/podB"));
  const uint64_t new_b = inode_of(sb.path("kubepods/besteffort/podB"));
  ASSERT_NE(old_b, new_b);
  ASSERT_TRUE(reader->read(sb.path("kubepods"), 2, samples));
  got = by_id(samples);
  EXPECT_EQ(got.count(old_b), 0u);
  EXPECT_EQ(got.count(new_b), 1u);
  auto again = reader->read(sb.path("kubepods/besteffort/podB"), 1, samples);
  ASSERT_TRUE(again) << again.error().message;
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].cgroup_id, new_b) << "the walk stayed on the removed cgroup";

  // The same, with podB's own walk the last one before its removal: the
  // records of that walk are still in the map when the next walk of the
  // removed cgroup shows nothing, and must not be taken for a fresh walk.
  ASSERT_TRUE(reader->read(sb.path("kubepods/besteffort/podB"), 1, samples));
  ASSERT_EQ(::rmdir(sb.path("kubepods/besteffort/podB").c_str()), 0);
  ASSERT_TRUE(sb.make_with("kubepods/besteffort/podB"));
  const uint64_t newer_b = inode_of(sb.path("kubepods/besteffort/podB"));
  ASSERT_NE(newer_b, new_b);
  auto third = reader->read(sb.path("kubepods/besteffort/podB"), 1, samples);
  ASSERT_TRUE(third) << third.error().message;
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].cgroup_id, newer_b) << "the walk of the removed cgroup gave the walk before's records";

  // Removed for good: an error, not the last walk's records.
  ASSERT_EQ(::rmdir(sb.path("kubepods/besteffort/podB").c_str()), 0);
  std::vector<PageCounterSample> after_removal;
  EXPECT_FALSE(reader->read(sb.path("kubepods/besteffort/podB"), 1, after_removal));
  EXPECT_TRUE(after_removal.empty());

  // A directory that is not there: an error, never an empty batch.
  std::vector<PageCounterSample> none;
  auto gone = reader->read(sb.path("kubepods/nosuchpod"), 1, none);
  ASSERT_FALSE(gone);
  EXPECT_TRUE(none.empty());
  sb.kill_all();
}

// A walk of more records than the reader maps at first (1024) is read whole:
// the reader maps more of the map, and every pod is there with its id.
TEST_P(HostPageCounters, AWalkLongerThanTheFirstMappingIsReadWhole) {
  PRESSURED_REQUIRE_ROOT();
  const std::string mount = SandboxCgroup::find_memory_mount();
  PRESSURED_REQUIRE(SandboxCgroup::memory_controller_available(mount), "a memory cgroup controller");
  auto features = make_kernel_bpf_features();
  PRESSURED_REQUIRE(features->bpf_available(), "BPF");
  if (!features->has_btf_type("bpf_iter_cgroup"))
    GTEST_SKIP() << "NOT APPLICABLE before 6.1: the kernel has no BPF cgroup iterator (decisions read usage files)";

  SandboxCgroup sb(mount, "page-counters-many");
  ASSERT_TRUE(sb.ok()) << sb.error();
  constexpr int kPods = 1500;
  for (int i = 0; i < kPods; ++i) ASSERT_TRUE(sb.make_with("kubepods/besteffort/pod" + std::to_string(i))) << sb.error();

  std::string why;
  auto reader = load_reader(*features, GetParam(), why);
  ASSERT_TRUE(reader) << why;
  std::vector<PageCounterSample> samples;
  for (int round = 0; round < 2; ++round) {  // the second through the larger mapping
    auto r = reader->read(sb.path("kubepods"), 2, samples);
    if (!r && r.error().code == EBADF && !sb.v2()) {
      PRESSURED_REQUIRE(false, "a kernel whose cgroup iterator walks v1 hierarchies (" + r.error().message + ")");
    }
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_EQ(samples.size(), static_cast<std::size_t>(kPods) + 2) << "kubepods, besteffort and every pod";
    auto got = by_id(samples);
    EXPECT_EQ(got.size(), samples.size()) << "a cgroup recorded twice";
    for (int i : {0, 1023, 1024, kPods - 1}) {
      EXPECT_EQ(got.count(inode_of(sb.path("kubepods/besteffort/pod" + std::to_string(i)))), 1u) << "pod" << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Flavours, HostPageCounters, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "ProbeReads" : "TheKernelsChoice"; });

}  // namespace
}  // namespace pressured
