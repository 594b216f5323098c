#include "k8s/node_bodies.hpp"

#include "engine/eviction_words.hpp"
#include "k8s/bounded_json.hpp"
#include "k8s/eviction_bodies.hpp"

namespace pressured::k8s {

using json = nlohmann::json;

std::optional<std::string> threshold_met_event_body(const Eviction& e, const std::string& node, const std::string& now) {
  if (!e.local_storage_rule.empty() || node.empty()) return std::nullopt;
  json meta;
  if (e.id.empty()) {
    meta = {{"generateName", node + "."}, {"namespace", "default"}};
  } else {
    meta = {{"name", node + "." + e.id}, {"namespace", "default"}};
  }
  return warning_event(std::move(meta), {{"kind", "Node"}, {"name", node}, {"uid", node}}, "EvictionThresholdMet",
                       "Attempting to reclaim " + starved_resource_name(e.signal), node, now);
}

std::string conditions_patch(const std::string& prefix, const std::array<bool, kConditionCount>& status,
                             const std::array<bool, kConditionCount>& flipped, const std::string& now) {
  static const char* kOk[kConditionCount] = {"NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID"};
  static const char* kBad[kConditionCount] = {"NodeHasInsufficientMemory", "NodeHasDiskPressure", "NodeHasInsufficientPID"};
  json conds = json::array();
  for (std::size_t i = 0; i < kConditionCount; ++i) {
    std::string type = prefix + std::string(name(static_cast<Condition>(i)));
    json c{{"type", type},
           {"status", status[i] ? "True" : "False"},
           {"reason", std::string("Pressured") + (status[i] ? kBad[i] : kOk[i])},
           {"message", status[i] ? "pressured observed a met eviction threshold for " + std::string(name(static_cast<Condition>(i)))
                                 : "pressured observes no eviction threshold met"},
           {"lastHeartbeatTime", now}};
    if (flipped[i]) c["lastTransitionTime"] = now;
    conds.push_back(std::move(c));
  }
  return json{{"status", {{"conditions", conds}}}}.dump();
}

std::array<std::string, kConditionCount> taint_keys(const std::string& prefix) {
  return {prefix + "memory-pressure", prefix + "disk-pressure", prefix + "pid-pressure"};
}

std::optional<json> updated_taints(const json& current, const std::string& prefix,
                                   const std::array<bool, kConditionCount>& status, const std::string& now) {
  auto keys = taint_keys(prefix);
  std::array<bool, kConditionCount> present{};
  json out = json::array();
  bool changed = false;
  if (current.is_array()) {
    for (const auto& t : current) {
      std::size_t own = kConditionCount;
      for (std::size_t i = 0; i < kConditionCount; ++i) {
        if (string_member(t, "key") == keys[i] && string_member(t, "effect") == "NoSchedule") own = i;
      }
      if (own == kConditionCount) {
        out.push_back(t);  // someone else's: untouched
      } else if (status[own] && !present[own]) {
        present[own] = true;
        out.push_back(t);
      } else {
        changed = true;  // cleared (or a duplicate)
      }
    }
  }
  for (std::size_t i = 0; i < kConditionCount; ++i) {
    if (status[i] && !present[i]) {
      out.push_back(json{{"key", keys[i]}, {"effect", "NoSchedule"}, {"timeAdded", now}});
      changed = true;
    }
  }
  if (!changed) return std::nullopt;
  return out;
}

}  // namespace pressured::k8s
