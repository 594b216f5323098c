// The node's signals over the kernel's files (node_signals.hpp).
#include "node/node_signals.hpp"

#include <sys/statvfs.h>

#include <cerrno>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "cgroup/discovery.hpp"
#include "cgroup/paths.hpp"
#include "kernel/cgroup_id.hpp"
#include "node/formulas.hpp"
#include "node/observer_reads.hpp"

namespace pressured::node {
namespace {

using kernel::HotFile;

constexpr std::array<std::string_view, 8> kGroupNames{
    "memory", "allocatable memory", "nodefs", "imagefs", "pid", "memory PSI", "io PSI", "containerfs"};

}  // namespace

NodeSignals::Group NodeSignals::group_of(Signal s) {
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

NodeSignals::NodeSignals(ObserveConfig config, CgroupLayout layout, ObserverCounters& counters)
    : cfg_(std::move(config)), layout_(std::move(layout)), counters_(counters) {
  static_assert(kGroupNames.size() == static_cast<std::size_t>(Group::Count));
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
  const std::string psi = cfg_.psi_dir();
  psi_memory_.reset(psi + "/memory");
  psi_io_.reset(psi + "/io");
  psi_cpu_.reset(psi + "/cpu");
  loadavg_.reset(proc + "/loadavg");
  // sysctls, re-read at every full observation.
  min_free_kbytes_.reset(proc + "/sys/vm/min_free_kbytes");
  pid_max_file_.reset(proc + "/sys/kernel/pid_max");
  threads_max_file_.reset(proc + "/sys/kernel/threads-max");
  buf_.reserve(8192);
  // Once, as the kubelet does: a runtime moved to other disks restarts anyway.
  containerfs_ = detect_containerfs(cfg_);
}

Result<void> NodeSignals::observe(TimePoint now, NodeSnapshot& snap) {
  refresh_static();
  for (std::size_t g = 0; g < static_cast<std::size_t>(Group::Count); ++g) {
    auto r = read_group(static_cast<Group>(g), now, snap.signals);
    if (!r) {
      ++counters_.stale_signal_reads;
      warn_once(warned_groups_[g], "{} signals: read failed, keeping the last good value (stale): {}", kGroupNames[g],
                r.error().message);
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
  return {};
}

Result<SignalObservation> NodeSignals::refresh(Signal signal, TimePoint now) {
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

MemcgCounters NodeSignals::read_memcg_counters() {
  MemcgCounters c;
  c.kubepods_path = layout_.kubepods_memory_path;
  if (c.kubepods_path.empty()) return c;
  c.kubepods_usage = optional_number(kp_usage_, buf_);
  c.scope_path = scope_path_;
  c.scope_is_root = scope_is_root_;
  if (!scope_is_root_) {
    c.scope_file_usage = optional_number(scope_usage_, buf_);
    return c;
  }
  if (!v2_) c.scope_file_usage = optional_number(root_usage_, buf_);  // v2: the root has no usage file
  c.children_usage = read_children_usage();
  return c;
}

std::vector<MemcgScope> NodeSignals::memcg_scopes() const {
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

// Values that change only with hotplug or sysctl writes: read on every full
// observation, reused by refresh().
void NodeSignals::refresh_static() {
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

void NodeSignals::set(SignalSet& out, Signal s, double value, double capacity, TimePoint now) {
  SignalObservation o{value, capacity, now, false};
  out[static_cast<std::size_t>(s)] = o;
  last_good_[static_cast<std::size_t>(s)] = o;
}

// The page counter of a hierarchy root is the sum of its children's
// (charges propagate up the page counters; the root's own usage file, where
// there is one, is computed from statistics instead). Each child's usage
// file stays open between reads; children that went away are dropped.
std::optional<uint64_t> NodeSignals::read_children_usage() {
  std::optional<uint64_t> sum;
  std::error_code ec;
  std::map<std::string, HotFile> seen;
  for (std::filesystem::directory_iterator it(scope_path_, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (!it->is_directory(type_ec) || it->is_symlink(type_ec)) continue;
    const std::string name = it->path().filename().string();
    auto kept = root_children_.find(name);
    HotFile f = kept != root_children_.end() ? std::move(kept->second) : HotFile(it->path().string() + usage_file());
    if (auto u = optional_number(f, buf_)) sum = sum.value_or(0) + *u;
    seen.emplace(name, std::move(f));
  }
  root_children_ = std::move(seen);
  return sum;
}

Result<bool> NodeSignals::read_group(Group g, TimePoint now, SignalSet& out) {
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
      auto st = read_stat(root_stat_, buf_, v2_);
      if (!st) return fail_memory(st.error());
      in.root_stat = *st;
      if (v2_) {
        in.root_usage = st->anon + st->file;  // runc/cadvisor: the v2 root has no memory.current
      } else {
        auto u = read_number(root_usage_, buf_);
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
      auto u = read_number(kp_usage_, buf_);
      if (!u) return u.error();
      auto st = read_stat(kp_stat_, buf_, v2_);
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

Result<bool> NodeSignals::fail_memory(const Error& e) {
  memory_error_ = e.message;
  return e;
}

}  // namespace pressured::node
