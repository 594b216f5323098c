#pragma once
// Out-of-process eviction plugins (docs/plugins.md): what pressured asks a
// plugin and what a plugin answers, as plain values, and the transport that
// carries them. The gRPC transport lives in a module of its own
// (libpressured_plugin_grpc.so, userspace/plugins/grpc/), loaded only when
// plugins.directory is set; nothing here names a gRPC or protobuf type, so
// the merge of answers into a decision (userspace/plugins/merge.hpp) and the
// host's tests need neither.

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "pressured/clock.hpp"
#include "pressured/config.hpp"
#include "pressured/policy.hpp"
#include "pressured/result.hpp"
#include "pressured/signals.hpp"

namespace pressured::plugins {

/// The API version pressured speaks (the .proto's package).
inline constexpr const char* kApiVersion = "v1alpha1";
/// What pressured sends beyond the first v1alpha1 messages (IdentifyRequest.features).
inline constexpr const char* kFeaturePodLabels = "pod-labels";

/// Who a plugin is and what it answers (its Identify).
struct Identity {
  std::string name;     // unique on the node: names it in logs, metrics and "why"
  std::string version;  // the plugin's own, for logs
  bool thresholds = false;
  bool rank = false;
  bool propose = false;
  bool operator==(const Identity&) const = default;
};

/// A threshold of the plugin's own (GetThresholds): pressured compares,
/// times the grace period and evicts for `lane` itself.
struct ThresholdReport {
  std::string signal;
  double observed = 0;
  double threshold = 0;
  bool less_than = true;  // met when observed < threshold; else when observed > threshold
  ThresholdKind kind = ThresholdKind::Soft;
  int64_t grace_period_seconds = 0;
  Lane lane = Lane::Memory;
  bool operator==(const ThresholdReport&) const = default;
};

enum class Action : uint8_t { Protect, Demote, Promote };
std::string_view name(Action a);

/// One plugin's word on one candidate (RankCandidates).
struct Adjustment {
  std::string uid;
  Action action = Action::Protect;
  std::string reason;
  bool operator==(const Adjustment&) const = default;
};

/// A pod the plugin would evict first under a soft threshold (ProposeEvictions).
struct Proposal {
  std::string uid;
  std::string reason;
  bool operator==(const Proposal&) const = default;
};

/// A candidate as a plugin sees it: identity, class, usage of the lane's resource.
struct CandidatePod {
  std::string uid;
  std::string name;
  std::string namespace_;
  QosClass qos = QosClass::BestEffort;
  int32_t priority = 0;
  uint64_t usage = 0;
  uint64_t request = 0;
  bool daemonset = false;
  std::shared_ptr<const PodLabels> labels;  // the pod's, shared with the snapshot; null: none
};

/// What pressured asks about one lane: its ranking's head and the thresholds met.
struct LaneQuestion {
  Lane lane = Lane::Memory;
  std::vector<std::string> signals_met;
  bool hard = false;  // a hard threshold of the lane is met
  bool soft = false;  // a soft threshold of the lane is met (proposals are asked only then)
  std::vector<CandidatePod> candidates;  // pressured's order, at most plugins.maxCandidates
};

/// Everything one plugin answered in one round (what its capabilities cover).
struct Answers {
  std::string plugin;
  TimePoint at{};  // when the round that asked ended (monotonic)
  std::vector<ThresholdReport> thresholds;
  std::array<std::vector<Adjustment>, kLaneCount> adjustments;  // by Lane
  std::array<std::vector<Proposal>, kLaneCount> proposals;      // by Lane
};

/// Limits the transport enforces on every answer before pressured reads it.
struct AnswerLimits {
  std::size_t max_message_bytes = 1 << 20;  // larger answers are an error
  std::size_t max_entries = 64;             // entries beyond are dropped (and counted)
  std::size_t max_reason_chars = 200;       // longer reasons are cut
};

/// A call's failure, as the host counts it.
enum class CallError : uint8_t { Timeout, Unavailable, Garbage, Other };

/// One connection to one plugin socket. Every call is bounded by `deadline`
/// and returns an error rather than waiting longer. Used by one thread.
class PluginClient {
 public:
  virtual ~PluginClient() = default;
  struct Failure {
    CallError kind = CallError::Other;
    std::string message;
  };
  template <typename T>
  using Answer = std::variant<T, Failure>;
  /// Dropped entries (over max_entries, unknown enum values) since the last call.
  virtual std::size_t take_dropped() = 0;
  virtual Answer<Identity> identify(Duration deadline) = 0;
  virtual Answer<std::vector<ThresholdReport>> thresholds(Duration deadline) = 0;
  virtual Answer<std::vector<Adjustment>> rank(const LaneQuestion& q, Duration deadline) = 0;
  virtual Answer<std::vector<Proposal>> propose(const LaneQuestion& q, Duration deadline) = 0;
};

/// Opens clients to plugin sockets (the gRPC module's, or a test's fake).
class PluginConnector {
 public:
  virtual ~PluginConnector() = default;
  virtual std::unique_ptr<PluginClient> connect(const std::string& socket_path, const AnswerLimits& limits) = 0;
};

}  // namespace pressured::plugins

/// The gRPC module's entry point (dlsym'd by name): a new connector, owned by
/// the caller. The signature is the module's ABI with pressured.
extern "C" pressured::plugins::PluginConnector* pressured_plugin_connector_v1alpha1();
