// Which pods the node has, and what the metadata source says of them (pod_set.hpp).
#include "node/pod_set.hpp"

#include <dirent.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include <spdlog/spdlog.h>

#include "node/observer_reads.hpp"

namespace pressured::node {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t directory_stamp(const std::string& dir) {
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

}  // namespace

PodSet::PodSet(CgroupLayout layout, std::shared_ptr<PodMetadataSource> metadata, ObserverCounters& counters)
    : layout_(std::move(layout)), metadata_(std::move(metadata)), counters_(counters) {}

std::vector<cgroup::PodDir> PodSet::list(const std::function<std::vector<cgroup::PodDir>()>& last_listing) {
  // Armed (or taken) before the scan: a pod cgroup created during it fires
  // the watch (changes a stamp) and the next incremental read
  // (refresh_memory_usage) refuses.
  watching_ = watch_qos_dirs();
  watch_fired_ = false;
  if (!watching_) qos_stamps_ = qos_dir_stamps();
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
    for (auto& d : last_listing ? last_listing() : std::vector<cgroup::PodDir>{}) {
      if (listed.count(d.memory_path)) continue;
      uint64_t ino = cgroup::dir_inode(d.memory_path);
      if (ino != 0 && ino == d.ino) kept.push_back(std::move(d));
    }
    warn_once(warned_kubepods_, "cannot list pods under {}: {}; keeping {} pods of the last listing",
              layout_.kubepods_memory_path, std::strerror(err), kept.size());
    for (auto& d : kept) dirs.push_back(std::move(d));
  } else if (err == ENOENT) {
    warn_once(warned_kubepods_, "no kubepods cgroup at {} yet: no pods observed", layout_.kubepods_memory_path);
  }
  std::sort(dirs.begin(), dirs.end(),
            [](const cgroup::PodDir& a, const cgroup::PodDir& b) { return a.memory_path < b.memory_path; });
  return dirs;
}

bool PodSet::changed_since_listing() {
  if (!qos_stamps_taken_) return true;
  if (!watching_) return qos_dir_stamps() != qos_stamps_;
  if (watch_fired_) return true;
  // Any event (an entry created, removed or renamed, a tier removed, the
  // queue overflowed) or an error reading it: changed. Empty: not.
  alignas(struct inotify_event) char buf[4096];
  const ssize_t n = ::read(inotify_.get(), buf, sizeof buf);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
  watch_fired_ = true;
  return true;
}

bool PodSet::watch_qos_dirs() {
  if (!inotify_) {
    inotify_.reset(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
    if (!inotify_) {
      warn_once(warned_watch_, "cannot watch the pod cgroup directories (inotify: {}): each decision under memory "
                "pressure lists them instead", std::strerror(errno));
      return false;
    }
  }
  // A directory's own removal or rename fires too (IN_DELETE_SELF,
  // IN_MOVE_SELF, then IN_IGNORED). A tier not there yet is watched once it
  // is: its creation fires kubepods' watch, and the next listing adds it.
  constexpr uint32_t kMask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF |
                             IN_ONLYDIR;
  bool kubepods_watched = false;
  for (const auto& q : cgroup::qos_dirs(layout_.driver)) {
    const std::string dir = q.rel.empty() ? layout_.kubepods_memory_path : layout_.kubepods_memory_path + "/" + q.rel;
    if (::inotify_add_watch(inotify_.get(), dir.c_str(), kMask) >= 0) {
      if (q.rel.empty()) kubepods_watched = true;
      continue;
    }
    if (errno == ENOENT && kubepods_watched) continue;
    if (errno != ENOENT) {
      warn_once(warned_watch_, "cannot watch {} (inotify: {}): each decision under memory pressure lists the pod "
                "cgroup directories instead", dir, std::strerror(errno));
    }
    return false;  // no kubepods yet: the stamps say when it shows
  }
  // What the watch queued before now belongs to this listing.
  alignas(struct inotify_event) char buf[4096];
  while (::read(inotify_.get(), buf, sizeof buf) > 0) {
  }
  return true;
}

std::vector<PodCgroup> PodSet::describe() const {
  std::vector<PodCgroup> out;
  for (const auto& d : cgroup::scan_pods(layout_)) out.push_back(cgroup::describe_pod(layout_, d, true));
  std::sort(out.begin(), out.end(), [](const PodCgroup& a, const PodCgroup& b) { return a.memory_path < b.memory_path; });
  return out;
}

PodSet::QosStamps PodSet::qos_dir_stamps() const {
  QosStamps out{};
  std::size_t i = 0;
  for (const auto& q : cgroup::qos_dirs(layout_.driver)) {
    if (i == out.size()) break;
    const std::string dir = q.rel.empty() ? layout_.kubepods_memory_path : layout_.kubepods_memory_path + "/" + q.rel;
    out[i++] = directory_stamp(dir);
  }
  return out;
}

// Mirror pods by the config hash their static pod's cgroup is named
// after; rebuilt only when the source publishes a new map.
void PodSet::index_mirrors(const std::shared_ptr<const PodMetadataMap>& meta) {
  if (meta == indexed_meta_) return;
  indexed_meta_ = meta;
  mirror_index_.clear();
  if (!meta) return;
  for (const auto& [uid, md] : *meta) {
    if (!md.mirror_of.empty()) mirror_index_.emplace(md.mirror_of, &md);
  }
}

void PodSet::merge_metadata(TimePoint now, std::vector<Pod>& out) {
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
  for (Pod& p : out) {
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
        p.containers = md.containers;
        p.pod_level_memory_request_bytes = md.pod_level_memory_request_bytes;
        p.phase = md.phase;
        p.labels = md.labels;
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

}  // namespace pressured::node
