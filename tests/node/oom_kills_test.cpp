// The kernel's OOM kill counters of the kubepods tree (node/oom_kills.hpp),
// read from fake v1 and v2 trees built from literals.
#include "node/oom_kills.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include <gtest/gtest.h>

#include "fakes/fake_node.hpp"
#include "kernel/file.hpp"

namespace pressured::node {
namespace {

using testing::TempDir;
using testing::write_text;

const char* kOomControl = "oom_kill_disable 0\nunder_oom 0\noom_kill %d\n";

std::string oom_control(int kills) {
  char buf[80];
  std::snprintf(buf, sizeof buf, kOomControl, kills);
  return buf;
}

std::map<std::string, uint64_t> by_path(const std::vector<MemcgOomKills>& v, const std::string& root) {
  std::map<std::string, uint64_t> m;
  for (const auto& k : v) m[k.path.substr(root.size())] = k.oom_kills;
  return m;
}

TEST(OomKills, ParsesTheOomKillLineOfV1AndV2Files) {
  EXPECT_EQ(parse_oom_kill_count("oom_kill_disable 0\nunder_oom 1\noom_kill 3\n").value(), 3u);
  EXPECT_EQ(parse_oom_kill_count("low 0\nhigh 2\nmax 9\noom 4\noom_kill 2\noom_group_kill 0\n").value(), 2u);
  EXPECT_FALSE(parse_oom_kill_count("oom_kill_disable 0\nunder_oom 0\n"));
  EXPECT_FALSE(parse_oom_kill_count("oom_kill banana\n"));
}

TEST(OomKills, V1ReadsEveryMemcgOfTheTreeEachItsOwnCount) {
  TempDir t;
  const std::string kp = t.path() + "/kubepods";
  write_text(kp + "/memory.oom_control", oom_control(0));
  write_text(kp + "/burstable/memory.oom_control", oom_control(0));
  write_text(kp + "/burstable/podA/memory.oom_control", oom_control(1));
  write_text(kp + "/burstable/podA/ctr1/memory.oom_control", oom_control(2));
  write_text(kp + "/podG/memory.oom_control", oom_control(0));
  auto r = read_oom_kills(kp, false);
  ASSERT_TRUE(r);
  EXPECT_EQ(by_path(*r, kp), (std::map<std::string, uint64_t>{
                                 {"", 0}, {"/burstable", 0}, {"/burstable/podA", 1}, {"/burstable/podA/ctr1", 2},
                                 {"/podG", 0}}));
  struct stat st {};
  ASSERT_EQ(::stat((kp + "/burstable/podA/ctr1").c_str(), &st), 0);
  auto ctr = std::find_if(r->begin(), r->end(), [&](const auto& k) { return k.path == kp + "/burstable/podA/ctr1"; });
  ASSERT_NE(ctr, r->end());
  EXPECT_EQ(ctr->cgroup_id, static_cast<uint64_t>(st.st_ino)) << "the id BPF sees: the directory's inode";
}

TEST(OomKills, V2ReadsTheLocalEventsNotTheSubtreeCounts) {
  TempDir t;
  const std::string kp = t.path() + "/kubepods";
  write_text(kp + "/memory.events", "low 0\nhigh 0\nmax 5\noom 3\noom_kill 3\n");
  write_text(kp + "/memory.events.local", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n");
  write_text(kp + "/podA/memory.events", "low 0\nhigh 0\nmax 5\noom 3\noom_kill 3\n");
  write_text(kp + "/podA/memory.events.local", "low 0\nhigh 0\nmax 5\noom 3\noom_kill 3\n");
  auto r = read_oom_kills(kp, true);
  ASSERT_TRUE(r);
  EXPECT_EQ(by_path(*r, kp), (std::map<std::string, uint64_t>{{"", 0}, {"/podA", 3}}));
}

// What tells a node-level kill from a limit's (oom_scope.hpp): v2's local
// `oom`, v1's failcnt with whether a limit is set.
TEST(OomKills, ReadsTheEvidenceOfEachMemcgsOwnLimitBeingReached) {
  TempDir t;
  const std::string kp = t.path() + "/kubepods";
  write_text(kp + "/memory.events.local", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n");
  write_text(kp + "/podA/memory.events.local", "low 0\nhigh 0\nmax 5\noom 4\noom_kill 3\n");
  auto r2 = read_oom_kills(kp, true);
  ASSERT_TRUE(r2);
  ASSERT_EQ(r2->size(), 2u);
  EXPECT_EQ(r2->at(0).oom_events, 0u);
  EXPECT_EQ(r2->at(1).oom_events, 4u);
  EXPECT_FALSE(r2->at(1).failcnt);
  EXPECT_EQ(parse_oom_event_count("max 1\noom_kill 1\n"), std::nullopt) << "oom_kill is not oom";

  const std::string v1 = t.path() + "/v1/kubepods";
  write_text(v1 + "/memory.oom_control", oom_control(0));
  write_text(v1 + "/memory.failcnt", "0\n");
  write_text(v1 + "/memory.limit_in_bytes", "9223372036854771712\n");  // unlimited
  write_text(v1 + "/podA/memory.oom_control", oom_control(1));
  write_text(v1 + "/podA/memory.failcnt", "17\n");
  write_text(v1 + "/podA/memory.limit_in_bytes", "50331648\n");
  write_text(v1 + "/podB/memory.oom_control", oom_control(0));  // no failcnt file: not known
  auto r1 = read_oom_kills(v1, false);
  ASSERT_TRUE(r1);
  std::map<std::string, MemcgOomKills> by;
  for (const auto& k : *r1) by[k.path.substr(v1.size())] = k;
  EXPECT_EQ(by[""].failcnt, 0u);
  EXPECT_FALSE(by[""].limited);
  EXPECT_EQ(by["/podA"].failcnt, 17u);
  EXPECT_TRUE(by["/podA"].limited);
  EXPECT_FALSE(by["/podA"].oom_events);
  EXPECT_FALSE(by["/podB"].failcnt);
}

TEST(OomKills, ARealV2KernelsLocalEventsGiveItsOomCount) {
  auto t = kernel::read_file(std::string(PRESSURED_FIXTURES_DIR) + "/v2-6.1/child/memory.events.local");
  ASSERT_TRUE(t);
  EXPECT_EQ(parse_oom_event_count(*t), 0u);
  EXPECT_EQ(parse_oom_kill_count(*t).value(), 0u);
}

TEST(OomKills, NothingIsReadWithoutKubepodsOrWithoutLocalEvents) {
  TempDir t;
  EXPECT_FALSE(read_oom_kills("", false));
  EXPECT_FALSE(read_oom_kills(t.path() + "/kubepods", false));
  write_text(t.path() + "/kubepods/memory.events", "oom_kill 3\n");  // before 5.2: subtree counts only
  EXPECT_FALSE(read_oom_kills(t.path() + "/kubepods", true));
}

TEST(OomKills, TheWalkStopsAtItsDepth) {
  TempDir t;
  const std::string kp = t.path() + "/kubepods";
  write_text(kp + "/memory.oom_control", oom_control(0));
  write_text(kp + "/a/memory.oom_control", oom_control(1));
  write_text(kp + "/a/b/memory.oom_control", oom_control(1));
  write_text(kp + "/a/b/c/memory.oom_control", oom_control(1));
  auto r = read_oom_kills(kp, false, 2);
  ASSERT_TRUE(r);
  EXPECT_EQ(by_path(*r, kp), (std::map<std::string, uint64_t>{{"", 0}, {"/a", 1}, {"/a/b", 1}}));
}

TEST(OomKills, ReadsTheNodesCountFromVmstat) {
  EXPECT_EQ(parse_vmstat_oom_kills("nr_free_pages 12\noom_kill 7\nnuma_hit 1\n").value(), 7u);
  EXPECT_EQ(parse_vmstat_oom_kills("oom_kill 0").value(), 0u);
  EXPECT_FALSE(parse_vmstat_oom_kills("nr_free_pages 12\noom_kill_other 3\n")) << "a prefix is not the key";
  EXPECT_FALSE(parse_vmstat_oom_kills("oom_kill x\n"));
}

// The walk is ~2000 memcgs at 1000 pods: each full observation takes the
// last walk's counts while the node's OOM kill count stands still, and walks
// again as soon as it moves (the kernel counts a kill in both at once).
TEST(OomKills, TheTreeIsWalkedAgainOnlyWhenTheNodesCountMoves) {
  TempDir t;
  const std::string kp = t.path() + "/kubepods";
  const std::string vmstat = t.path() + "/proc/vmstat";
  write_text(kp + "/memory.oom_control", oom_control(0));
  write_text(kp + "/podA/memory.oom_control", oom_control(0));
  write_text(vmstat, "nr_free_pages 1\noom_kill 4\n");
  OomKillCounters counters(kp, false, t.path() + "/proc");
  auto first = counters.read();
  ASSERT_TRUE(first);
  EXPECT_EQ(counters.walks(), 1u);
  // A memcg created since (no kill yet) and, as the fake cannot be kept from
  // showing it, a count moved without the node's: not read, no walk.
  write_text(kp + "/podB/memory.oom_control", oom_control(0));
  write_text(kp + "/podA/memory.oom_control", oom_control(1));
  auto second = counters.read();
  ASSERT_TRUE(second);
  EXPECT_EQ(counters.walks(), 1u);
  EXPECT_EQ(by_path(*second, kp), by_path(*first, kp));
  // The kill counted by the node: walked, podB with it.
  write_text(vmstat, "nr_free_pages 1\noom_kill 5\n");
  auto third = counters.read();
  ASSERT_TRUE(third);
  EXPECT_EQ(counters.walks(), 2u);
  EXPECT_EQ(by_path(*third, kp), (std::map<std::string, uint64_t>{{"", 0}, {"/podA", 1}, {"/podB", 0}}));
}

TEST(OomKills, WithoutVmstatEveryReadWalks) {
  TempDir t;
  const std::string kp = t.path() + "/kubepods";
  write_text(kp + "/memory.oom_control", oom_control(0));
  OomKillCounters counters(kp, false, t.path() + "/proc");
  ASSERT_TRUE(counters.read());
  write_text(kp + "/memory.oom_control", oom_control(2));
  auto r = counters.read();
  ASSERT_TRUE(r);
  EXPECT_EQ(counters.walks(), 2u);
  EXPECT_EQ(by_path(*r, kp), (std::map<std::string, uint64_t>{{"", 2}}));
  // No counters at all (no kubepods): nothing cached either.
  OomKillCounters none(t.path() + "/nothing", false, t.path() + "/proc");
  EXPECT_FALSE(none.read());
  EXPECT_FALSE(none.read());
  EXPECT_EQ(none.walks(), 2u);
}

}  // namespace
}  // namespace pressured::node
