#pragma once
// A fake node in a temp dir: cgroup mounts (v1, v2 or hybrid), a mount table,
// /proc files and kubepods pod cgroups for either driver, all in the kernel's
// real file formats (key sets copied from tests/fixtures/host-6.18 and
// v2-6.1). Header-only, no gtest: bench/observe_bench.cpp uses it too. The
// real observer reads it; where a test needs snapshots without any tree behind
// them, fake_observer.hpp has NodeObservers of its own.

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "pressured/config.hpp"
#include "pressured/observer.hpp"

namespace pressured::testing {

/// A temporary directory removed (recursively) on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::getenv("TMPDIR") ? std::string(std::getenv("TMPDIR")) : std::string("/tmp")) +
                       "/pressured-fake-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = buf.data();
  }
  ~TempDir() { remove_tree(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

  static void remove_tree(const std::string& p) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
      ::chmod(p.c_str(), 0755);
      if (DIR* d = ::opendir(p.c_str())) {
        std::vector<std::string> names;
        while (struct dirent* e = ::readdir(d)) {
          std::string n = e->d_name;
          if (n != "." && n != "..") names.push_back(n);
        }
        ::closedir(d);
        for (const auto& n : names) remove_tree(p + "/" + n);
      }
      ::rmdir(p.c_str());
    } else {
      ::unlink(p.c_str());
    }
  }

 private:
  std::string path_;
};

inline void mkdirs(const std::string& path) {
  std::string cur;
  for (std::size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || (path[i] == '/' && i > 0)) {
      cur = path.substr(0, i);
      ::mkdir(cur.c_str(), 0755);
    }
  }
}

inline void write_text(const std::string& path, const std::string& text) {
  auto slash = path.rfind('/');
  if (slash != std::string::npos) mkdirs(path.substr(0, slash));
  std::ofstream f(path, std::ios::trunc | std::ios::binary);
  f << text;
  if (!f) throw std::runtime_error("cannot write " + path);
}

/// One pod cgroup's memory numbers (bytes).
struct FakePodMemory {
  uint64_t usage = 0;          // memory.usage_in_bytes / memory.current
  uint64_t rss = 0;            // total_rss / anon
  uint64_t cache = 0;          // total_cache / file
  uint64_t inactive_file = 0;  // total_inactive_file / inactive_file
  uint64_t active_file = 0;
  std::optional<uint64_t> limit;  // nullopt: unlimited
  uint64_t pids = 1;
};

inline std::string v1_memory_stat(const FakePodMemory& m) {
  // Every key a 6.18 v1 memcg shows (tests/fixtures/host-6.18/root-v1-memory.stat).
  auto kv = [](const char* k, uint64_t v) { return std::string(k) + " " + std::to_string(v) + "\n"; };
  std::string s;
  for (const char* prefix : {"", "total_"}) {
    auto K = [&](const char* k) { return std::string(prefix) + k; };
    s += kv(K("cache").c_str(), m.cache) + kv(K("rss").c_str(), m.rss) + kv(K("rss_huge").c_str(), 0) +
         kv(K("shmem").c_str(), 0) + kv(K("mapped_file").c_str(), m.cache / 4) + kv(K("dirty").c_str(), 0) +
         kv(K("writeback").c_str(), 0) + kv(K("workingset_refault_anon").c_str(), 0) +
         kv(K("workingset_refault_file").c_str(), 0) + kv(K("swap").c_str(), 0) + kv(K("swapcached").c_str(), 0) +
         kv(K("pgpgin").c_str(), 1000) + kv(K("pgpgout").c_str(), 900) + kv(K("pgfault").c_str(), 5000) +
         kv(K("pgmajfault").c_str(), 0) + kv(K("inactive_anon").c_str(), m.rss) + kv(K("active_anon").c_str(), 0) +
         kv(K("inactive_file").c_str(), m.inactive_file) + kv(K("active_file").c_str(), m.active_file) +
         kv(K("unevictable").c_str(), 0);
    if (std::string(prefix).empty()) {
      s += kv("hierarchical_memory_limit", m.limit.value_or(9223372036854771712ULL));
      s += kv("hierarchical_memsw_limit", 9223372036854771712ULL);
    }
  }
  return s;
}

inline std::string v2_memory_stat(const FakePodMemory& m) {
  // Key order of a 6.1 memory.stat (tests/fixtures/v2-6.1/child/memory.stat).
  auto kv = [](const char* k, uint64_t v) { return std::string(k) + " " + std::to_string(v) + "\n"; };
  std::string s = kv("anon", m.rss) + kv("file", m.cache) + kv("kernel", 311296) + kv("kernel_stack", 0) +
                  kv("pagetables", 159744) + kv("sec_pagetables", 0) + kv("percpu", 0) + kv("sock", 0) +
                  kv("vmalloc", 0) + kv("shmem", 0) + kv("file_mapped", 0) + kv("file_dirty", 0) +
                  kv("file_writeback", 0) + kv("swapcached", 0) + kv("anon_thp", 0) + kv("file_thp", 0) +
                  kv("shmem_thp", 0) + kv("inactive_anon", m.rss) + kv("active_anon", 0) +
                  kv("inactive_file", m.inactive_file) + kv("active_file", m.active_file) + kv("unevictable", 0) +
                  kv("slab_reclaimable", 119288) + kv("slab_unreclaimable", 6312) + kv("slab", 125600);
  for (const char* k : {"workingset_refault_anon", "workingset_refault_file", "workingset_activate_anon",
                        "workingset_activate_file", "workingset_restore_anon", "workingset_restore_file",
                        "workingset_nodereclaim", "pgscan", "pgsteal", "pgscan_kswapd", "pgscan_direct",
                        "pgsteal_kswapd", "pgsteal_direct", "pgfault", "pgmajfault", "pgrefill", "pgactivate",
                        "pgdeactivate", "pglazyfree", "pglazyfreed", "thp_fault_alloc", "thp_collapse_alloc"}) {
    s += kv(k, 0);
  }
  return s;
}

inline std::string psi_text(double some10, double full10) {
  char b[256];
  std::snprintf(b, sizeof b, "some avg10=%.2f avg60=%.2f avg300=%.2f total=%llu\nfull avg10=%.2f avg60=%.2f avg300=%.2f total=%llu\n",
                some10, some10 / 2, some10 / 4, 123456ULL, full10, full10 / 2, full10 / 4, 65432ULL);
  return b;
}

/// A whole fake node. Layout follows the real one:
///   <root>/sys/fs/cgroup/{memory,pids,freezer,unified}   (v1 / hybrid)
///   <root>/sys/fs/cgroup                                 (v2)
///   <root>/proc/{meminfo,loadavg,pressure/*,sys/...,self/mountinfo}
///   <root>/var/lib/kubelet, <root>/var/log/pods
class FakeNode {
 public:
  FakeNode(CgroupVersion version, CgroupDriver driver) : version_(version), driver_(driver) {
    root_ = dir_.path();
    mount_ = root_ + "/sys/fs/cgroup";
    std::string mi = "22 27 0:21 / /proc rw,relatime - proc proc rw\n";
    mi += "31 23 0:28 / " + mount_ + " rw,relatime - tmpfs tmpfs rw,mode=755\n";
    if (version == CgroupVersion::V2) {
      mi = "27 23 0:24 / " + mount_ + " rw,relatime - cgroup2 cgroup2 rw,nsdelegate\n";
      memory_ = pids_ = unified_ = mount_;
      write_text(mount_ + "/cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
    } else {
      memory_ = mount_ + "/memory";
      pids_ = mount_ + "/pids";
      freezer_ = mount_ + "/freezer";
      mi += "35 31 0:32 / " + memory_ + " rw,relatime - cgroup cgroup rw,memory\n";
      mi += "39 31 0:36 / " + pids_ + " rw,relatime - cgroup cgroup rw,pids\n";
      mi += "37 31 0:34 / " + freezer_ + " rw,relatime - cgroup cgroup rw,freezer\n";
      mkdirs(pids_);
      mkdirs(freezer_);
      if (version == CgroupVersion::Hybrid) {
        unified_ = mount_ + "/unified";
        mi += "41 31 0:38 / " + unified_ + " rw,relatime - cgroup2 cgroup2 rw\n";
        write_text(unified_ + "/cgroup.controllers", "\n");
      }
    }
    write_text(root_ + "/proc/self/mountinfo", mi);
    kubepods_rel_ = driver == CgroupDriver::Systemd ? "kubepods.slice" : "kubepods";
    set_meminfo(8ULL << 30, 0);
    set_root_memory(FakePodMemory{2ULL << 30, 1ULL << 30, 1ULL << 30, 512ULL << 20, 256ULL << 20});
    write_text(root_ + "/proc/loadavg", "0.03 0.15 0.08 1/391 6537\n");
    write_text(root_ + "/proc/sys/kernel/pid_max", "32768\n");
    write_text(root_ + "/proc/sys/kernel/threads-max", "192731\n");
    write_text(root_ + "/proc/sys/vm/min_free_kbytes", "67584\n");
    write_text(root_ + "/proc/pressure/memory", psi_text(1.5, 0.5));
    write_text(root_ + "/proc/pressure/io", psi_text(2.0, 1.0));
    write_text(root_ + "/proc/pressure/cpu", psi_text(3.0, 0.0));
    mkdirs(root_ + "/var/lib/kubelet/pods");
    mkdirs(root_ + "/var/log/pods");
    FakePodMemory kp{1ULL << 30, 768ULL << 20, 256ULL << 20, 128ULL << 20, 64ULL << 20};
    kp.limit = 6ULL << 30;
    write_memcg(memory_ + "/" + kubepods_rel_, kp);
    if (driver == CgroupDriver::Systemd) {
      mkdirs(memory_ + "/kubepods.slice/kubepods-burstable.slice");
      mkdirs(memory_ + "/kubepods.slice/kubepods-besteffort.slice");
    } else {
      mkdirs(memory_ + "/kubepods/burstable");
      mkdirs(memory_ + "/kubepods/besteffort");
    }
  }

  const std::string& root() const { return root_; }
  const std::string& memory_mount() const { return memory_; }
  std::string kubepods() const { return memory_ + "/" + kubepods_rel_; }

  ObserveConfig config() const {
    ObserveConfig c;
    c.cgroup_mount = mount_;
    c.proc_root = root_ + "/proc";
    c.nodefs_path = root_ + "/var/lib/kubelet";
    c.imagefs_path = root_ + "/var/lib/containerd";  // absent: falls back to nodefs
    c.pod_logs_path = root_ + "/var/log/pods";
    c.driver = CgroupDriver::Auto;
    return c;
  }

  void set_meminfo(uint64_t total, uint64_t hugetlb) {
    auto kb = [](uint64_t b) { return std::to_string(b / 1024) + " kB\n"; };
    std::string s = "MemTotal:       " + kb(total) + "MemFree:        " + kb(total / 2) +
                    "MemAvailable:   " + kb(total / 2) + "Buffers:          " + kb(0) + "Cached:         " + kb(total / 8) +
                    "SwapCached:            0 kB\nActive:         " + kb(total / 8) + "SwapTotal:             0 kB\n"
                    "SwapFree:              0 kB\nHugePages_Total:       " + std::to_string(hugetlb / (2 << 20)) +
                    "\nHugePages_Free:        0\nHugePages_Rsvd:        0\nHugePages_Surp:        0\n"
                    "Hugepagesize:       2048 kB\nHugetlb:        " + kb(hugetlb) + "DirectMap4k:      " + kb(total);
    write_text(root_ + "/proc/meminfo", s);
  }

  /// The root memcg (v1: usage_in_bytes + total_*; v2: memory.stat only).
  void set_root_memory(const FakePodMemory& m) {
    if (version_ == CgroupVersion::V2) {
      write_text(memory_ + "/memory.stat", v2_memory_stat(m));
    } else {
      write_text(memory_ + "/memory.usage_in_bytes", std::to_string(m.usage) + "\n");
      write_text(memory_ + "/memory.stat", v1_memory_stat(m));
    }
  }

  void write_memcg(const std::string& dir, const FakePodMemory& m) {
    mkdirs(dir);
    if (version_ == CgroupVersion::V2) {
      write_text(dir + "/memory.current", std::to_string(m.usage) + "\n");
      write_text(dir + "/memory.stat", v2_memory_stat(m));
      write_text(dir + "/memory.max", m.limit ? std::to_string(*m.limit) + "\n" : "max\n");
      write_text(dir + "/memory.events", "low 0\nhigh 262\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n");
      write_text(dir + "/memory.pressure", psi_text(4.0, 2.0));
      write_text(dir + "/pids.current", std::to_string(m.pids) + "\n");
    } else {
      write_text(dir + "/memory.usage_in_bytes", std::to_string(m.usage) + "\n");
      write_text(dir + "/memory.stat", v1_memory_stat(m));
      write_text(dir + "/memory.limit_in_bytes", std::to_string(m.limit.value_or(9223372036854771712ULL)) + "\n");
      write_text(dir + "/cgroup.procs", "");
    }
  }

  /// The pod cgroup's directory (memory hierarchy) for a uid and QoS.
  std::string pod_dir(const std::string& uid, QosClass qos) const {
    if (driver_ == CgroupDriver::Systemd) {
      std::string u = uid;
      for (char& ch : u) {
        if (ch == '-') ch = '_';
      }
      switch (qos) {
        case QosClass::Guaranteed: return memory_ + "/kubepods.slice/kubepods-pod" + u + ".slice";
        case QosClass::Burstable:
          return memory_ + "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + u + ".slice";
        case QosClass::BestEffort:
          return memory_ + "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + u + ".slice";
      }
    }
    switch (qos) {
      case QosClass::Guaranteed: return memory_ + "/kubepods/pod" + uid;
      case QosClass::Burstable: return memory_ + "/kubepods/burstable/pod" + uid;
      case QosClass::BestEffort: return memory_ + "/kubepods/besteffort/pod" + uid;
    }
    return {};
  }

  /// Creates a pod cgroup with one container (and its mirrors in the pids,
  /// freezer and unified hierarchies where they exist). Returns its path.
  std::string add_pod(const std::string& uid, QosClass qos, const FakePodMemory& m, const std::string& container = "abc123") {
    std::string dir = pod_dir(uid, qos);
    write_memcg(dir, m);
    std::string cname = driver_ == CgroupDriver::Systemd ? "cri-containerd-" + container + ".scope" : container;
    FakePodMemory cm = m;
    write_memcg(dir + "/" + cname, cm);
    std::string rel = dir.substr(memory_.size());
    if (version_ != CgroupVersion::V2) {
      write_text(pids_ + rel + "/pids.current", std::to_string(m.pids) + "\n");
      mkdirs(freezer_ + rel);
      if (version_ == CgroupVersion::Hybrid) write_text(unified_ + rel + "/memory.pressure", psi_text(4.0, 2.0));
    }
    return dir;
  }

  void remove_pod(const std::string& uid, QosClass qos) {
    std::string dir = pod_dir(uid, qos);
    std::string rel = dir.substr(memory_.size());
    TempDir::remove_tree(dir);
    if (version_ != CgroupVersion::V2) {
      TempDir::remove_tree(pids_ + rel);
      TempDir::remove_tree(freezer_ + rel);
      if (!unified_.empty()) TempDir::remove_tree(unified_ + rel);
    }
  }

 private:
  TempDir dir_;
  CgroupVersion version_;
  CgroupDriver driver_;
  std::string root_, mount_, memory_, pids_, freezer_, unified_, kubepods_rel_;
};

}  // namespace pressured::testing
