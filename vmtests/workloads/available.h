/* The guest's ground truth for memory.available, shared by the sampler and the
 * host unit test that holds it to pressured's own reading of the same files
 * (tests/node/vm_fixture_test.cpp). Plain C that also compiles as C++. */
#pragma once
#include <stdlib.h>
#include <string.h>

/* The value of KEY in a "key value" (memory.stat) or "Key: value kB"
 * (/proc/meminfo) text, as printed (kB stays kB); 0 when absent. */
static inline unsigned long long vmt_field(const char* text, const char* key) {
  size_t kl = strlen(key);
  for (const char* p = text; p && *p;) {
    if (strncmp(p, key, kl) == 0 && (p[kl] == ' ' || p[kl] == ':')) {
      const char* v = p + kl + 1;
      while (*v == ' ') ++v;
      return strtoull(v, NULL, 10);
    }
    p = strchr(p, '\n');
    if (p) ++p;
  }
  return 0;
}

/* memory.available in bytes from /proc/meminfo and the root memory.stat, as the
 * kubelet computes it on cgroup v2: capacity MemTotal minus the working set,
 * usage - inactive_file, where the root's usage is anon + file (runc's
 * rootStatsFromMeminfo: the v2 root has no memory.current). Not MemFree +
 * inactive_file, which also takes away the kernel's own memory (slab, stacks,
 * page tables, vmalloc, BPF maps): 33-34 MiB in the 1 GiB guest on 6.1, about
 * the margin by which ranking and min-reclaim go under their threshold. */
/* MemTotal minus the working set usage - inactive_file (0 when negative). */
static inline double vmt_available_from(const char* meminfo, unsigned long long usage,
                                        unsigned long long inactive_file) {
  const double total = (double)vmt_field(meminfo, "MemTotal") * 1024.0;
  const double ws = inactive_file < usage ? (double)(usage - inactive_file) : 0.0;
  return total > ws ? total - ws : 0.0;
}

static inline double vmt_memory_available(const char* meminfo, const char* root_stat) {
  return vmt_available_from(meminfo, vmt_field(root_stat, "anon") + vmt_field(root_stat, "file"),
                            vmt_field(root_stat, "inactive_file"));
}

/* The same on cgroup v1 (the real-kubelet contenders' guest): the working set
 * is the root memcg's memory.usage_in_bytes minus total_inactive_file of its
 * memory.stat, as cAdvisor reads them for the kubelet. */
static inline double vmt_memory_available_v1(const char* meminfo, unsigned long long root_usage,
                                             const char* root_stat) {
  return vmt_available_from(meminfo, root_usage, vmt_field(root_stat, "total_inactive_file"));
}
