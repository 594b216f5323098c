#include "engine/why.hpp"

namespace pressured {
namespace {

std::string key(std::string_view camel, std::string_view snake, JsonKeys style) {
  return std::string(style == JsonKeys::Camel ? camel : snake);
}

}  // namespace

nlohmann::ordered_json rank_keys_json(const RankKeys& k, JsonKeys style) {
  nlohmann::ordered_json o;
  o["qos"] = std::string(name(k.qos));
  o[key("overRequest", "over_request", style)] = k.over_request;
  o["priority"] = k.priority;
  o["usage"] = k.usage;
  o["request"] = k.request;
  if (k.kubelet) {
    o["ranking"] = "kubelet";
    o["amount"] = k.kubelet_amount();  // usage - request, may be negative
  } else {
    o["amount"] = k.amount();
  }
  o[key("zeroUsage", "zero_usage", style)] = k.zero_usage;
  o[key("daemonsetLast", "daemonset_last", style)] = k.daemonset_last;
  if (k.no_stats) o[key("noStats", "no_stats", style)] = true;
  return o;
}

nlohmann::ordered_json why_json(const Eviction& e, JsonKeys style, bool explanation) {
  nlohmann::ordered_json o;
  o["victim"] = rank_keys_json(e.keys, style);
  const std::string runner = key("runnerUp", "runner_up", style);
  const std::string decided = key("decidedBy", "decided_by", style);
  if (e.runner_up) {
    nlohmann::ordered_json r;
    r["uid"] = e.runner_up->uid;
    r["name"] = e.runner_up->name;
    r["namespace"] = e.runner_up->namespace_;
    r.update(rank_keys_json(e.runner_up->keys, style));
    o[runner] = r;
    o[decided] = std::string(name(deciding_key(e.keys, e.runner_up->keys)));
  } else {
    o[runner] = nullptr;
    o[decided] = nullptr;
  }
  if (e.relief) {
    // Reclaim was asked first for this crossing and the node stayed short.
    nlohmann::ordered_json r;
    r["id"] = e.relief->id;
    r[key("askedBytes", "asked_bytes", style)] = e.relief->asked_bytes;
    r[key("reclaimedBytes", "reclaimed_bytes", style)] = e.relief->reclaimed_bytes;
    r["seconds"] = e.relief->seconds;
    o["relief"] = r;
  }
  if (!e.plugin_notes.empty()) {
    // What plugins changed in this decision (docs/plugins.md).
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (const PluginNote& n : e.plugin_notes) {
      a.push_back({{"plugin", n.plugin}, {"action", n.action}, {"pod", n.pod}, {"reason", n.reason}});
    }
    o["plugins"] = std::move(a);
    if (!e.plugin_signal.empty()) o[key("pluginSignal", "plugin_signal", style)] = e.plugin_signal;
  }
  if (explanation) o["explanation"] = explain_choice(e);
  return o;
}

}  // namespace pressured
