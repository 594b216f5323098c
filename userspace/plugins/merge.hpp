#pragma once
// The merge of plugin answers into a decision (docs/plugins.md, "Guarantees").
// Pure: the engine's decisions, the snapshot they were taken on and the
// plugins' latest answers in; the decisions changed, what changed and why
// out. No gRPC type, no I/O, no clock: the host (host.hpp) fetches the
// answers off the loop's thread, this decides what they may change.
//
// What a plugin cannot change, whatever it answers:
//  - a pod the engine may never evict (critical, static or mirror, a
//    DaemonSet pod under `never`, one without metadata) is never a victim:
//    answers name candidates of pressured's ranking, any other uid is ignored;
//  - a hard threshold always evicts when pressured's ranking has a
//    candidate: protections of the last candidates are overridden;
//  - proposals count only under a soft threshold of the lane, never a hard
//    one, and at most one a plugin per `proposal_interval`;
//  - every change names the plugin and its reason in the decision's "why".

#include <array>
#include <map>
#include <string>
#include <vector>

#include "pressured/engine.hpp"
#include "pressured/plugins.hpp"
#include "pressured/snapshot.hpp"

namespace pressured::plugins {

/// The merge's limits (from PluginsConfig).
struct MergeOptions {
  Duration proposal_interval = std::chrono::seconds(60);
  std::size_t max_notes = 8;  // notes kept per decision (the first ones, in the order they changed it)
};

/// The merge's memory between decisions (on the loop's thread).
struct MergeState {
  /// plugin -> when its last proposal was taken.
  std::map<std::string, TimePoint> last_proposal;
  /// (plugin, signal, kind) -> when the plugin's threshold was first met.
  std::map<std::tuple<std::string, std::string, ThresholdKind>, TimePoint> threshold_first_met;
};

/// What one plugin's answers did in one decision.
struct PluginTally {
  uint64_t vetoes = 0;      // protections that kept the pod pressured would have evicted
  uint64_t overridden = 0;  // protections refused (the last candidate of a hard threshold)
  uint64_t proposals = 0;   // proposals taken
  uint64_t ignored = 0;     // entries naming no candidate, or refused as invalid
  uint64_t thresholds_met = 0;
};

/// One decision a plugin changed, for the log.
struct Change {
  Lane lane = Lane::Memory;
  std::string before;  // the victim pressured's ranking chose ("" when none: a plugin threshold)
  std::string after;   // the victim now
  std::vector<PluginNote> notes;
};

struct MergeReport {
  std::map<std::string, PluginTally> tally;  // by plugin
  std::vector<Change> changes;
};

/// A lane's candidates in pressured's order for the signal that decided
/// (the engine's ranking, ineligible and excluded pods left out).
std::vector<const Pod*> ranked_candidates(const NodeSnapshot& snapshot, Signal signal, const EvictionConfig& config,
                                          const std::vector<std::string>& excluded);

/// The result of applying every plugin's adjustments to one lane's ranking.
struct MergedRanking {
  std::vector<const Pod*> order;  // first to evict first
  std::vector<PluginNote> notes;  // changes that put order.front() there
};

/// Applies the plugins' adjustments for a lane to `ranked` (pressured's
/// order): promoted pods first, demoted ones last (pressured's order kept
/// within each group), protected pods out, unless `hard` and nothing would
/// be left: then pressured's first protected pod stays, noted as
/// protect-overridden. Uids that are not in `ranked` are ignored and tallied;
/// vetoes are tallied when `acts` (the lane can act on this decision).
MergedRanking merge_ranking(const std::vector<const Pod*>& ranked, Lane lane, bool hard,
                            const std::vector<Answers>& answers, MergeReport& report, bool acts = true);

/// Applies `answers` to the engine's decisions `d`: re-chooses each lane's
/// victim on the merged ranking, takes a proposal under a soft threshold
/// (lanes not in `lane_held` only), and adds a candidate for a plugin
/// threshold met (grace elapsed) on a lane with none. Local-storage
/// evictions (a pod over its own limit) are left as they are.
MergeReport apply_answers(Decisions& d, const NodeSnapshot& snapshot, const EvictionConfig& config,
                          const std::vector<std::string>& excluded, const std::array<bool, kLaneCount>& lane_held,
                          const std::vector<Answers>& answers, TimePoint now, const MergeOptions& options,
                          MergeState& state);

/// The lane questions to ask plugins after a decision: for every lane, the
/// head of pressured's ranking (at most `max_candidates`) and the thresholds
/// of the lane met now (node and plugin ones).
std::vector<LaneQuestion> lane_questions(const Decisions& d, const NodeSnapshot& snapshot,
                                         const EvictionConfig& config, const std::vector<std::string>& excluded,
                                         const std::vector<Answers>& answers, std::size_t max_candidates);

}  // namespace pressured::plugins
