#include "plugins/merge.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

namespace pressured::plugins {

std::string_view name(Action a) {
  switch (a) {
    case Action::Protect: return "protect";
    case Action::Demote: return "demote";
    case Action::Promote: return "promote";
  }
  return "?";
}

namespace {

std::string who(const Pod& p) { return p.name.empty() ? "<" + p.uid + ">" : p.namespace_ + "/" + p.name; }

// A plugin's words as they may appear in a log line, an Event and the
// checkpoint: printable ASCII, at most 200 characters.
std::string clean(std::string_view text) {
  std::string out;
  out.reserve(std::min<std::size_t>(text.size(), 200));
  for (char c : text) {
    if (out.size() == 200) break;
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  return out;
}

// The signal a lane's eviction carries when a plugin threshold decided it:
// the lane's, so the policy judges the release on the right resource.
Signal lane_signal(Lane l) {
  switch (l) {
    case Lane::Memory: return Signal::MemoryAvailable;
    case Lane::Disk: return Signal::NodefsAvailable;
    case Lane::Pids: return Signal::PidAvailable;
  }
  return Signal::MemoryAvailable;
}

std::size_t lane_index(Lane l) { return static_cast<std::size_t>(l); }

// A plugin's signal name: [a-zA-Z0-9._/-], 1 to 63 characters (it becomes a
// metric label and the eviction's reason).
bool valid_signal_name(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '/' || c == '-';
  });
}

constexpr std::size_t kMaxThresholdsPerPlugin = 16;
constexpr int64_t kMaxPluginGraceSeconds = 24 * 3600;

// The victim of one lane once the plugins' answers are applied.
struct Choice {
  const Pod* victim = nullptr;
  const Pod* runner_up = nullptr;
  std::vector<PluginNote> notes;
};

Choice choose(const std::vector<const Pod*>& ranked, Lane lane, ThresholdKind kind, bool lane_held,
              const std::vector<Answers>& answers, TimePoint now, const MergeOptions& options, MergeState& state,
              MergeReport& report) {
  Choice c;
  MergedRanking m = merge_ranking(ranked, lane, kind == ThresholdKind::Hard, answers, report, !lane_held);
  if (m.order.empty()) return c;
  c.victim = m.order.front();
  c.notes = std::move(m.notes);
  // A proposal replaces the victim under a soft threshold only, once a
  // plugin per interval, and only when the lane can act now (a deferred
  // decision would spend the plugin's turn for nothing).
  if (kind == ThresholdKind::Soft && !lane_held) {
    for (const Answers& a : answers) {
      const auto& proposals = a.proposals[lane_index(lane)];
      if (proposals.empty()) continue;
      if (auto last = state.last_proposal.find(a.plugin);
          last != state.last_proposal.end() && now - last->second < options.proposal_interval) {
        continue;
      }
      PluginTally& tally = report.tally[a.plugin];
      bool taken = false;
      for (const Proposal& p : proposals) {
        auto it = std::find_if(m.order.begin(), m.order.end(), [&](const Pod* pod) { return pod->uid == p.uid; });
        if (it == m.order.end()) {
          ++tally.ignored;  // not a candidate, or protected
          continue;
        }
        if (*it == c.victim) break;  // already chosen: the plugin's turn is not spent
        c.victim = *it;
        c.notes.push_back(PluginNote{a.plugin, "propose", who(**it), clean(p.reason)});
        state.last_proposal[a.plugin] = now;
        ++tally.proposals;
        taken = true;
        break;
      }
      if (taken) break;
    }
  }
  for (const Pod* p : m.order) {
    if (p != c.victim) {
      c.runner_up = p;
      break;
    }
  }
  if (c.notes.size() > options.max_notes) c.notes.resize(options.max_notes);
  return c;
}

// Re-fills the identity and the ranking facts of `e` for the victim `c`
// chose; what decided (signal, kind, observed, threshold) stays.
void refill(Eviction& e, const Choice& c, const NodeSnapshot& snapshot, const EvictionConfig& config) {
  const Pod& p = *c.victim;
  set_victim_identity(e, p);
  e.usage_at_decision = pod_usage(p, e.signal, snapshot.containerfs_layout);
  e.grace_period_seconds = eviction_grace_period(p, e.kind, config);
  e.keys = rank_keys(p, e.signal, snapshot.containerfs_layout, config);
  e.runner_up.reset();
  if (c.runner_up != nullptr) {
    e.runner_up = RunnerUp{c.runner_up->uid, c.runner_up->name, c.runner_up->namespace_,
                           rank_keys(*c.runner_up, e.signal, snapshot.containerfs_layout, config)};
  }
  e.plugin_notes = c.notes;
}

bool met(const ThresholdReport& t) { return t.less_than ? t.observed < t.threshold : t.observed > t.threshold; }

}  // namespace

std::vector<const Pod*> ranked_candidates(const NodeSnapshot& snapshot, Signal signal, const EvictionConfig& config,
                                          const std::vector<std::string>& excluded) {
  const StarvedResource resource = info(signal).resource;
  struct Keyed {
    const Pod* pod;
    uint64_t usage;
  };
  std::vector<Keyed> keyed;
  keyed.reserve(snapshot.pods.size());
  for (const Pod& p : snapshot.pods) {
    if (never_evicted_for(p, resource, config)) continue;
    if (std::find(excluded.begin(), excluded.end(), p.uid) != excluded.end()) continue;
    keyed.push_back({&p, pod_usage(p, signal, snapshot.containerfs_layout)});
  }
  std::sort(keyed.begin(), keyed.end(), [&](const Keyed& a, const Keyed& b) {
    return evicted_before(*a.pod, a.usage, *b.pod, b.usage, resource, config);
  });
  std::vector<const Pod*> out;
  out.reserve(keyed.size());
  for (const Keyed& k : keyed) out.push_back(k.pod);
  return out;
}

MergedRanking merge_ranking(const std::vector<const Pod*>& ranked, Lane lane, bool hard,
                            const std::vector<Answers>& answers, MergeReport& report, bool acts) {
  const std::size_t n = ranked.size();
  std::map<std::string_view, std::size_t> index;
  for (std::size_t i = 0; i < n; ++i) index.emplace(ranked[i]->uid, i);

  struct Mark {
    std::optional<PluginNote> protect;  // the first plugin's protection
    int score = 0;                      // promotions - demotions
    std::vector<PluginNote> moves;
  };
  std::vector<Mark> marks(n);
  for (const Answers& a : answers) {
    PluginTally& tally = report.tally[a.plugin];
    std::set<std::string_view> seen;  // one word per pod per plugin: its first
    for (const Adjustment& adj : a.adjustments[lane_index(lane)]) {
      auto it = index.find(adj.uid);
      if (it == index.end() || !seen.insert(it->first).second) {
        ++tally.ignored;
        continue;
      }
      Mark& m = marks[it->second];
      PluginNote note{a.plugin, std::string(name(adj.action)), who(*ranked[it->second]), clean(adj.reason)};
      switch (adj.action) {
        case Action::Protect:
          if (!m.protect) m.protect = std::move(note);
          break;
        case Action::Demote:
          --m.score;
          m.moves.push_back(std::move(note));
          break;
        case Action::Promote:
          ++m.score;
          m.moves.push_back(std::move(note));
          break;
      }
    }
  }

  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return marks[a].score > marks[b].score; });

  MergedRanking out;
  for (std::size_t i : order) {
    if (!marks[i].protect) out.order.push_back(ranked[i]);
  }
  std::optional<std::size_t> overridden;
  if (out.order.empty() && hard && n > 0) {
    // A hard threshold evicts: the protections cannot take its last
    // candidate. The merged order stands, protections set aside.
    overridden = order.front();
    for (std::size_t i : order) out.order.push_back(ranked[i]);
  }
  if (out.order.empty()) return out;

  const std::size_t victim = index.at(out.order.front()->uid);
  if (overridden) {
    PluginNote n = *marks[*overridden].protect;
    if (acts) ++report.tally[n.plugin].overridden;
    n.action = "protect-overridden";
    n.reason = "hard threshold, no other candidate (the plugin said: " + n.reason + ")";
    out.notes.push_back(std::move(n));
  }
  // What put the victim first: the protections and demotions of the pods
  // pressured ranked before it, and its own promotions.
  for (std::size_t j = 0; j < n; ++j) {
    if (j < victim && marks[j].protect && !overridden) {
      if (acts) ++report.tally[marks[j].protect->plugin].vetoes;
      out.notes.push_back(*marks[j].protect);
    }
    for (const PluginNote& mv : marks[j].moves) {
      if ((j < victim && mv.action == "demote") || (j == victim && mv.action == "promote")) out.notes.push_back(mv);
    }
  }
  return out;
}

MergeReport apply_answers(Decisions& d, const NodeSnapshot& snapshot, const EvictionConfig& config,
                          const std::vector<std::string>& excluded, const std::array<bool, kLaneCount>& lane_held,
                          const std::vector<Answers>& answers, TimePoint now, const MergeOptions& options,
                          MergeState& state) {
  MergeReport report;
  std::array<bool, kLaneCount> has_candidate{};
  std::vector<Eviction> kept;
  kept.reserve(d.candidates.size() + 1);
  for (Eviction& e : d.candidates) {
    const auto lane = lane_of(e.signal);
    if (!lane || !e.local_storage_rule.empty()) {  // a pod over its own limit: no ranking to change
      if (lane) has_candidate[lane_index(*lane)] = true;
      kept.push_back(std::move(e));
      continue;
    }
    has_candidate[lane_index(*lane)] = true;
    const auto ranked = ranked_candidates(snapshot, e.signal, config, excluded);
    Choice c = choose(ranked, *lane, e.kind, lane_held[lane_index(*lane)], answers, now, options, state, report);
    if (c.victim == nullptr) {
      // Every candidate protected (a soft threshold: a hard one keeps its last).
      if (!ranked.empty()) {
        Change ch{*lane, who(*ranked.front()), "", {}};
        report.changes.push_back(std::move(ch));
      }
      if (std::find(d.no_candidates.begin(), d.no_candidates.end(), e.signal) == d.no_candidates.end()) {
        d.no_candidates.push_back(e.signal);
      }
      continue;
    }
    if (c.victim->uid != e.uid || !c.notes.empty()) {
      std::string before = e.name.empty() ? "<" + e.uid + ">" : e.namespace_ + "/" + e.name;
      refill(e, c, snapshot, config);
      report.changes.push_back(Change{*lane, std::move(before), who(*c.victim), c.notes});
    }
    kept.push_back(std::move(e));
  }
  d.candidates = std::move(kept);

  // Plugin thresholds: compared and timed here, as the engine times its own.
  struct Met {
    const Answers* answers;
    const ThresholdReport* threshold;
  };
  std::vector<Met> due;
  std::set<std::tuple<std::string, std::string, ThresholdKind>> reported;
  for (const Answers& a : answers) {
    PluginTally& tally = report.tally[a.plugin];
    std::size_t count = 0;
    for (const ThresholdReport& t : a.thresholds) {
      if (++count > kMaxThresholdsPerPlugin || !valid_signal_name(t.signal) || !std::isfinite(t.observed) ||
          !std::isfinite(t.threshold) || t.grace_period_seconds < 0 || t.grace_period_seconds > kMaxPluginGraceSeconds) {
        ++tally.ignored;
        continue;
      }
      auto key = std::make_tuple(a.plugin, t.signal, t.kind);
      if (!reported.insert(key).second) {
        ++tally.ignored;  // the same threshold twice
        continue;
      }
      if (!met(t)) {
        state.threshold_first_met.erase(key);
        continue;
      }
      auto [it, inserted] = state.threshold_first_met.try_emplace(key, now);
      ++tally.thresholds_met;
      if (t.kind == ThresholdKind::Hard || now - it->second >= std::chrono::seconds(t.grace_period_seconds)) {
        due.push_back({&a, &t});
      }
    }
  }
  // A threshold no plugin reports any more (or whose plugin is not
  // answering) starts its grace period again when it comes back.
  std::erase_if(state.threshold_first_met, [&](const auto& e) { return !reported.contains(e.first); });
  std::stable_sort(due.begin(), due.end(), [](const Met& a, const Met& b) {
    return a.threshold->kind == ThresholdKind::Hard && b.threshold->kind != ThresholdKind::Hard;
  });
  for (const Met& m : due) {
    const ThresholdReport& t = *m.threshold;
    if (has_candidate[lane_index(t.lane)]) continue;  // the lane decides already
    const Signal signal = lane_signal(t.lane);
    const auto ranked = ranked_candidates(snapshot, signal, config, excluded);
    Choice c = choose(ranked, t.lane, t.kind, lane_held[lane_index(t.lane)], answers, now, options, state, report);
    if (c.victim == nullptr) continue;
    Eviction e;
    e.signal = signal;
    e.kind = t.kind;
    e.observed = t.observed;
    e.threshold_value = t.threshold;
    e.plugin_signal = m.answers->plugin + "/" + t.signal;
    char words[96];
    std::snprintf(words, sizeof words, "observed %g, threshold %g", t.observed, t.threshold);
    c.notes.insert(c.notes.begin(), PluginNote{m.answers->plugin, "threshold", who(*c.victim), words});
    if (c.notes.size() > options.max_notes) c.notes.resize(options.max_notes);
    refill(e, c, snapshot, config);
    report.changes.push_back(Change{t.lane, "", who(*c.victim), c.notes});
    has_candidate[lane_index(t.lane)] = true;
    d.candidates.push_back(std::move(e));
  }
  d.eviction.reset();
  if (!d.candidates.empty()) d.eviction = d.candidates.front();
  return report;
}

std::vector<LaneQuestion> lane_questions(const Decisions& d, const NodeSnapshot& snapshot,
                                         const EvictionConfig& config, const std::vector<std::string>& excluded,
                                         const std::vector<Answers>& answers, std::size_t max_candidates) {
  std::vector<LaneQuestion> out;
  for (std::size_t l = 0; l < kLaneCount; ++l) {
    LaneQuestion q;
    q.lane = static_cast<Lane>(l);
    Signal signal = lane_signal(q.lane);
    bool signal_set = false;
    for (const ThresholdStatus& t : d.thresholds) {
      if (!t.met || lane_of(t.threshold.signal) != q.lane) continue;
      q.signals_met.emplace_back(name(t.threshold.signal));
      (t.threshold.kind == ThresholdKind::Hard ? q.hard : q.soft) = true;
      if (!signal_set) {
        signal = t.threshold.signal;  // rank as the most urgent threshold met would
        signal_set = true;
      }
    }
    for (const Answers& a : answers) {
      for (const ThresholdReport& t : a.thresholds) {
        if (t.lane != q.lane || !valid_signal_name(t.signal) || !met(t)) continue;
        q.signals_met.push_back(a.plugin + "/" + t.signal);
        (t.kind == ThresholdKind::Hard ? q.hard : q.soft) = true;
      }
    }
    const auto ranked = ranked_candidates(snapshot, signal, config, excluded);
    if (ranked.empty()) continue;
    const StarvedResource resource = info(signal).resource;
    for (std::size_t i = 0; i < ranked.size() && i < max_candidates; ++i) {
      const Pod& p = *ranked[i];
      q.candidates.push_back(CandidatePod{p.uid, p.name, p.namespace_, p.qos, p.priority,
                                          pod_usage(p, signal, snapshot.containerfs_layout),
                                          pod_request(p, resource), p.daemonset, p.labels});
    }
    out.push_back(std::move(q));
  }
  return out;
}

}  // namespace pressured::plugins
