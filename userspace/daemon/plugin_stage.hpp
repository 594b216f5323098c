#pragma once
// The plugins' place in the daemon's cycle (docs/plugins.md): between the
// engine's decisions and the policy's step, the latest answers the host
// holds are merged into the decisions (plugins/merge.hpp, pure), what they
// changed is logged and counted per plugin, and the next questions are
// handed to the host, which asks them on its own thread. Nothing here waits
// for a plugin. Without a host (plugins.directory unset) step() returns at
// once and nothing else runs.

#include <array>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "plugins/host.hpp"
#include "plugins/merge.hpp"
#include "pressured/config.hpp"
#include "pressured/engine.hpp"
#include "pressured/policy.hpp"

namespace pressured {

class Metrics;

class PluginStage {
 public:
  PluginStage(std::shared_ptr<const LiveConfig> config, plugins::PluginHost* host, Metrics* metrics);

  /// Merges the answers in (their changes logged and counted), then asks the
  /// next questions. `lane_held`: lanes whose eviction would be deferred.
  void step(TimePoint now, const NodeSnapshot& snapshot, Decisions& d, const std::vector<std::string>& excluded,
            const std::array<bool, kLaneCount>& lane_held);

  bool enabled() const { return host_ != nullptr; }

 private:
  void export_counts(const plugins::MergeReport& report);

  std::shared_ptr<const LiveConfig> config_;
  plugins::PluginHost* host_;
  Metrics* metrics_;
  plugins::MergeState state_;
  std::map<std::string, plugins::PluginCounts> exported_;  // the host's counts already exported
  std::array<std::string, kLaneCount> last_logged_;        // the last change logged per lane
  std::optional<TimePoint> last_ask_;                      // when the host was last asked
  std::vector<bool> last_met_;                             // which thresholds were met then
};

}  // namespace pressured
