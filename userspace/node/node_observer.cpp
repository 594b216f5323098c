// NodeObserver over the kernel's files: signals per docs/observation.md and
// every pod's usage, read through kept-open fds.
#include <dirent.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "cgroup/discovery.hpp"
#include "cgroup/paths.hpp"
#include "kernel/cgroup_id.hpp"
#include "kernel/file.hpp"
#include "kernel/hot_file.hpp"
#include "kernel/parse.hpp"
#include "node/containerfs_layout.hpp"
#include "node/formulas.hpp"
#include "pressured/observer.hpp"

namespace pressured {
namespace {

using kernel::HotFile;

enum class Group : uint8_t { Memory, Allocatable, Nodefs, Imagefs, Pid, PsiMemory, PsiIo, Containerfs, Count };

Group group_of(Signal s) {
  switch (s) {
    case Signal::MemoryAvailable: return Group::Memory;
    case Signal::AllocatableMemoryAvailable: return Group::Allocatable;
    case Signal::NodefsAvailable:
    case Signal::NodefsInodesFree: return Group::Nodefs;
    case Signal::ImagefsAvailable:
    case Signal::ImagefsInodesFree: return Group::Imagefs;
    case Signal::PidAvailable: return Group::Pid;
    case Signal::MemoryPressureSomeAvg10:
    case Signal::MemoryPressureFullAvg10:
    case Signal::MemoryPressureSomeAvg60:
    case Signal::MemoryPressureFullAvg60: return Group::PsiMemory;
    case Signal::IoPressureFullAvg10: return Group::PsiIo;
    case Signal::ContainerfsAvailable:
    case Signal::ContainerfsInodesFree: return Group::Containerfs;
  }
  return Group::Memory;
}

constexpr std::array<std::string_view, static_cast<std::size_t>(Group::Count)> kGroupNames{
    "memory", "allocatable memory", "nodefs", "imagefs", "pid", "memory PSI", "io PSI", "containerfs"};

bool is_gone(int code) { return code == ENOENT || code == ENODEV; }
bool not_supported(int code) { return code == ENOENT || code == EOPNOTSUPP || code == ENOTSUP; }

struct PodState {
  PodCgroup cg;
  HotFile usage, stat, limit, events, pressure, pids;
  std::optional<uint64_t> limit_cache;
  bool limit_read = false;
  bool pids_file_missing = false;
  PodUsage last_usage;
  uint64_t last_pids = 0;
  uint64_t seen_gen = 0;

  void open_paths(const CgroupLayout& l) {
    const std::string& m = cg.memory_path;
    bool v2 = l.memory_on_v2;
    usage.reset(m + (v2 ? "/memory.current" : "/memory.usage_in_bytes"));
    stat.reset(m + "/memory.stat");
    limit.reset(m + (v2 ? "/memory.max" : "/memory.limit_in_bytes"));
    events.reset(v2 ? m + "/memory.events" : std::string());
    pressure.reset(cg.unified_path.empty() ? std::string() : cg.unified_path + "/memory.pressure");
    pids.reset(cg.pids_path.empty() ? std::string() : cg.pids_path + "/pids.current");
    limit_read = false;
    pids_file_missing = cg.pids_path.empty();
  }
};

class KernelNodeObserver final : public NodeObserver {
 public:
  KernelNodeObserver(ObserveConfig config, CgroupLayout layout, std::shared_ptr<PodMetadataSource> metadata,
                     std::shared_ptr<PodStorageSource> storage)
      : cfg_(std::move(config)), layout_(std::move(layout)), metadata_(std::move(metadata)), storage_(std::move(storage)) {
    v2_ = layout_.memory_on_v2;
    const std::string& proc = cfg_.proc_root;
    meminfo_.reset(proc + "/meminfo");
    root_stat_.reset(layout_.memory_mount + "/memory.stat");
    if (!v2_) root_usage_.reset(layout_.memory_mount + "/memory.usage_in_bytes");
    const std::string& kp = layout_.kubepods_memory_path;
    kp_usage_.reset(kp + (v2_ ? "/memory.current" : "/memory.usage_in_bytes"));
    kp_stat_.reset(kp + "/memory.stat");
    kp_limit_.reset(kp + (v2_ ? "/memory.max" : "/memory.limit_in_bytes"));
    if (!kp.empty()) {
      // Never above the configured root: kubepods' parent is the sandbox in
      // tests and the demo.
      scope_path_ = cgroup::normalize_path(std::filesystem::path(kp).parent_path().string());
      scope_is_root_ = !layout_.memory_mount.empty() && scope_path_ == cgroup::normalize_path(layout_.memory_mount);
      if (!scope_is_root_) scope_usage_.reset(scope_path_ + usage_file());
    }
    psi_memory_.reset(proc + "/pressure/memory");
    psi_io_.reset(proc + "/pressure/io");
    psi_cpu_.reset(proc + "/pressure/cpu");
    loadavg_.reset(proc + "/loadavg");
    // sysctls, re-read at every full observation.
    min_free_kbytes_.reset(proc + "/sys/vm/min_free_kbytes");
    pid_max_file_.reset(proc + "/sys/kernel/pid_max");
    threads_max_file_.reset(proc + "/sys/kernel/threads-max");
    buf_.reserve(8192);
    // Once, as the kubelet does: a runtime moved to other disks restarts anyway.
    containerfs_ = node::detect_containerfs(cfg_);
  }

  const CgroupLayout& layout() const override { return layout_; }

  Result<NodeSnapshot> observe(TimePoint now) override {
    ++counters_.observations;
    NodeSnapshot snap;
    snap.taken_at = now;
    snap.containerfs_layout = containerfs_.layout;
    refresh_static();
    for (std::size_t g = 0; g < static_cast<std::size_t>(Group::Count); ++g) {
      auto r = read_group(static_cast<Group>(g), now, snap.signals);
      if (!r) {
        ++counters_.stale_signal_reads;
        warn_once(warned_groups_[g], "{} signals: read failed, keeping the last good value (stale): {}",
                  kGroupNames[g], r.error().message);
        for (const auto& si : kSignals) {
          if (group_of(si.signal) != static_cast<Group>(g)) continue;
          auto& last = last_good_[static_cast<std::size_t>(si.signal)];
          if (last) {
            SignalObservation o = *last;
            o.stale = true;
            snap.signal(si.signal) = o;
          }
        }
      }
    }
    snap.psi_memory = psi_memory_detail_;
    snap.psi_io = psi_io_detail_;
    if (auto t = psi_cpu_.read(buf_)) {
      if (auto p = kernel::parse_psi(*t)) snap.psi_cpu = *p;
    }
    if (!snap.signal(Signal::MemoryAvailable)) {
      return Error{EIO, "memory.available could not be read: " + memory_error_};
    }
    observe_pods(now, snap.pods);
    return snap;
  }

  Result<SignalObservation> refresh_signal(Signal signal, TimePoint now) override {
    if (!static_loaded_) refresh_static();
    SignalSet set{};
    auto r = read_group(group_of(signal), now, set);
    if (!r) {
      ++counters_.stale_signal_reads;
      return r.error();
    }
    const auto& o = set[static_cast<std::size_t>(signal)];
    if (!o) return Error{ENOTSUP, std::string(name(signal)) + " is not observed on this node"};
    return *o;
  }

  Result<void> refresh_pod(Pod& pod, TimePoint now) override {
    auto it = pods_.find(pod.cgroup_path);
    if (it == pods_.end()) {
      if (pod.cgroup_path.empty()) {
        pod.stale = true;
        return Error{EINVAL, "pod " + pod.uid + " has no cgroup path"};
      }
      cgroup::PodDir d{pod.uid, pod.qos, pod.cgroup_path, cgroup::dir_inode(pod.cgroup_path)};
      if (d.ino == 0) {
        pod.stale = true;
        ++counters_.vanished_pods;
        return Error{ENOENT, "pod cgroup " + pod.cgroup_path + " is gone"};
      }
      it = add_state(d);
    }
    PodState& st = it->second;
    uint64_t ino = cgroup::dir_inode(st.cg.memory_path);
    if (ino == 0) {
      pod.stale = true;
      ++counters_.vanished_pods;
      pods_.erase(it);
      return Error{ENOENT, "pod cgroup " + pod.cgroup_path + " is gone"};
    }
    if (ino != st.cg.cgroup_id) recreate(st, ino);
    auto r = read_pod(st, pod, false);
    if (!r) {
      pod.stale = true;
      if (is_gone(r.error().code) && cgroup::dir_inode(st.cg.memory_path) == 0) {
        ++counters_.vanished_pods;
        pods_.erase(it);
      } else {
        ++counters_.stale_pod_reads;
      }
      return r;
    }
    pod.stale = false;
    pod.usage_observed_at = now;
    pod.cgroup_id = st.cg.cgroup_id;
    pod.unified_cgroup_id = st.cg.unified_cgroup_id;
    return {};
  }

  Result<void> refresh_memory_usage(const std::vector<Pod*>& pods, TimePoint now) override {
    (void)now;
    if (!qos_stamps_taken_ || qos_dir_stamps() != qos_stamps_) {
      return Error{ESTALE, "the pod cgroup set changed since the last full observation"};
    }
    if (page_reader_ && !pods.empty()) {
      const std::string root = batch_root(pods);
      // Pods sit right under a tier, two levels under kubepods (Guaranteed: one).
      const uint32_t depth = root == layout_.kubepods_memory_path ? 2 : 1;
      if (auto r = page_reader_->read(root, depth, page_samples_); r) {
        ++counters_.page_counter_batches;
        return usage_from_batch(pods);
      } else {
        // Once: a kernel that refuses the walk refuses it every time, and the
        // decision must not pay for a failing batch before the files.
        spdlog::warn("observer: batched page-counter read of {} failed ({}); decisions read one usage file per "
                     "contending pod from now on",
                     root, r.error().message);
        page_reader_.reset();
        counters_.page_counter_batch = 0;
      }
    }
    for (Pod* pod : pods) {
      auto it = pods_.find(pod->cgroup_path);
      if (it == pods_.end()) return Error{ESTALE, "pod " + pod->uid + " is not in the last full observation"};
      // A removed cgroup's kept-open file fails with ENODEV: the read below
      // then sends the caller to a full observation.
      auto u = read_number(it->second.usage);
      if (!u) return Error{ESTALE, "pod " + pod->uid + ": " + u.error().message};
      pod->memory_usage_bytes = *u;
    }
    return {};
  }

  void set_page_counter_reader(std::shared_ptr<PageCounterReader> reader) override {
    page_reader_ = std::move(reader);
    counters_.page_counter_batch = page_reader_ ? 1 : 0;
  }

  std::vector<PodCgroup> list_pods() override {
    std::vector<PodCgroup> out;
    for (const auto& d : cgroup::scan_pods(layout_)) out.push_back(cgroup::describe_pod(layout_, d, true));
    std::sort(out.begin(), out.end(), [](const PodCgroup& a, const PodCgroup& b) { return a.memory_path < b.memory_path; });
    return out;
  }

  MemcgCounters read_memcg_counters() override {
    MemcgCounters c;
    c.kubepods_path = layout_.kubepods_memory_path;
    if (c.kubepods_path.empty()) return c;
    c.kubepods_usage = optional_number(kp_usage_);
    c.scope_path = scope_path_;
    c.scope_is_root = scope_is_root_;
    if (!scope_is_root_) {
      c.scope_file_usage = optional_number(scope_usage_);
      return c;
    }
    if (!v2_) c.scope_file_usage = optional_number(root_usage_);  // v2: the root has no usage file
    c.children_usage = read_children_usage();
    return c;
  }

  std::vector<MemcgScope> memcg_scopes() override {
    std::vector<MemcgScope> out;
    const auto& kp = layout_.kubepods_memory_path;
    if (kp.empty()) return out;
    if (auto id = kernel::cgroup_id_of(kp)) out.push_back({*id, kp, "kubepods"});
    for (const char* tier : {"burstable", "besteffort"}) {
      for (const std::string& dir : {kp + "/" + tier, kp + "/kubepods-" + tier + ".slice"}) {
        if (auto id = kernel::cgroup_id_of(dir)) out.push_back({*id, dir, tier});
      }
    }
    return out;
  }

  const ObserverCounters& counters() const override { return counters_; }

 private:
  template <typename... Args>
  void warn_once(bool& flag, spdlog::format_string_t<Args...> fmt, Args&&... args) {
    if (flag) return;
    flag = true;
    spdlog::warn(fmt, std::forward<Args>(args)...);
  }

  // Values that change only with hotplug or sysctl writes: read on every full
  // observation, reused by refresh_signal().
  void refresh_static() {
    if (auto t = meminfo_.read(buf_)) {
      if (auto mi = kernel::parse_meminfo(*t)) meminfo_cache_ = *mi;
    }
    if (auto t = min_free_kbytes_.read(buf_)) {
      if (auto v = kernel::parse_single_value(*t); v && *v) min_free_bytes_ = **v * 1024;
    }
    if (auto t = pid_max_file_.read(buf_)) {
      if (auto v = kernel::parse_single_value(*t); v && *v) pid_max_ = **v;
    }
    if (auto t = threads_max_file_.read(buf_)) {
      if (auto v = kernel::parse_single_value(*t); v && *v) threads_max_ = **v;
    }
    kp_limit_read_ = false;
    static_loaded_ = true;
  }

  void set(SignalSet& out, Signal s, double value, double capacity, TimePoint now) {
    SignalObservation o{value, capacity, now, false};
    out[static_cast<std::size_t>(s)] = o;
    last_good_[static_cast<std::size_t>(s)] = o;
  }

  Result<uint64_t> read_number(HotFile& f) {
    auto t = f.read(buf_);
    if (!t) return t.error();
    auto v = kernel::parse_single_value(*t);
    if (!v) return Error{v.error().code, f.path() + ": " + v.error().message};
    if (!*v) return Error{EINVAL, f.path() + ": unexpected 'max'"};
    return **v;
  }

  const char* usage_file() const { return v2_ ? "/memory.current" : "/memory.usage_in_bytes"; }

  std::optional<uint64_t> optional_number(HotFile& f) {
    auto v = read_number(f);
    if (!v) return std::nullopt;
    return *v;
  }

  // The page counter of a hierarchy root is the sum of its children's
  // (charges propagate up the page counters; the root's own usage file, where
  // there is one, is computed from statistics instead). Each child's usage
  // file stays open between reads; children that went away are dropped.
  std::optional<uint64_t> read_children_usage() {
    std::optional<uint64_t> sum;
    std::error_code ec;
    std::map<std::string, HotFile> seen;
    for (std::filesystem::directory_iterator it(scope_path_, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code type_ec;
      if (!it->is_directory(type_ec) || it->is_symlink(type_ec)) continue;
      const std::string name = it->path().filename().string();
      auto kept = root_children_.find(name);
      HotFile f = kept != root_children_.end() ? std::move(kept->second) : HotFile(it->path().string() + usage_file());
      if (auto u = optional_number(f)) sum = sum.value_or(0) + *u;
      seen.emplace(name, std::move(f));
    }
    root_children_ = std::move(seen);
    return sum;
  }

  Result<kernel::MemoryStat> read_stat(HotFile& f) {
    auto t = f.read(buf_);
    if (!t) return t.error();
    auto st = kernel::parse_memory_stat(*t, v2_);
    if (!st) return Error{st.error().code, f.path() + ": " + st.error().message};
    return *st;
  }

  // Ok(true): observed; Ok(false): not observed on this node; Error: read failed.
  Result<bool> read_group(Group g, TimePoint now, SignalSet& out) {
    switch (g) {
      case Group::Memory: {
        if (!meminfo_cache_) {
          auto t = meminfo_.read(buf_);
          if (!t) return fail_memory(t.error());
          auto mi = kernel::parse_meminfo(*t);
          if (!mi) return fail_memory(Error{mi.error().code, meminfo_.path() + ": " + mi.error().message});
          meminfo_cache_ = *mi;
        }
        node::MemoryInputs in;
        in.meminfo = *meminfo_cache_;
        in.min_free_bytes = min_free_bytes_;
        auto st = read_stat(root_stat_);
        if (!st) return fail_memory(st.error());
        in.root_stat = *st;
        if (v2_) {
          in.root_usage = st->anon + st->file;  // runc/cadvisor: the v2 root has no memory.current
        } else {
          auto u = read_number(root_usage_);
          if (!u) return fail_memory(u.error());
          in.root_usage = *u;
        }
        auto r = node::memory_available(in, cfg_.memory_available_mode, cfg_.reclaimable_active_file_percent);
        set(out, Signal::MemoryAvailable, r.available, r.capacity, now);
        return true;
      }
      case Group::Allocatable: {
        if (cgroup::dir_inode(layout_.kubepods_memory_path) == 0) return false;
        if (!cfg_.allocatable_memory_bytes && !kp_limit_read_) {
          auto t = kp_limit_.read(buf_);
          if (!t) return t.error();
          auto v = kernel::parse_single_value(*t);
          if (!v) return Error{v.error().code, kp_limit_.path() + ": " + v.error().message};
          kp_limit_value_ = (*v && !node::is_unlimited_v1(**v)) ? **v : 0;  // 0: unlimited
          kp_limit_read_ = true;
        }
        uint64_t allocatable = cfg_.allocatable_memory_bytes.value_or(kp_limit_value_);
        if (allocatable == 0) {
          if (!meminfo_cache_) return false;
          allocatable = meminfo_cache_->mem_total;
        }
        auto u = read_number(kp_usage_);
        if (!u) return u.error();
        auto st = read_stat(kp_stat_);
        if (!st) return st.error();
        auto r = node::allocatable_memory_available(allocatable, *u, st->inactive_file);
        set(out, Signal::AllocatableMemoryAvailable, r.available, r.capacity, now);
        return true;
      }
      case Group::Nodefs:
      case Group::Imagefs:
      case Group::Containerfs: {
        const bool image = g == Group::Imagefs;
        const bool container = g == Group::Containerfs;
        // containerfs: the writable layers' filesystem, whatever the layout
        // (the kubelet reports it also when it is nodefs or imagefs).
        if (container && containerfs_.layout == ContainerfsLayout::Unknown) return false;
        struct statvfs vfs {};
        const std::string& path = container ? containerfs_.containerfs_path : image ? cfg_.imagefs_path : cfg_.nodefs_path;
        int rc = path.empty() ? -1 : ::statvfs(path.c_str(), &vfs);
        if (rc != 0) {
          int err = path.empty() ? ENOENT : errno;
          if (err != ENOENT || container) return Error::from_errno(err, "statvfs " + path);
          if (!image) return false;
          // No separate imagefs: it is the nodefs, as the kubelet sees it.
          if (cfg_.nodefs_path.empty() || ::statvfs(cfg_.nodefs_path.c_str(), &vfs) != 0) return false;
        }
        const double frsize = static_cast<double>(vfs.f_frsize != 0 ? vfs.f_frsize : vfs.f_bsize);
        const Signal bytes = container ? Signal::ContainerfsAvailable : image ? Signal::ImagefsAvailable : Signal::NodefsAvailable;
        const Signal inodes = container ? Signal::ContainerfsInodesFree : image ? Signal::ImagefsInodesFree : Signal::NodefsInodesFree;
        set(out, bytes, static_cast<double>(vfs.f_bavail) * frsize, static_cast<double>(vfs.f_blocks) * frsize, now);
        if (vfs.f_files != 0) {  // filesystems without inode limits (btrfs) report 0
          set(out, inodes, static_cast<double>(vfs.f_ffree), static_cast<double>(vfs.f_files), now);
        }
        return true;
      }
      case Group::Pid: {
        if (pid_max_ == 0) {
          auto t = pid_max_file_.read(buf_);
          if (!t) return t.error();
          auto v = kernel::parse_single_value(*t);
          if (!v || !*v) return Error{EINVAL, "malformed kernel.pid_max"};
          pid_max_ = **v;
        }
        auto t = loadavg_.read(buf_);
        if (!t) return t.error();
        auto tasks = kernel::parse_loadavg_tasks(*t);
        if (!tasks) return tasks.error();
        uint64_t max = node::max_pids(pid_max_, threads_max_);
        double avail = *tasks < max ? static_cast<double>(max - *tasks) : 0.0;
        set(out, Signal::PidAvailable, avail, static_cast<double>(max), now);
        return true;
      }
      case Group::PsiMemory:
      case Group::PsiIo: {
        const bool mem = g == Group::PsiMemory;
        HotFile& f = mem ? psi_memory_ : psi_io_;
        auto t = f.read(buf_);
        if (!t) {
          if (not_supported(t.error().code)) return false;
          return t.error();
        }
        auto p = kernel::parse_psi(*t);
        if (!p) return Error{p.error().code, f.path() + ": " + p.error().message};
        (mem ? psi_memory_detail_ : psi_io_detail_) = *p;
        if (mem) {
          set(out, Signal::MemoryPressureSomeAvg10, p->some.avg10, 100, now);
          set(out, Signal::MemoryPressureSomeAvg60, p->some.avg60, 100, now);
          if (p->full) {
            set(out, Signal::MemoryPressureFullAvg10, p->full->avg10, 100, now);
            set(out, Signal::MemoryPressureFullAvg60, p->full->avg60, 100, now);
          }
        } else if (p->full) {
          set(out, Signal::IoPressureFullAvg10, p->full->avg10, 100, now);
        }
        return true;
      }
      case Group::Count: break;
    }
    return false;
  }

  Result<bool> fail_memory(const Error& e) {
    memory_error_ = e.message;
    return e;
  }

  std::unordered_map<std::string, PodState>::iterator add_state(const cgroup::PodDir& d) {
    PodState st;
    st.cg = cgroup::describe_pod(layout_, d, false);
    st.open_paths(layout_);
    return pods_.emplace(d.memory_path, std::move(st)).first;
  }

  // The pod cgroup was removed and created again under the same name: the
  // old fds read the dead cgroup, so reopen everything.
  void recreate(PodState& st, uint64_t ino) {
    ++counters_.reopened_cgroups;
    cgroup::PodDir d{st.cg.uid, st.cg.qos, st.cg.memory_path, ino};
    st.cg = cgroup::describe_pod(layout_, d, false);
    st.open_paths(layout_);
    st.limit_cache.reset();
  }

  // Reads one pod's usage into `pod` (usage, limit, events, pressure, pids).
  Result<void> read_pod(PodState& st, Pod& pod, bool full) {
    auto u = read_number(st.usage);
    if (!u) return u.error();
    auto ms = read_stat(st.stat);
    if (!ms) return ms.error();
    PodUsage usage = pod.usage;
    usage.memory_working_set_bytes = node::working_set(*u, ms->inactive_file);
    usage.memory_rss_bytes = ms->anon;
    usage.memory_cache_bytes = ms->file;
    usage.memory_active_file_bytes = ms->active_file;
    usage.memory_inactive_file_bytes = ms->inactive_file;
    pod.memory_usage_bytes = *u;
    if (full || !st.limit_read) {
      auto t = st.limit.read(buf_);
      if (t) {
        if (auto v = kernel::parse_single_value(*t)) {
          st.limit_cache = (*v && !(!v2_ && node::is_unlimited_v1(**v))) ? *v : std::nullopt;
          st.limit_read = true;
        }
      } else if (!is_gone(t.error().code)) {
        return t.error();
      }
    }
    pod.memory_limit_bytes = st.limit_cache;
    if (!st.events.path().empty()) {
      auto t = st.events.read(buf_);
      if (t) {
        auto ev = kernel::parse_memory_events(*t);
        if (!ev) return Error{ev.error().code, st.events.path() + ": " + ev.error().message};
        pod.memory_events = *ev;
      } else if (!is_gone(t.error().code)) {
        return t.error();
      }
    }
    if (!st.pressure.path().empty()) {
      auto t = st.pressure.read(buf_);
      if (t) {
        if (auto p = kernel::parse_psi(*t)) pod.memory_pressure = *p;
      } else if (!not_supported(t.error().code) && t.error().code != ENODEV) {
        return t.error();
      }
    }
    if (!st.pids_file_missing) {
      auto n = read_number(st.pids);
      if (n) {
        usage.pids = *n;
      } else if (is_gone(n.error().code)) {
        st.pids_file_missing = true;  // pids controller not enabled here: count cgroup.procs instead
      } else {
        return n.error();
      }
    }
    if (st.pids_file_missing) {
      if (full) {
        uint64_t n = 0;
        auto count = [&](const std::string& dir) {
          if (auto t = kernel::read_file(dir + "/cgroup.procs")) n += kernel::count_lines(*t);
        };
        count(st.cg.memory_path);
        for (const auto& c : cgroup::scan_containers(st.cg.memory_path)) count(c.memory_path);
        st.last_pids = n;
      }
      usage.pids = st.last_pids;
    }
    pod.usage = usage;
    st.last_usage = usage;
    return {};
  }

  // The smallest subtree to walk: the contenders' QoS tier directory when
  // they share one (contenders mostly are one QoS class), else kubepods.
  // From the pods' own paths: no lookup per pod on this path.
  std::string batch_root(const std::vector<Pod*>& pods) const {
    std::string_view common;
    for (const Pod* pod : pods) {
      std::string_view path = pod->cgroup_path;
      std::string_view parent = path.substr(0, path.rfind('/'));
      if (common.empty()) {
        common = parent;
      } else if (parent != common) {
        return layout_.kubepods_memory_path;
      }
    }
    return common.empty() ? layout_.kubepods_memory_path : std::string(common);
  }

  // The contenders' usage from one batch (page_samples_), by the cgroup id
  // the last full observation gave each pod: a pod whose id is not in the
  // walk was removed or recreated since.
  Result<void> usage_from_batch(const std::vector<Pod*>& pods) {
    std::sort(page_samples_.begin(), page_samples_.end(),
              [](const PageCounterSample& a, const PageCounterSample& b) { return a.cgroup_id < b.cgroup_id; });
    for (Pod* pod : pods) {
      const uint64_t id = pod->cgroup_id;
      auto s = std::lower_bound(page_samples_.begin(), page_samples_.end(), id,
                                [](const PageCounterSample& a, uint64_t v) { return a.cgroup_id < v; });
      if (id == 0 || s == page_samples_.end() || s->cgroup_id != id) {
        return Error{ESTALE, "pod " + pod->uid + ": its cgroup is gone or was recreated since the last full observation"};
      }
      pod->memory_usage_bytes = s->usage_bytes;
    }
    return {};
  }

  // The entries of the directories pods live in (kubepods and its QoS
  // tiers), by name and inode number, hashed in any order: a pod cgroup
  // created, removed or recreated changes them. A link count alone (2 + the
  // subdirectories) missed one pod removed and another created in the same
  // tier. One getdents per directory; 0 when absent.
  using QosStamps = std::array<uint64_t, 3>;
  QosStamps qos_dir_stamps() const {
    QosStamps out{};
    std::size_t i = 0;
    for (const auto& q : cgroup::qos_dirs(layout_.driver)) {
      if (i == out.size()) break;
      const std::string dir =
          q.rel.empty() ? layout_.kubepods_memory_path : layout_.kubepods_memory_path + "/" + q.rel;
      out[i++] = directory_stamp(dir);
    }
    return out;
  }

  static uint64_t mix(uint64_t x) {  // splitmix64's finalizer
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  }

  static uint64_t directory_stamp(const std::string& dir) {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return 0;
    uint64_t stamp = 1;  // present, even when empty
    while (const struct dirent* e = ::readdir(d)) {
      const uint64_t name = std::hash<std::string_view>{}(std::string_view(e->d_name));
      stamp += mix(name ^ mix(static_cast<uint64_t>(e->d_ino)));
    }
    ::closedir(d);
    return stamp;
  }

  // Mirror pods by the config hash their static pod's cgroup is named
  // after; rebuilt only when the source publishes a new map.
  void index_mirrors(const std::shared_ptr<const PodMetadataMap>& meta) {
    if (meta == indexed_meta_) return;
    indexed_meta_ = meta;
    mirror_index_.clear();
    if (!meta) return;
    for (const auto& [uid, md] : *meta) {
      if (!md.mirror_of.empty()) mirror_index_.emplace(md.mirror_of, &md);
    }
  }

  void observe_pods(TimePoint now, std::vector<Pod>& out) {
    ++gen_;
    // Taken before the scan: a pod cgroup created during it changes a stamp
    // and the next incremental read (refresh_memory_usage) refuses.
    qos_stamps_ = qos_dir_stamps();
    qos_stamps_taken_ = true;
    int err = 0;
    auto dirs = cgroup::scan_pods(layout_, &err);
    if (err != 0 && err != ENOENT) {
      // A short list would drop pods from the ranking, so a lower-ranked pod
      // could go first. Keep the pods of the last listing whose cgroups still
      // exist (same inode): only pods created since then can be missing.
      ++counters_.failed_pod_listings;
      std::unordered_set<std::string_view> listed;
      for (const auto& d : dirs) listed.insert(d.memory_path);
      std::vector<cgroup::PodDir> kept;
      for (const auto& [path, st] : pods_) {
        if (listed.count(path)) continue;
        uint64_t ino = cgroup::dir_inode(path);
        if (ino != 0 && ino == st.cg.cgroup_id) kept.push_back(cgroup::PodDir{st.cg.uid, st.cg.qos, path, ino});
      }
      warn_once(warned_kubepods_, "cannot list pods under {}: {}; keeping {} pods of the last listing",
                layout_.kubepods_memory_path, std::strerror(err), kept.size());
      for (auto& d : kept) dirs.push_back(std::move(d));
    } else if (err == ENOENT) {
      warn_once(warned_kubepods_, "no kubepods cgroup at {} yet: no pods observed", layout_.kubepods_memory_path);
    }
    std::sort(dirs.begin(), dirs.end(), [](const cgroup::PodDir& a, const cgroup::PodDir& b) { return a.memory_path < b.memory_path; });
    std::shared_ptr<const PodMetadataMap> meta = metadata_ ? metadata_->current() : nullptr;
    // Fail safe: while a configured source has no good answer (none yet, an
    // HTTP or TLS error, an unparsable answer), a pod it does not describe
    // might be critical or static; it is marked so the engine never evicts it.
    bool source_failing = false;
    std::string failing_why;
    if (metadata_) {
      auto st = metadata_->stats();
      source_failing = !st.last_success.has_value() || !st.last_error.empty();
      failing_why = st.last_error.empty() ? "no answer yet" : st.last_error;
    }
    index_mirrors(meta);
    std::unordered_set<std::string> seen_uids;
    uint64_t without_meta = 0, unevictable = 0, unevictable_failing = 0;
    bool new_unknown = false;
    std::unordered_map<std::string, TimePoint> unknown_since;
    out.reserve(dirs.size());
    for (const auto& d : dirs) {
      auto it = pods_.find(d.memory_path);
      if (it == pods_.end()) {
        it = add_state(d);
      } else if (it->second.cg.cgroup_id != d.ino) {
        recreate(it->second, d.ino);
      }
      PodState& st = it->second;
      st.seen_gen = gen_;
      Pod p;
      p.uid = st.cg.uid;
      p.qos = st.cg.qos;
      p.cgroup_path = st.cg.memory_path;
      p.cgroup_id = st.cg.cgroup_id;
      p.unified_cgroup_id = st.cg.unified_cgroup_id;
      auto r = read_pod(st, p, true);
      if (!r) {
        if (is_gone(r.error().code) && cgroup::dir_inode(st.cg.memory_path) == 0) {
          ++counters_.vanished_pods;  // deleted between the scan and the read
          continue;
        }
        ++counters_.stale_pod_reads;
        warn_once(warned_pod_read_, "pod {} marked stale: {}", p.uid, r.error().message);
        p.stale = true;
        p.usage = st.last_usage;
      } else {
        p.usage_observed_at = now;
      }
      if (meta) {
        // By the pod's own uid first: a mirror annotation (which a pod's
        // author may write) never takes a cgroup whose uid the source lists.
        const PodMetadata* found = nullptr;
        if (auto m = meta->find(p.uid); m != meta->end()) {
          found = &m->second;
        } else if (auto mi = mirror_index_.find(p.uid); mi != mirror_index_.end()) {
          found = mi->second;
        }
        if (found != nullptr) seen_uids.insert(found->uid);
        if (found != nullptr && found->unparsable) {
          p.name = found->name;
          p.namespace_ = found->namespace_;
          p.metadata_unavailable = true;
          ++unevictable;
          ++unevictable_failing;
          ++without_meta;
        } else if (found != nullptr) {
          const PodMetadata& md = *found;
          p.name = md.name;
          p.namespace_ = md.namespace_;
          p.priority = md.priority;
          p.critical = md.critical;
          p.static_pod = md.static_pod;
          p.daemonset = md.daemonset;
          p.termination_grace_period_seconds = md.termination_grace_period_seconds;
          p.requests = md.requests;
          p.limits = md.limits;
          p.local_storage = md.local_storage;
          p.memory_spec_unparsable = md.memory_spec_unparsable;
          p.storage_spec_unparsable = md.storage_spec_unparsable;
          p.metadata_known = true;
        } else {
          // Not (yet) listed while the source answers: a pod the source lags
          // (a watch behind by up to its timeout), or a static pod whose
          // mirror the API server does not have. The kubelet never evicts
          // what it cannot classify as non-critical, and neither does
          // pressured: unevictable until the source describes it.
          ++without_meta;
          p.metadata_unavailable = true;
          ++unevictable;
          if (source_failing) ++unevictable_failing;
          if (!known_unknown_.count(p.uid)) new_unknown = true;
          auto since = unknown_since_.find(p.uid);
          const TimePoint first = since == unknown_since_.end() ? now : since->second;
          unknown_since.emplace(p.uid, first);
          if (!source_failing && now - first >= kMetadataLagWarning && !warned_unknown_.count(p.uid)) {
            warned_unknown_.insert(p.uid);
            spdlog::warn("pod {} (cgroup {}) has had no metadata from {} for {}s while the source answers: it is "
                         "never evicted until the source lists it (a static pod without a mirror pod, or a "
                         "source that misses pods)",
                         p.uid, p.cgroup_path, metadata_->describe(),
                         std::chrono::duration_cast<std::chrono::seconds>(now - first).count());
          }
        }
      } else if (metadata_ && source_failing) {
        ++without_meta;
        p.metadata_unavailable = true;
        ++unevictable;
        ++unevictable_failing;
      }
      if (storage_) {
        if (auto du = storage_->lookup(p.uid)) {
          p.usage.ephemeral_storage_bytes = du->bytes;
          p.usage.inodes = du->inodes;
          p.storage_measured_at = du->measured_at;
          p.ephemeral_storage = du->breakdown;
        }
      }
      out.push_back(std::move(p));
    }
    for (auto it = pods_.begin(); it != pods_.end();) {
      if (it->second.seen_gen != gen_) it = pods_.erase(it);
      else ++it;
    }
    unknown_since_ = std::move(unknown_since);
    for (auto it = warned_unknown_.begin(); it != warned_unknown_.end();) {
      if (unknown_since_.count(*it)) ++it;
      else it = warned_unknown_.erase(it);
    }
    counters_.pods_without_metadata = without_meta;
    counters_.pods_unevictable_without_metadata = unevictable;
    // Logged on each change of the source's health; pods merely not listed
    // yet are counted, and logged only when that lasts (above).
    if (unevictable_failing > 0 && !protecting_) {
      spdlog::error("pod metadata unavailable ({}): {} pods known only from cgroups are never evicted until the "
                    "source answers; eviction can only pick pods with metadata",
                    source_failing ? failing_why : "unparsable pods in the answer", unevictable_failing);
    } else if (unevictable_failing == 0 && protecting_) {
      spdlog::info("pod metadata available again: every pod it lists can be ranked for eviction");
    }
    protecting_ = unevictable_failing > 0;
    uint64_t orphans = 0;
    if (meta) {
      for (const auto& [uid, md] : *meta) {
        if ((md.phase.empty() || md.phase == "Running") && !seen_uids.count(uid)) ++orphans;
      }
    }
    counters_.metadata_without_cgroup = orphans;
    if (metadata_ && new_unknown) {
      metadata_->request_refresh();  // the pod set changed: fetch metadata soon (never blocks)
      known_unknown_.clear();
      for (const auto& p : out) {
        if (!p.metadata_known) known_unknown_.insert(p.uid);
      }
    }
  }

  ObserveConfig cfg_;
  CgroupLayout layout_;
  node::ContainerfsDetection containerfs_;
  std::shared_ptr<PodMetadataSource> metadata_;
  std::shared_ptr<PodStorageSource> storage_;
  bool v2_ = false;
  bool protecting_ = false;  // some pods are unevictable for lack of metadata (logged on each change)

  HotFile meminfo_, root_usage_, root_stat_, kp_usage_, kp_stat_, kp_limit_, psi_memory_, psi_io_, psi_cpu_, loadavg_;
  HotFile min_free_kbytes_, pid_max_file_, threads_max_file_;
  std::string scope_path_;  // kubepods' parent
  bool scope_is_root_ = false;
  HotFile scope_usage_;     // its usage file, when it is not the hierarchy root
  std::map<std::string, HotFile> root_children_;  // at a root: each child's usage file, by name
  std::string buf_;
  std::optional<kernel::MemInfo> meminfo_cache_;
  uint64_t min_free_bytes_ = 0, pid_max_ = 0, threads_max_ = 0, kp_limit_value_ = 0;
  bool kp_limit_read_ = false;
  bool static_loaded_ = false;
  std::optional<PsiStats> psi_memory_detail_, psi_io_detail_;
  std::string memory_error_;

  std::array<std::optional<SignalObservation>, kSignalCount> last_good_{};
  std::unordered_map<std::string, PodState> pods_;
  std::unordered_set<std::string> known_unknown_;
  // A pod without metadata this long while the source answers is more than
  // a lagging watch (its timeout plus the stall grace: 70 s by default).
  static constexpr Duration kMetadataLagWarning = std::chrono::minutes(2);
  std::unordered_map<std::string, TimePoint> unknown_since_;  // pods without metadata: first seen so
  std::unordered_set<std::string> warned_unknown_;
  std::shared_ptr<const PodMetadataMap> indexed_meta_;
  std::unordered_map<std::string, const PodMetadata*> mirror_index_;  // by kubernetes.io/config.mirror
  uint64_t gen_ = 0;
  QosStamps qos_stamps_{};
  bool qos_stamps_taken_ = false;
  std::shared_ptr<PageCounterReader> page_reader_;  // null: one usage file per pod
  std::vector<PageCounterSample> page_samples_;      // the last batch (kept: no allocation per decision)
  ObserverCounters counters_;
  std::array<bool, static_cast<std::size_t>(Group::Count)> warned_groups_{};
  bool warned_kubepods_ = false, warned_pod_read_ = false;
};

}  // namespace

Result<std::unique_ptr<NodeObserver>> make_node_observer(const ObserveConfig& config, CgroupLayout layout,
                                                         std::shared_ptr<PodMetadataSource> metadata,
                                                         std::shared_ptr<PodStorageSource> storage) {
  // Up to six kept-open fds per pod: lift the soft fd limit to the hard one,
  // and keep a quarter of it (at least 256) free of kept files, for what
  // must never fail for want of an fd: listing the pod cgroups, a file read
  // over the budget, sockets, BPF objects, pidfds.
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    if (rl.rlim_cur < rl.rlim_max) {
      rl.rlim_cur = rl.rlim_max;
      if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) (void)::getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur != RLIM_INFINITY) {
      const uint64_t limit = rl.rlim_cur;
      const uint64_t reserve = std::max<uint64_t>(256, limit / 4);
      HotFile::set_kept_fd_budget(limit > reserve ? limit - reserve : 0);
    }
  }
  std::unique_ptr<NodeObserver> o =
      std::make_unique<KernelNodeObserver>(config, std::move(layout), std::move(metadata), std::move(storage));
  return o;
}

Result<std::unique_ptr<NodeObserver>> make_node_observer(const ObserveConfig& config,
                                                         std::shared_ptr<PodMetadataSource> metadata,
                                                         std::shared_ptr<PodStorageSource> storage) {
  auto layout = detect_layout(config);
  if (!layout) return layout.error();
  return make_node_observer(config, std::move(*layout), std::move(metadata), std::move(storage));
}

}  // namespace pressured
