#include "daemon/condition_publisher.hpp"

#include <spdlog/spdlog.h>

#include "pressured/metrics.hpp"

namespace pressured {

ConditionPublisher::ConditionPublisher(Report report, Metrics* metrics, Duration heartbeat)
    : report_(std::move(report)), metrics_(metrics), heartbeat_(heartbeat) {}

void ConditionPublisher::publish(const Decisions& d, TimePoint now) {
  Conditions changed{};
  for (const auto& ch : d.changes) {
    changed[static_cast<std::size_t>(ch.condition)] = true;
    spdlog::info("node condition {} is now {}", name(ch.condition), ch.status ? "True" : "False");
  }
  if (metrics_) {
    for (std::size_t i = 0; i < kConditionCount; ++i) metrics_->condition(static_cast<Condition>(i), d.conditions[i]);
  }
  if (!report_) return;
  if (!published_) {
    if (!restored_) changed.fill(true);
  } else if (d.changes.empty() && now - last_report_ < heartbeat_) {
    return;
  }
  report_(d.conditions, changed);
  published_ = true;
  last_report_ = now;
}

}  // namespace pressured
