// Each pod's usage over the pod cgroups' files (pod_usage.hpp).
#include "node/pod_usage.hpp"

#include <algorithm>
#include <cerrno>
#include <string_view>

#include <spdlog/spdlog.h>

#include "kernel/file.hpp"
#include "kernel/parse.hpp"
#include "node/formulas.hpp"
#include "node/observer_reads.hpp"

namespace pressured::node {

void PodUsageReader::PodState::open_paths(const CgroupLayout& l) {
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

PodUsageReader::PodUsageReader(CgroupLayout layout, std::shared_ptr<PodStorageSource> storage,
                               ObserverCounters& counters)
    : layout_(std::move(layout)), storage_(std::move(storage)), counters_(counters) {
  v2_ = layout_.memory_on_v2;
  buf_.reserve(8192);
}

void PodUsageReader::read_listed(const std::vector<cgroup::PodDir>& dirs, TimePoint now, std::vector<Pod>& out) {
  ++gen_;
  out.reserve(out.size() + dirs.size());
  // Every pod's usage and limit in one walk of kubepods where the kernel
  // allows it: two reads a pod fewer, at about 50 ns a pod instead of two
  // preads. A pod the walk did not see (created since) reads its files.
  const bool batched = page_reader_ && !dirs.empty() && walk_page_counters(layout_.kubepods_memory_path, 2);
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
    auto r = read_pod(st, p, true, batched ? batched_sample(st.cg.cgroup_id) : nullptr);
    if (!r) {
      if (is_gone(r.error().code) && cgroup::dir_inode(st.cg.memory_path) == 0) {
        ++counters_.vanished_pods;  // deleted between the scan and the read
        continue;
      }
      ++counters_.stale_pod_reads;
      warn_once(warned_pod_read_, "pod {} marked stale: {}", p.uid, r.error().message);
      p.stale = true;
      p.usage = st.last_usage;
      p.no_usage_stats = !st.ever_read;
    } else {
      p.usage_observed_at = now;
    }
    merge_storage(p);
    out.push_back(std::move(p));
  }
  for (auto it = pods_.begin(); it != pods_.end();) {
    if (it->second.seen_gen != gen_) it = pods_.erase(it);
    else ++it;
  }
}

void PodUsageReader::merge_storage(Pod& p) const {
  if (!storage_) return;
  // Not walked yet (a new pod, or a walk that failed for it): no stats.
  p.no_storage_stats = true;
  if (auto du = storage_->lookup(p.uid)) {
    p.no_storage_stats = false;
    p.usage.ephemeral_storage_bytes = du->bytes;
    p.usage.inodes = du->inodes;
    p.storage_measured_at = du->measured_at;
    p.ephemeral_storage = du->breakdown;
  }
}

Result<void> PodUsageReader::refresh_pod(Pod& pod, TimePoint now) {
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
      return Error{ENOENT, "pod cgroup " + pod.cgroup_path + " is gone: " + r.error().message};
    }
    ++counters_.stale_pod_reads;
    // ENOENT says the cgroup is gone; a file missing from a cgroup that
    // exists is a failed read.
    if (is_gone(r.error().code)) return Error{EIO, r.error().message};
    return r;
  }
  pod.stale = false;
  pod.usage_observed_at = now;
  pod.cgroup_id = st.cg.cgroup_id;
  pod.unified_cgroup_id = st.cg.unified_cgroup_id;
  return {};
}

Result<void> PodUsageReader::refresh_memory_usage(const std::vector<Pod*>& pods) {
  if (page_reader_ && !pods.empty()) {
    const std::string root = batch_root(pods);
    // Pods sit right under a tier, two levels under kubepods (Guaranteed: one).
    const uint32_t depth = root == layout_.kubepods_memory_path ? 2 : 1;
    if (walk_page_counters(root, depth)) {
      ++counters_.page_counter_batches;
      return usage_from_batch(pods);
    }
  }
  for (Pod* pod : pods) {
    auto it = pods_.find(pod->cgroup_path);
    if (it == pods_.end()) return Error{ESTALE, "pod " + pod->uid + " is not in the last full observation"};
    // A removed cgroup's kept-open file fails with ENODEV: the read below
    // then sends the caller to a full observation.
    auto u = read_number(it->second.usage, buf_);
    if (!u) return Error{ESTALE, "pod " + pod->uid + ": " + u.error().message};
    pod->memory_usage_bytes = *u;
  }
  return {};
}

void PodUsageReader::set_page_counter_reader(std::shared_ptr<PageCounterReader> reader) {
  page_reader_ = std::move(reader);
  counters_.page_counter_batch = page_reader_ ? 1 : 0;
}

std::vector<cgroup::PodDir> PodUsageReader::tracked() const {
  std::vector<cgroup::PodDir> out;
  out.reserve(pods_.size());
  for (const auto& [path, st] : pods_) out.push_back(cgroup::PodDir{st.cg.uid, st.cg.qos, path, st.cg.cgroup_id});
  return out;
}

PodUsageReader::States::iterator PodUsageReader::add_state(const cgroup::PodDir& d) {
  PodState st;
  st.cg = cgroup::describe_pod(layout_, d, false);
  st.open_paths(layout_);
  return pods_.emplace(d.memory_path, std::move(st)).first;
}

// The pod cgroup was removed and created again under the same name: the
// old fds read the dead cgroup, so reopen everything.
void PodUsageReader::recreate(PodState& st, uint64_t ino) {
  ++counters_.reopened_cgroups;
  cgroup::PodDir d{st.cg.uid, st.cg.qos, st.cg.memory_path, ino};
  st.cg = cgroup::describe_pod(layout_, d, false);
  st.open_paths(layout_);
  st.limit_cache.reset();
}

bool PodUsageReader::walk_page_counters(const std::string& root, uint32_t depth) {
  if (auto r = page_reader_->read(root, depth, page_samples_); !r) {
    // Once: a kernel that refuses the walk refuses it every time, and no
    // read must pay for a failing batch before the files.
    spdlog::warn("observer: batched page-counter read of {} failed ({}); observations and decisions read one usage "
                 "file per pod from now on",
                 root, r.error().message);
    page_reader_.reset();
    counters_.page_counter_batch = 0;
    return false;
  }
  auto by_id = [](const PageCounterSample& a, const PageCounterSample& b) { return a.cgroup_id < b.cgroup_id; };
  // Kernfs ids grow with creation and a walk lists children oldest first, so
  // a tier's walk is most often in order already.
  if (!std::is_sorted(page_samples_.begin(), page_samples_.end(), by_id)) {
    std::sort(page_samples_.begin(), page_samples_.end(), by_id);
  }
  return true;
}

const PageCounterSample* PodUsageReader::batched_sample(uint64_t id) const {
  auto s = std::lower_bound(page_samples_.begin(), page_samples_.end(), id,
                            [](const PageCounterSample& a, uint64_t v) { return a.cgroup_id < v; });
  return id != 0 && s != page_samples_.end() && s->cgroup_id == id ? &*s : nullptr;
}

// Reads one pod's usage into `pod` (usage, limit, events, pressure, pids).
Result<void> PodUsageReader::read_pod(PodState& st, Pod& pod, bool full, const PageCounterSample* batched) {
  Result<uint64_t> u = batched ? Result<uint64_t>(batched->usage_bytes) : read_number(st.usage, buf_);
  if (!u) return u.error();
  auto ms = read_stat(st.stat, buf_, v2_);
  if (!ms) return ms.error();
  PodUsage usage = pod.usage;
  usage.memory_working_set_bytes = node::working_set(*u, ms->inactive_file);
  usage.memory_rss_bytes = ms->anon;
  usage.memory_cache_bytes = ms->file;
  usage.memory_active_file_bytes = ms->active_file;
  usage.memory_inactive_file_bytes = ms->inactive_file;
  pod.memory_usage_bytes = *u;
  if (batched) {
    // The page counter's maximum is "no limit" on v2 too ("max" in the file).
    st.limit_cache = node::is_unlimited_v1(batched->limit_bytes) ? std::nullopt : std::optional(batched->limit_bytes);
    st.limit_read = true;
  } else if (full || !st.limit_read) {
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
    auto n = read_number(st.pids, buf_);
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
  pod.no_usage_stats = false;
  st.last_usage = usage;
  st.ever_read = true;
  return {};
}

std::vector<ContainerMemory> PodUsageReader::container_memory(const Pod& pod) {
  std::vector<ContainerMemory> out;
  if (pod.cgroup_path.empty()) return out;
  const auto now = std::chrono::steady_clock::now();
  auto st = pods_.find(pod.cgroup_path);
  std::unordered_map<std::string, PodState::ContainerReading> readings;
  const char* usage_file = v2_ ? "/memory.current" : "/memory.usage_in_bytes";
  for (const auto& c : cgroup::scan_containers(pod.cgroup_path)) {
    auto u = kernel::read_file(c.memory_path + usage_file, 64);
    if (!u) continue;  // gone since the scan, or not a memory cgroup
    auto v = kernel::parse_single_value(*u);
    if (!v || !*v) continue;
    auto text = kernel::read_file(c.memory_path + "/memory.stat");
    if (!text) continue;
    auto ms = kernel::parse_memory_stat(*text, v2_);
    if (!ms) continue;
    ContainerMemory m{c.id, node::working_set(**v, ms->inactive_file), **v};
    if (v2_) {
      // PSI off (psi=0) or a kernel without per-cgroup PSI: no file, no stall time.
      if (auto p = kernel::read_file(c.memory_path + "/memory.pressure")) {
        if (auto psi = kernel::parse_psi(*p)) m.memory_pressure = *psi;
      }
    }
    if (st != pods_.end()) {
      if (auto before = st->second.containers.find(c.id); before != st->second.containers.end()) {
        m.previous_working_set_bytes = before->second.working_set;
        m.previous_age_seconds = std::chrono::duration<double>(now - before->second.at).count();
      }
    }
    readings[c.id] = {m.working_set_bytes, now};
    out.push_back(std::move(m));
  }
  if (st != pods_.end()) st->second.containers = std::move(readings);
  return out;
}

void PodUsageReader::read_likely_victims_containers(const std::vector<Pod>& pods, std::size_t n) {
  std::vector<const Pod*> order;
  order.reserve(pods.size());
  for (const Pod& p : pods) {
    if (!p.stale && !p.no_usage_stats) order.push_back(&p);
  }
  auto over = [](const Pod* p) {
    return static_cast<int64_t>(p->usage.memory_working_set_bytes) - static_cast<int64_t>(p->requests.memory_bytes);
  };
  n = std::min(n, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(),
                    [&](const Pod* a, const Pod* b) { return over(a) > over(b); });
  for (std::size_t i = 0; i < n; ++i) container_memory(*order[i]);
}

// The smallest subtree to walk: the contenders' QoS tier directory when
// they share one (contenders mostly are one QoS class), else kubepods.
// From the pods' QoS classes and one pod's path: no lookup per pod on this
// path.
std::string PodUsageReader::batch_root(const std::vector<Pod*>& pods) const {
  // A pod's QoS class is where its cgroup is (describe_pod reads it from the
  // parent): pods of one class share its tier, Guaranteed pods kubepods.
  const QosClass qos = pods.front()->qos;
  for (const Pod* pod : pods) {
    if (pod->qos != qos) return layout_.kubepods_memory_path;
  }
  if (qos == QosClass::Guaranteed) return layout_.kubepods_memory_path;
  const std::string& path = pods.front()->cgroup_path;
  return path.substr(0, path.rfind('/'));
}

// The contenders' usage from one batch (page_samples_), by the cgroup id
// the last full observation gave each pod: a pod whose id is not in the
// walk was removed or recreated since.
Result<void> PodUsageReader::usage_from_batch(const std::vector<Pod*>& pods) {
  for (Pod* pod : pods) {
    const PageCounterSample* s = batched_sample(pod->cgroup_id);
    if (!s) {
      return Error{ESTALE, "pod " + pod->uid + ": its cgroup is gone or was recreated since the last full observation"};
    }
    pod->memory_usage_bytes = s->usage_bytes;
  }
  return {};
}

}  // namespace pressured::node
