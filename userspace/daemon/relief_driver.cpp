#include "daemon/relief_driver.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "engine/eviction_words.hpp"

namespace pressured {
namespace {

std::string mib(uint64_t bytes) { return fmt::format("{:.1f}Mi", static_cast<double>(bytes) / (1 << 20)); }

double ms(Duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace

ReliefDriver::ReliefDriver(std::shared_ptr<const LiveConfig> live, const ReliefStage& stage, ReclaimWriter* writer,
                           std::string unavailable_reason, Metrics* metrics, EventLoop* loop,
                           std::function<void()> on_done)
    : live_(std::move(live)), stage_(stage), metrics_(metrics) {
  const ReliefConfig& config = live_->get().relief;
  if (writer != nullptr) worker_ = std::make_unique<ReclaimWorker>(*writer, clock_, loop, std::move(on_done));
  stats_.available = stage_.active() ? 1 : 0;
  if (metrics_ != nullptr) export_ = export_stats(*metrics_, stats_);
  if (writer == nullptr) {
    spdlog::warn("relief off: {}; memory evictions happen without asking the kernel to reclaim first "
                 "(cgroup.memoryAvailableMode: reclaimableActive is the fallback)",
                 unavailable_reason.empty() ? "no memory.reclaim" : unavailable_reason);
  } else if (!config.enabled) {
    spdlog::info("relief off: relief.enabled is false");
  } else {
    spdlog::info("relief on: memory evictions wait up to {:.0f} ms (hard) or their grace (soft) for memory.reclaim",
                 ms(config.hard_threshold_budget));
  }
}

std::optional<ReliefOutcome> ReliefDriver::take_outcome() {
  if (!worker_) return std::nullopt;
  return worker_->take();
}

void ReliefDriver::carry_out(const ReliefStep& st) {
  stats_.available = stage_.active() ? 1 : 0;  // a reload may have turned it on or off
  deadline_ = st.deadline;
  if (st.start && !st.start->dry_run && worker_) worker_->start(*st.start);
  report(st);
}

void ReliefDriver::report(const ReliefStep& st) {
  if (st.finished) {
    const ReliefRecord& r = *st.finished;
    spdlog::info("{}", relief_record_line(r));
    if (r.dry_run) ++stats_.dry_run;
    else if (r.failed) ++stats_.failed;
    else if (r.eviction_avoided) ++stats_.avoided;
    else ++stats_.still_short;
    stats_.asked_bytes += r.asked_bytes;
    stats_.reclaimed_bytes += r.reclaimed_bytes;
    if (r.timed_out) ++stats_.timed_out;
    stats_.write_errors += r.errors;
    if (r.errors > 0) spdlog::warn("relief {}: {} memory.reclaim write(s) failed, first: {}", r.id, r.errors, r.first_error);
    if (metrics_ != nullptr) metrics_->observe(stats::kReclaimDuration, {}, std::chrono::duration<double>(r.took).count());
  }
  if (st.start) {
    const ReliefRequest& q = *st.start;
    std::string targets;
    for (const auto& t : q.targets) {
      targets += fmt::format("{}{} {}", targets.empty() ? "" : ", ", t.cgroup_path, mib(t.bytes));
    }
    if (q.dry_run) {
      ++stats_.dry_run;
      spdlog::info("dry run: relief {} would ask memory.reclaim for {} ({} short plus the minimum reclaim) from {}",
                   q.id, mib(q.asked_bytes), mib(q.shortfall_bytes), targets);
    } else {
      spdlog::info("relief {}: {} ({}) short {}: asking memory.reclaim for {} from {}; evictions wait at most {:.0f} ms",
                   q.id, name(q.signal), q.kind == ThresholdKind::Hard ? "hard" : "soft", mib(q.shortfall_bytes),
                   mib(q.asked_bytes), targets, ms(q.hold_until - q.decided_at));
    }
  }
  if (st.skipped) {
    switch (*st.skipped) {
      case ReliefSkip::NotCovered: ++stats_.skip_not_covered; break;
      case ReliefSkip::NoCandidate: ++stats_.skip_no_candidate; break;
      case ReliefSkip::HardBudgetZero: ++stats_.skip_budget_zero; break;
      case ReliefSkip::WindowClosed: ++stats_.skip_window_closed; break;
    }
    spdlog::info("relief: memory threshold met, no reclaim ({}): evicting as usual", name(*st.skipped));
  }
  if (!st.held.empty()) {
    ++stats_.held;
    spdlog::debug("relief: {} memory eviction candidate(s) wait for the run in flight", st.held.size());
  }
  stats_.backoff_cgroups = stage_.backoff().size();
}

}  // namespace pressured
