#pragma once
// The timeline replayer behind `pressured simulate`: JSON Lines in (observe,
// pod, podExited, podDeleted, tick), JSON Lines out (condition changes,
// signals without candidates, and what the eviction policy does: evictions,
// deferrals, escalations, kills, releases). It drives the same Engine and
// EvictionPolicy objects as the daemon. `engine-only` mode replays the engine
// alone (one decision per tick, nothing waits for a release). The format is
// in docs/engine.md. Pure apart from the streams it is handed.

#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pressured/engine.hpp"
#include "pressured/policy.hpp"
#include "pressured/result.hpp"

namespace pressured {

class Simulator {
 public:
  /// `policy`: replay the whole eviction policy with these settings;
  /// nullopt: engine only (every decision is printed as an eviction, its pod
  /// is left out of ranking until podDeleted).
  explicit Simulator(EvictionConfig config, std::optional<PolicyConfig> policy = std::nullopt);

  /// Processes one timeline line (blank lines and lines starting with '#' are
  /// skipped) and appends the output lines it produces to `out`. On error
  /// nothing of the line is applied and the message says what is wrong
  /// (without the line number, which the caller knows).
  Result<void> feed(std::string_view line, std::vector<std::string>& out);

  const Engine& engine() const { return engine_; }
  /// The policy (nullptr in engine-only mode).
  const EvictionPolicy* policy() const { return policy_ ? &*policy_ : nullptr; }

 private:
  // A pod as the timeline describes it, with what QoS derivation needs.
  struct SimPod {
    Pod pod;
    std::optional<QosClass> explicit_qos;
    std::optional<double> request_cpu, request_memory, limit_cpu, limit_memory;
    std::optional<double> request_storage, limit_storage;
  };

  Engine engine_;
  std::optional<EvictionPolicy> policy_;
  std::vector<std::string> evicted_;  // engine-only: decided pods, left out until podDeleted
  std::vector<std::string> exited_;   // policy: pods with no process left (podExited)
  bool disk_reclaim_done_ = false;     // policy: the DiskReclaim of the last tick counts as done
  NodeSnapshot snapshot_;
  std::map<std::string, SimPod> pods_;  // by uid
  std::vector<std::string> pod_order_;  // uids in arrival order: the snapshot's pod order
  std::optional<double> last_t_;
};

/// Replays `in` through a Simulator and writes its output to `out` as it goes.
/// A malformed line stops the replay: the error names the line number, and
/// nothing after it is processed.
/// `policy`: as for Simulator.
Result<void> simulate_stream(std::istream& in, std::ostream& out, const EvictionConfig& config,
                             std::optional<PolicyConfig> policy = std::nullopt);

/// The QoS class the kubelet derives from a pod's CPU and memory requests and
/// limits (nullopt: not set; zero counts as not set). Exposed for tests.
QosClass derive_qos(std::optional<double> request_cpu, std::optional<double> request_memory,
                    std::optional<double> limit_cpu, std::optional<double> limit_memory);

}  // namespace pressured
