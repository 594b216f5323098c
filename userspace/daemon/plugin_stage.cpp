#include "daemon/plugin_stage.hpp"

#include <spdlog/spdlog.h>

#include "pressured/metrics.hpp"

namespace pressured {

namespace {
constexpr Duration kAskInterval = std::chrono::seconds(1);
}  // namespace

PluginStage::PluginStage(std::shared_ptr<const LiveConfig> config, plugins::PluginHost* host, Metrics* metrics)
    : config_(std::move(config)), host_(host), metrics_(metrics) {}

void PluginStage::step(TimePoint now, const NodeSnapshot& snapshot, Decisions& d,
                       const std::vector<std::string>& excluded, const std::array<bool, kLaneCount>& lane_held) {
  if (host_ == nullptr) return;
  const Config& c = config_->get();
  const std::vector<plugins::Answers> answers = host_->answers();
  plugins::MergeOptions options;
  options.proposal_interval = c.plugins.proposal_interval;
  const plugins::MergeReport report =
      plugins::apply_answers(d, snapshot, c.eviction, excluded, lane_held, answers, now, options, state_);
  for (const plugins::Change& ch : report.changes) {
    std::string notes;
    for (const PluginNote& n : ch.notes) {
      notes += (notes.empty() ? "" : ", ") + n.plugin + " " + n.action + " " + n.pod + " (\"" + n.reason + "\")";
    }
    std::string line = ch.before.empty()   ? "plugins: " + std::string(name(ch.lane)) + " eviction of " + ch.after +
                                                 " decided by a plugin threshold: " + notes
                       : ch.after.empty() ? "plugins: " + std::string(name(ch.lane)) + " eviction of " + ch.before +
                                                " held: every candidate protected under a soft threshold"
                                          : "plugins: " + std::string(name(ch.lane)) + " victim " + ch.before +
                                                " -> " + ch.after + ": " + notes;
    // One line per change, not one per evaluation while it stands.
    auto& last = last_logged_[static_cast<std::size_t>(ch.lane)];
    if (line != last) spdlog::info("{}", line);
    last = std::move(line);
  }
  export_counts(report);
  // Asked at most once a second (a progress tick evaluates every 50 ms while
  // an eviction is in flight), and at once when a threshold starts or stops
  // being met: the answers then are about the ranking that matters.
  std::vector<bool> met;
  met.reserve(d.thresholds.size());
  for (const ThresholdStatus& t : d.thresholds) met.push_back(t.met);
  if (last_ask_ && now - *last_ask_ < kAskInterval && now >= *last_ask_ && met == last_met_) return;
  last_ask_ = now;
  last_met_ = std::move(met);
  host_->ask(plugins::lane_questions(d, snapshot, c.eviction, excluded, answers, c.plugins.max_candidates));
}

void PluginStage::export_counts(const plugins::MergeReport& report) {
  if (metrics_ == nullptr) return;
  const auto n = [](uint64_t count) { return static_cast<double>(count); };
  for (const auto& [plugin, t] : report.tally) {
    if (t.vetoes) metrics_->add(stats::kPluginVetoes, {plugin}, n(t.vetoes));
    if (t.proposals) metrics_->add(stats::kPluginProposals, {plugin}, n(t.proposals));
  }
  for (const auto& [plugin, now] : host_->counts()) {
    auto [it, first] = exported_.try_emplace(plugin);
    plugins::PluginCounts& was = it->second;
    if (first) {
      // Every series from the plugin's first registration on (alerts take increase()).
      for (const auto* f : {&stats::kPluginCalls, &stats::kPluginTimeouts, &stats::kPluginErrors, &stats::kPluginVetoes,
                            &stats::kPluginProposals}) {
        metrics_->add(*f, {plugin}, 0);
      }
    }
    metrics_->add(stats::kPluginCalls, {plugin}, n(now.calls - was.calls));
    metrics_->add(stats::kPluginTimeouts, {plugin}, n(now.timeouts - was.timeouts));
    metrics_->add(stats::kPluginErrors, {plugin}, n(now.errors - was.errors));
    was = now;
  }
}

}  // namespace pressured
