// The relief decisions: whether to ask the kernel to reclaim page cache
// before a memory eviction, how much from which pod cgroup, and which
// candidates wait for it. Pure: no I/O, no clock, no logging. Semantics:
// include/pressured/relief.hpp and docs/engine.md, "Relief before eviction".

#include "pressured/relief.hpp"

#include <algorithm>

namespace pressured {
namespace {

constexpr uint64_t kPage = 4096;

bool memory_lane(Signal s) { return info(s).resource == StarvedResource::Memory; }

uint64_t file_pages(const Pod& p) { return p.usage.memory_active_file_bytes + p.usage.memory_inactive_file_bytes; }

double seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

uint64_t ReliefOutcome::asked_bytes() const {
  uint64_t n = 0;
  for (const auto& t : targets) n += t.asked_bytes;
  return n;
}

uint64_t ReliefOutcome::reclaimed_bytes() const {
  uint64_t n = 0;
  for (const auto& t : targets) n += t.reclaimed_bytes;
  return n;
}

bool ReliefOutcome::failed() const {
  return !targets.empty() && std::all_of(targets.begin(), targets.end(), [](const auto& t) { return !t.error.empty(); });
}

std::string_view ReliefRecord::outcome() const {
  if (dry_run) return "dry_run";
  if (failed) return "failed";
  return eviction_avoided ? "avoided" : "still_short";
}

std::string_view name(ReliefSkip skip) {
  switch (skip) {
    case ReliefSkip::NotCovered: return "not_covered";
    case ReliefSkip::NoCandidate: return "no_candidate";
    case ReliefSkip::HardBudgetZero: return "hard_budget_zero";
    case ReliefSkip::WindowClosed: return "window_closed";
  }
  return "?";
}

std::vector<ReliefTarget> split_reclaim(uint64_t amount, std::vector<ReliefTarget> cgroups) {
  std::erase_if(cgroups, [](const ReliefTarget& t) { return t.file_bytes < kPage; });
  uint64_t total = 0;
  for (const auto& t : cgroups) total += t.file_bytes;
  if (total == 0 || amount == 0) return {};
  amount = std::min(amount, total);
  for (auto& t : cgroups) {
    // amount * file / total without overflow (both below 2^64, the product is not).
    const auto share = static_cast<uint64_t>(static_cast<unsigned __int128>(amount) * t.file_bytes / total);
    uint64_t bytes = (share + kPage - 1) / kPage * kPage;  // whole pages, rounded up
    t.bytes = std::min(bytes, t.file_bytes / kPage * kPage);
  }
  std::erase_if(cgroups, [](const ReliefTarget& t) { return t.bytes == 0; });
  // Largest first: the kernel is asked where it is likeliest to give back.
  std::stable_sort(cgroups.begin(), cgroups.end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  return cgroups;
}

std::size_t ReliefStage::restore(const ReliefState& state) {
  for (const auto& [path, until] : state.backoff) backoff_[path] = until;
  return backoff_.size();
}

TimePoint ReliefStage::candidate_window_end(const Eviction& c, const std::vector<ThresholdStatus>& thresholds) const {
  for (const auto& t : thresholds) {
    if (t.threshold.signal != c.signal || t.threshold.kind != c.kind || !t.first_observed) continue;
    // A hard threshold: its budget from when it was first met (0: no wait at
    // all); a soft one: its grace period (its eviction comes at the grace end).
    return *t.first_observed +
           (t.threshold.kind == ThresholdKind::Hard ? config_.hard_threshold_budget : t.threshold.grace_period);
  }
  // The threshold that chose it is not among the met ones (cannot happen for
  // an engine candidate): no window to wait in.
  return TimePoint::min();
}

ReliefStep ReliefStage::step(TimePoint now, const NodeSnapshot& snapshot, Decisions& decisions,
                             const EvictionConfig& eviction, const std::vector<std::string>& excluded,
                             bool memory_lane_busy, const std::optional<ReliefOutcome>& outcome) {
  ReliefStep out;

  // 1. A run that ended: its cgroups that gave back little back off; it is
  // judged on this step's decisions (observed after it ended).
  if (outcome && running_ && outcome->id == running_->id) {
    finished_run_ = std::move(running_);
    running_.reset();
    finished_ = outcome;
    for (const auto& t : outcome->targets) {
      const double floor = static_cast<double>(t.asked_bytes) * config_.low_yield_percent / 100.0;
      if (!t.error.empty() || static_cast<double>(t.reclaimed_bytes) < floor) {
        backoff_[t.cgroup_path] = now + config_.backoff;
      }
    }
  }
  std::erase_if(backoff_, [&](const auto& e) { return e.second <= now; });
  // None longer than relief.backoff from now: a reload may have shortened it,
  // and a restored checkpoint holds what an earlier configuration set.
  for (auto& [path, until] : backoff_) until = std::min(until, now + config_.backoff);

  // The most urgent memory threshold met (hard before soft: the engine's order).
  const ThresholdStatus* met = nullptr;
  for (const auto& t : decisions.thresholds) {
    if (!t.met || !memory_lane(t.threshold.signal) || !t.first_observed) continue;
    if (met == nullptr || (t.threshold.kind == ThresholdKind::Hard && met->threshold.kind != ThresholdKind::Hard)) {
      met = &t;
    }
  }

  if (finished_ && finished_run_) {
    ReliefRecord r;
    r.id = finished_run_->id;
    r.signal = finished_run_->signal;
    r.kind = finished_run_->kind;
    r.shortfall_bytes = finished_run_->shortfall_bytes;
    r.asked_bytes = finished_->asked_bytes();
    r.reclaimed_bytes = finished_->reclaimed_bytes();
    r.took = finished_->took;
    r.cgroups = finished_->targets.size();
    for (const auto& t : finished_->targets) {
      if (t.error.empty()) continue;
      if (r.errors++ == 0) r.first_error = t.error;
    }
    r.dry_run = finished_run_->dry_run;
    r.failed = finished_->failed();
    r.timed_out = finished_->timed_out;
    const bool still_met = std::any_of(decisions.thresholds.begin(), decisions.thresholds.end(), [&](const auto& t) {
      return t.met && t.threshold.signal == r.signal && t.threshold.kind == r.kind;
    });
    r.eviction_avoided = !r.dry_run && !still_met;
    out.finished = r;
    last_ = ReliefSummary{r.id, r.asked_bytes, r.reclaimed_bytes, seconds(r.took)};
    last_decided_at_ = finished_run_->decided_at;
    finished_.reset();
    finished_run_.reset();
  }

  if (!active()) return out;

  // 2. Whether a run may start for this crossing, and for how long the
  // crossing's evictions may wait: a hard threshold its budget, a soft one
  // its grace period (its eviction comes at the grace end as usual).
  std::optional<TimePoint> window_end;
  std::optional<ReliefSkip> skip;
  if (met != nullptr) {
    if (met->threshold.kind == ThresholdKind::Hard) {
      if (config_.hard_threshold_budget == Duration::zero()) {
        skip = ReliefSkip::HardBudgetZero;
      } else {
        window_end = *met->first_observed + config_.hard_threshold_budget;
      }
    } else {
      window_end = *met->first_observed + met->threshold.grace_period;
    }
    if (window_end && now >= *window_end) {
      window_end.reset();
      skip = ReliefSkip::WindowClosed;
    }
  }

  if (met != nullptr && window_end && !running_ && !memory_lane_busy) {
    // The engine keeps a met threshold met until the signal is back above
    // threshold + minimum reclaim: that is the target, and what is asked.
    const double shortfall = met->threshold_value - met->observed;
    const auto cap = snapshot.signal(met->threshold.signal);
    const double need = shortfall + std::max(0.0, met->threshold.min_reclaim.resolve(cap ? cap->capacity : 0));
    if (need > 0) {
      // Candidate pods only (the ranking's own eligibility), under the pods
      // root (the observer finds pods there only), not backing off.
      std::vector<ReliefTarget> cgroups;
      uint64_t active = 0;
      for (const Pod* p : rank_pods(snapshot.pods, StarvedResource::Memory, eviction, excluded)) {
        if (p->cgroup_path.empty() || backoff_.contains(p->cgroup_path) || file_pages(*p) == 0) continue;
        cgroups.push_back({p->uid, p->cgroup_path, 0, file_pages(*p)});
        active += p->usage.memory_active_file_bytes;
      }
      // memory.available counts inactive_file as free already: only the
      // active page cache can make up the difference. When it cannot, the
      // pressure is not cache: evict without delay.
      if (cgroups.empty()) {
        skip = ReliefSkip::NoCandidate;
      } else if (static_cast<double>(active) < need) {
        skip = ReliefSkip::NotCovered;
      } else {
        ReliefRequest req;
        req.id = ++sequence_;
        req.signal = met->threshold.signal;
        req.kind = met->threshold.kind;
        req.shortfall_bytes = static_cast<uint64_t>(std::max(0.0, shortfall));
        // At least minimumAsk, so a shortfall of a few pages is not one run
        // per re-read; the split caps it at what the cgroups hold.
        const uint64_t ask = std::max(static_cast<uint64_t>(need), config_.minimum_ask_bytes);
        req.targets = split_reclaim(ask, std::move(cgroups));
        for (const auto& t : req.targets) req.asked_bytes += t.bytes;
        req.decided_at = now;
        req.hold_until = *window_end;
        req.budget = std::min<Duration>(config_.timeout, *window_end - now);
        req.dry_run = dry_run_;
        if (!req.targets.empty()) {
          skip.reset();
          if (req.dry_run) {
            // Nothing is written: logged once per cgroup and backoff, not at every evaluation.
            for (const auto& t : req.targets) backoff_[t.cgroup_path] = now + config_.backoff;
          } else {
            running_ = req;
          }
          out.start = std::move(req);
        }
      }
    }
  }
  if (skip && met != nullptr && skipped_crossing_ != met->first_observed) {
    skipped_crossing_ = met->first_observed;
    out.skipped = skip;
  }

  // 3. Memory candidates wait while a run is on, each no longer than its
  // own threshold allows: the run's hold, cut to the candidate's threshold's
  // window. A hard threshold met during a soft threshold's run thus waits at
  // most hardThresholdBudget from when it was met, never the soft grace
  // period the run was started with, whatever the worker is doing.
  // Afterwards candidates go to the policy with what reclaim achieved.
  std::optional<TimePoint> hold_end;
  std::vector<Eviction> kept;
  for (auto& c : decisions.candidates) {
    if (!memory_lane(c.signal)) {
      kept.push_back(std::move(c));
      continue;
    }
    if (running_) {
      const TimePoint until = std::min(running_->hold_until, candidate_window_end(c, decisions.thresholds));
      if (now < until) {
        hold_end = hold_end ? std::min(*hold_end, until) : until;
        out.held.push_back(std::move(c));
        continue;
      }
    }
    if (last_ && met != nullptr && last_decided_at_ >= *met->first_observed) c.relief = last_;
    kept.push_back(std::move(c));
  }
  decisions.candidates = std::move(kept);
  decisions.eviction.reset();
  if (!decisions.candidates.empty()) decisions.eviction = decisions.candidates.front();
  out.deadline = hold_end;
  return out;
}

}  // namespace pressured
