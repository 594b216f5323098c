// Golden parsing tests on files captured from this machine (6.18, hybrid,
// memory on v1) and from the 6.1 VM kernel (pure v2), plus malformed input.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "kernel/parse.hpp"

namespace pressured::kernel {
namespace {

std::string fixture(const std::string& rel) {
  std::ifstream f(std::string(PRESSURED_FIXTURES_DIR) + "/" + rel, std::ios::binary);
  EXPECT_TRUE(f.good()) << "missing fixture " << rel;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Independent reference: the value of `key` found by a plain line scan.
uint64_t lookup(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string k;
  uint64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  ADD_FAILURE() << "no key " << key;
  return 0;
}

uint64_t lookup_kb(const std::string& meminfo) {
  std::istringstream in(meminfo);
  std::string k;
  uint64_t v = 0;
  in >> k >> v;  // first line is MemTotal
  EXPECT_EQ(k, "MemTotal:");
  return v * 1024;
}

TEST(GoldenHost618, RootV1MemoryStat) {
  std::string text = fixture("host-6.18/root-v1-memory.stat");
  auto st = parse_memory_stat(text, /*v2=*/false);
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(st->anon, lookup(text, "total_rss"));
  EXPECT_EQ(st->file, lookup(text, "total_cache"));
  EXPECT_EQ(st->inactive_file, lookup(text, "total_inactive_file"));
  EXPECT_EQ(st->active_file, lookup(text, "total_active_file"));
  auto all = parse_flat_keyed(text);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->size(), 42u);  // the 6.18 v1 key set
}

TEST(GoldenHost618, PodV1MemoryStatAndUsage) {
  std::string text = fixture("host-6.18/pod-v1-memory.stat");
  auto st = parse_memory_stat(text, false);
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(st->active_file, lookup(text, "total_active_file"));
  auto u = parse_single_value(fixture("host-6.18/pod-v1-memory.usage_in_bytes"));
  ASSERT_TRUE(u);
  ASSERT_TRUE(u->has_value());
  EXPECT_GT(**u, 0u);
  auto lim = parse_single_value(fixture("host-6.18/pod-v1-memory.limit_in_bytes"));
  ASSERT_TRUE(lim && lim->has_value());
  EXPECT_EQ(**lim, 268435456u);
}

TEST(GoldenHost618, Meminfo) {
  std::string text = fixture("host-6.18/meminfo");
  auto mi = parse_meminfo(text);
  ASSERT_TRUE(mi) << mi.error().message;
  EXPECT_EQ(mi->mem_total, lookup_kb(text));
  EXPECT_EQ(mi->hugepage_size, 2048u * 1024);
  EXPECT_EQ(mi->hugetlb, 0u);
  EXPECT_GT(mi->mem_free, 0u);
  EXPECT_LE(mi->mem_available, mi->mem_total);
}

TEST(GoldenHost618, PressureFiles) {
  for (const char* r : {"pressure-memory", "pressure-io", "pressure-cpu", "unified-root-memory.pressure"}) {
    auto p = parse_psi(fixture(std::string("host-6.18/") + r));
    ASSERT_TRUE(p) << r << ": " << p.error().message;
    EXPECT_TRUE(p->full.has_value()) << r;  // 6.18 has "full" for cpu too
    EXPECT_GE(p->some.avg10, 0.0);
  }
  auto cpu = parse_psi(fixture("host-6.18/pressure-cpu"));
  ASSERT_TRUE(cpu);
  EXPECT_GT(cpu->some.total_us, 0u);
}

TEST(GoldenHost618, ProcSys) {
  auto pm = parse_single_value(fixture("host-6.18/pid_max"));
  ASSERT_TRUE(pm && pm->has_value());
  EXPECT_EQ(**pm, 32768u);
  auto tm = parse_single_value(fixture("host-6.18/threads-max"));
  ASSERT_TRUE(tm && tm->has_value());
  auto tasks = parse_loadavg_tasks(fixture("host-6.18/loadavg"));
  ASSERT_TRUE(tasks);
  EXPECT_GT(*tasks, 10u);
}

TEST(GoldenHost618, MountinfoHybrid) {
  std::size_t skipped = 99;
  auto m = parse_mountinfo(fixture("host-6.18/mountinfo"), &skipped);
  EXPECT_EQ(skipped, 0u);
  bool memory = false, unified = false, pids = false;
  for (const auto& e : m) {
    if (e.fstype == "cgroup" && e.has_option("memory")) {
      memory = true;
      EXPECT_EQ(e.mount_point, "/sys/fs/cgroup/memory");
    }
    if (e.fstype == "cgroup" && e.has_option("pids")) pids = true;
    if (e.fstype == "cgroup2") {
      unified = true;
      EXPECT_EQ(e.mount_point, "/sys/fs/cgroup/unified");
    }
  }
  EXPECT_TRUE(memory);
  EXPECT_TRUE(pids);
  EXPECT_TRUE(unified);
}

TEST(GoldenHost618, ProcCgroups) {
  std::string text = fixture("host-6.18/cgroups");
  // Independent reference: the second column of the "memory" line.
  std::istringstream in(text);
  std::string line;
  int expected = -1;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string name;
    int hierarchy = -1;
    if (ls >> name >> hierarchy && name == "memory") expected = hierarchy;
  }
  ASSERT_GT(expected, 0) << "the fixture's memory controller is on a v1 hierarchy";
  auto id = parse_proc_cgroups_hierarchy(text, "memory");
  ASSERT_TRUE(id) << id.error().message;
  EXPECT_EQ(*id, expected);
  auto hugetlb = parse_proc_cgroups_hierarchy(text, "hugetlb");
  ASSERT_TRUE(hugetlb);
  EXPECT_EQ(*hugetlb, 0) << "an unmounted (or v2) controller has hierarchy 0";
  auto rdma = parse_proc_cgroups_hierarchy(text, "rdma");
  ASSERT_FALSE(rdma);
  EXPECT_EQ(rdma.error().code, ENOENT);
}

TEST(Status, CapEff) {
  auto caps = parse_status_cap_eff("Name:\tpressured\nCapInh:\t0000000000000000\nCapEff:\t000001fffeffffff\n");
  ASSERT_TRUE(caps) << caps.error().message;
  EXPECT_EQ(*caps, 0x000001fffeffffffULL);
  EXPECT_EQ((*caps >> 24) & 1u, 0u) << "CAP_SYS_RESOURCE is the bit cleared here";
  EXPECT_FALSE(parse_status_cap_eff("Name:\tx\n"));
  EXPECT_FALSE(parse_status_cap_eff("CapEff:\tnot-hex\n"));
  EXPECT_FALSE(parse_status_cap_eff("CapEff:\t\n"));
}

TEST(GoldenHost618, ProcPidStat) {
  auto k = parse_proc_stat(fixture("host-6.18/proc-kthreadd-stat"));
  ASSERT_TRUE(k) << k.error().message;
  EXPECT_EQ(k->state, 'S');
  EXPECT_EQ(k->ppid, 0);
  EXPECT_EQ(k->flags, 2129984u);
  EXPECT_NE(k->flags & 0x00200000u, 0u) << "kthreadd has PF_KTHREAD";
  auto c = parse_proc_stat(fixture("host-6.18/proc-cat-stat"));
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->state, 'R');
  EXPECT_EQ(c->ppid, 10876);
  EXPECT_EQ(c->flags & 0x00200000u, 0u);
}

TEST(Parse, ProcPidStatCommWithSpacesAndParentheses) {
  auto st = parse_proc_stat("1234 (my (odd) app) S 1 1234 1234 0 -1 4194560 0\n");
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(st->state, 'S');
  EXPECT_EQ(st->ppid, 1);
  EXPECT_EQ(st->flags, 4194560u);
  EXPECT_FALSE(parse_proc_stat("garbage"));
  EXPECT_FALSE(parse_proc_stat("1 (x) S 1 2 3"));             // too few fields
  EXPECT_FALSE(parse_proc_stat("1 (x) S one 1 1 0 -1 0 0"));  // ppid not a number
  EXPECT_FALSE(parse_proc_stat("1 (x) SS 1 1 1 0 -1 0 0"));   // state is one letter
}

TEST(GoldenV2_61, ChildMemoryFiles) {
  std::string text = fixture("v2-6.1/child/memory.stat");
  auto st = parse_memory_stat(text, /*v2=*/true);
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(st->anon, 67162112u);
  EXPECT_EQ(st->file, 4096u);
  EXPECT_EQ(st->inactive_file, 0u);
  EXPECT_EQ(st->active_file, 4096u);
  auto ev = parse_memory_events(fixture("v2-6.1/child/memory.events"));
  ASSERT_TRUE(ev) << ev.error().message;
  EXPECT_EQ(ev->high, 262u);
  EXPECT_EQ(ev->max, 0u);
  EXPECT_EQ(ev->oom_kill, 0u);
  auto cur = parse_single_value(fixture("v2-6.1/child/memory.current"));
  ASSERT_TRUE(cur && cur->has_value());
  EXPECT_EQ(**cur, 67674112u);
  auto max = parse_single_value(fixture("v2-6.1/child/memory.max"));
  ASSERT_TRUE(max && max->has_value());
  EXPECT_EQ(**max, 209715200u);
  auto pids = parse_single_value(fixture("v2-6.1/child/pids.current"));
  ASSERT_TRUE(pids && pids->has_value());
  EXPECT_EQ(**pids, 1u);
  auto psi = parse_psi(fixture("v2-6.1/child/memory.pressure"));
  ASSERT_TRUE(psi);
  EXPECT_DOUBLE_EQ(psi->some.avg10, 71.53);
  ASSERT_TRUE(psi->full);
  EXPECT_EQ(psi->full->total_us, 22630031u);
}

TEST(GoldenV2_61, RootStatAndProc) {
  std::string text = fixture("v2-6.1/root/memory.stat");
  auto st = parse_memory_stat(text, true);
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(st->anon, 67354624u);
  EXPECT_EQ(st->file, 7213056u);
  auto mi = parse_meminfo(fixture("v2-6.1/proc/meminfo"));
  ASSERT_TRUE(mi);
  EXPECT_EQ(mi->mem_total, 995360u * 1024);
  auto m = parse_mountinfo(fixture("v2-6.1/proc/self/mountinfo"));
  bool v2 = false;
  for (const auto& e : m) {
    if (e.fstype == "cgroup2" && e.mount_point == "/sys/fs/cgroup") v2 = true;
  }
  EXPECT_TRUE(v2);
  for (const char* r : {"memory", "io", "cpu"}) {
    auto p = parse_psi(fixture(std::string("v2-6.1/proc/pressure/") + r));
    EXPECT_TRUE(p) << r;
  }
  auto pm = parse_single_value(fixture("v2-6.1/proc/sys/kernel/pid_max"));
  EXPECT_TRUE(pm && pm->has_value());
}

TEST(Malformed, TruncatedMemoryStatIsAnError) {
  std::string text = fixture("host-6.18/root-v1-memory.stat");
  // Cut in the middle of the file (and of a line): no final newline.
  auto cut = parse_memory_stat(std::string_view(text).substr(0, text.size() / 2), false);
  EXPECT_FALSE(cut);
  // Cut at a line boundary before total_inactive_file: the key is missing.
  auto pos = text.find("total_inactive_anon");
  ASSERT_NE(pos, std::string::npos);
  auto cut2 = parse_memory_stat(std::string_view(text).substr(0, pos), false);
  ASSERT_FALSE(cut2);
  EXPECT_NE(cut2.error().message.find("lacks"), std::string::npos);
  EXPECT_FALSE(parse_memory_stat("", false));
  EXPECT_FALSE(parse_memory_stat("total_rss abc\n", false));
}

TEST(Malformed, OtherFiles) {
  EXPECT_FALSE(parse_psi(""));
  EXPECT_FALSE(parse_psi("some avg10=0.00 avg60=0.00\n"));
  EXPECT_FALSE(parse_psi("bogus\n"));
  EXPECT_FALSE(parse_single_value("12a\n"));
  EXPECT_FALSE(parse_single_value(""));
  auto max = parse_single_value("max\n");
  ASSERT_TRUE(max);
  EXPECT_FALSE(max->has_value());
  EXPECT_FALSE(parse_meminfo("MemFree: 1 kB\n"));
  EXPECT_FALSE(parse_meminfo("MemTotal: 100"));  // truncated
  EXPECT_FALSE(parse_loadavg_tasks("0.1 0.2 0.3\n"));
  EXPECT_FALSE(parse_memory_events("low 0\nhigh 1\n"));
  EXPECT_FALSE(parse_flat_keyed("a 1\nb"));
  EXPECT_FALSE(parse_proc_cgroups_hierarchy("", "memory")) << "no header: not /proc/cgroups";
  EXPECT_FALSE(parse_proc_cgroups_hierarchy("#subsys_name\thierarchy\nmemory\tx\t1\t1\n", "memory"));
  std::size_t skipped = 0;
  auto m = parse_mountinfo("garbage line\n36 25 0:31 / /a\\040b rw - cgroup cgroup rw,memory\n", &skipped);
  EXPECT_EQ(skipped, 1u);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].mount_point, "/a b");
  EXPECT_EQ(count_lines("1\n2\n\n3"), 3u);
}

}  // namespace
}  // namespace pressured::kernel
