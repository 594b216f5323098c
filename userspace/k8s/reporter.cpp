#include "k8s/reporter.hpp"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "common/log.hpp"
#include "engine/eviction_words.hpp"
#include "k8s/bounded_json.hpp"

namespace pressured::k8s {

namespace {

using json = nlohmann::json;

std::string pod_path(const Eviction& e) {
  return "/api/v1/namespaces/" + e.namespace_ + "/pods/" + e.name;
}

}  // namespace

std::string rfc3339_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string pod_status_patch(const Eviction& e, const std::string& now, std::optional<int64_t> observed_generation) {
  const std::string message = eviction_message(e);
  json status{{"phase", "Failed"}, {"reason", "Evicted"}, {"message", message}};
  // The kubelet sets DisruptionTarget for threshold evictions only, not for
  // an own local-storage limit (eviction_manager.go, synchronize vs
  // localStorageEviction).
  if (e.local_storage_rule.empty()) {
    status["conditions"] = json::array({json{{"type", "DisruptionTarget"},
                                             {"status", "True"},
                                             {"reason", "TerminationByKubelet"},
                                             {"message", message},
                                             {"lastTransitionTime", now}}});
    if (observed_generation) status["conditions"][0]["observedGeneration"] = *observed_generation;
  }
  json j{{"metadata", {{"uid", e.uid}}}, {"status", std::move(status)}};
  return j.dump();
}

int64_t api_grace_period_seconds(const Eviction& e) { return std::max<int64_t>(1, e.grace_period_seconds); }

std::string eviction_body(const Eviction& e, const std::string& api_version) {
  json j{{"apiVersion", api_version},
         {"kind", "Eviction"},
         {"metadata", {{"name", e.name}, {"namespace", e.namespace_}}},
         {"deleteOptions",
          {{"gracePeriodSeconds", api_grace_period_seconds(e)}, {"preconditions", {{"uid", e.uid}}}}}};
  return j.dump();
}

std::string delete_body(const Eviction& e) {
  json j{{"apiVersion", "v1"},
         {"kind", "DeleteOptions"},
         {"gracePeriodSeconds", api_grace_period_seconds(e)},
         {"preconditions", {{"uid", e.uid}}}};
  return j.dump();
}

// The Event of one eviction has a name of its own, "<pod>.<eviction id>" (the
// kubelet's "<pod>.<hex time>" shape), so that a POST retried after the server
// stored it but the answer was lost (a timeout on a loaded API server) meets
// 409 AlreadyExists instead of recording the eviction twice; a resumed
// eviction keeps its id and so its Event. Without an id: a generated name.
// The kubelet's annotations (AnnotatedEventf) ride on the Event's metadata.
json event_metadata(const Eviction& e) {
  json meta;
  if (e.id.empty()) {
    meta = {{"generateName", e.name + "."}, {"namespace", e.namespace_}};
  } else {
    constexpr std::size_t kMaxName = 253;  // a DNS subdomain
    std::string pod = e.name.substr(0, kMaxName - std::min(kMaxName - 1, e.id.size() + 1));
    // A cut name must still end its label with an alphanumeric character.
    while (!pod.empty() && !std::isalnum(static_cast<unsigned char>(pod.back()))) pod.pop_back();
    meta = {{"name", pod + "." + e.id}, {"namespace", e.namespace_}};
  }
  auto annotations = eviction_annotations(e);
  if (!annotations.empty()) meta["annotations"] = annotations;
  return meta;
}

namespace {
// A Warning Event from pressured on `node`, as the kubelet's recorder shapes one.
std::string warning_event(json metadata, json involved, std::string_view reason, const std::string& message,
                          const std::string& node, const std::string& now) {
  json j{{"apiVersion", "v1"},
         {"kind", "Event"},
         {"metadata", std::move(metadata)},
         {"involvedObject", std::move(involved)},
         {"reason", reason},
         {"message", message},
         {"type", "Warning"},
         {"source", {{"component", "pressured"}, {"host", node}}},
         {"reportingComponent", "pressured"},
         {"reportingInstance", node},
         {"firstTimestamp", now},
         {"lastTimestamp", now},
         {"count", 1}};
  return j.dump();
}
}  // namespace

std::string event_body(const Eviction& e, const std::string& node, const std::string& now) {
  return warning_event(
      event_metadata(e),
      {{"apiVersion", "v1"}, {"kind", "Pod"}, {"name", e.name}, {"namespace", e.namespace_}, {"uid", e.uid}},
      "Evicted", eviction_message(e), node, now);
}

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

bool eviction_version_not_served(const HttpResponse& r) {
  if (r.status != 400 && r.status != 404) return false;
  return r.body.find("no kind \\\"Eviction\\\" is registered") != std::string::npos ||
         r.body.find("no kind \"Eviction\" is registered") != std::string::npos;
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

Reporter::Reporter(ApiClient client, ReporterOptions options) : client_(std::move(client)), opts_(std::move(options)) {
  // Never write the kubelet-owned condition types.
  if (opts_.condition_prefix.empty()) opts_.condition_prefix = "Pressured";
}

Reporter::~Reporter() { stop(); }

void Reporter::attach_metrics(Metrics& metrics) {
  metrics_ = &metrics;
  stats_export_ = export_stats(metrics, stats_);
}

void Reporter::start() {
  std::lock_guard lk(mu_);
  if (worker_.joinable()) return;
  stopping_ = false;
  worker_ = std::thread([this] { run(); });
}

void Reporter::stop() {
  std::string unsent;
  std::size_t n_unsent = 0;
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
    for (const auto& q : queue_) {
      if (q.kind != Task::Kind::Evict) continue;
      if (n_unsent++ < 10) unsent += (unsent.empty() ? "" : ", ") + q.eviction.namespace_ + "/" + q.eviction.name;
    }
    stats_.dropped += queue_.size();
    queue_.clear();
  }
  // Their pods were killed locally; without the API eviction the kubelet
  // sees a container that exited and may start it again.
  if (n_unsent != 0) {
    spdlog::error("k8s: stopping with {} API eviction(s) not sent ({}{}): the kubelet may restart their containers",
                  n_unsent, unsent, n_unsent > 10 ? ", ..." : "");
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void Reporter::push(Task t) {
  std::vector<std::string> dropped_evictions;
  {
    std::lock_guard lk(mu_);
    if (t.kind == Task::Kind::Conditions) {
      for (auto& q : queue_) {
        if (q.kind == Task::Kind::Conditions) {  // coalesce: newest status, every flip kept
          for (std::size_t i = 0; i < kConditionCount; ++i) q.flipped[i] = q.flipped[i] || t.flipped[i];
          q.status = t.status;
          return;
        }
      }
    }
    // Evictions go ahead of Events and conditions (in their own order): each
    // is a pod already killed here, which the kubelet starts again until the
    // API marks it evicted; on a slow API server an Event's retries must not
    // hold it back. When full, the oldest other request goes first.
    auto first_other = [this] {
      return std::find_if(queue_.begin(), queue_.end(), [](const Task& q) {
        return q.kind != Task::Kind::Evict && q.kind != Task::Kind::End;
      });
    };
    while (queue_.size() >= opts_.queue_capacity) {
      auto drop = first_other();
      if (drop == queue_.end()) drop = queue_.begin();
      // Either half of an eviction dropped: answered "dropped" once the
      // other half is done with, so that the whole is sent again.
      if (drop->kind == Task::Kind::Evict && drop->event_follows) {
        event_dropped_.insert(drop->eviction.id);  // its Event, when done, reports it
        awaiting_event_[drop->eviction.id] = EvictionResult::Dropped;
      } else if (drop->kind == Task::Kind::Evict || drop->kind == Task::Kind::End) {
        dropped_evictions.push_back(drop->eviction.id);
      } else if (drop->kind == Task::Kind::Event) {
        if (auto it = awaiting_event_.find(drop->eviction.id); it != awaiting_event_.end()) {
          awaiting_event_.erase(it);
          dropped_evictions.push_back(drop->eviction.id);
        } else {
          event_dropped_.insert(drop->eviction.id);  // its Eviction, when done, reports it
        }
      }
      queue_.erase(drop);
      if (stats_.dropped++ == 0) {
        spdlog::warn("k8s: API queue full ({}), dropping the oldest requests (counted)", opts_.queue_capacity);
      }
    }
    if (t.kind == Task::Kind::Evict || t.kind == Task::Kind::End) {
      queue_.insert(first_other(), std::move(t));
    } else {
      queue_.push_back(std::move(t));
    }
  }
  cv_.notify_all();
  for (const auto& id : dropped_evictions) eviction_done(id, EvictionResult::Dropped);
}

void Reporter::set_eviction_hook(std::function<void(const std::string&, EvictionResult)> hook) {
  std::lock_guard lk(eviction_hook_mu_);
  eviction_hook_ = std::move(hook);
}

void Reporter::eviction_done(const std::string& id, EvictionResult result) {
  std::lock_guard lk(eviction_hook_mu_);
  if (eviction_hook_) eviction_hook_(id, result);
}

void Reporter::report_eviction(const Eviction& e) {
  const bool event = !e.name.empty() && !e.namespace_.empty();
  // The kubelet records the node's EvictionThresholdMet before it evicts.
  if (opts_.threshold_met_events && e.local_storage_rule.empty()) push(Task{Task::Kind::NodeEvent, e, {}, {}});
  if (e.static_pod) {
    ++stats_.refused_static;
    spdlog::info("k8s: pod {}/{} is static/mirror: not evicted through the API", e.namespace_, e.name);
    if (event) {
      std::lock_guard lk(mu_);
      awaiting_event_[e.id] = EvictionResult::NotNeeded;
    } else {
      eviction_done(e.id, EvictionResult::NotNeeded);
    }
  } else {
    push(Task{Task::Kind::Evict, e, {}, {}, event});
  }
  if (event) push(Task{Task::Kind::Event, e, {}, {}});
}

void Reporter::end_pod(const Eviction& e, RecordUndone cause) {
  Task t{Task::Kind::End, e, {}, {}};
  t.undone = cause;
  push(std::move(t));
}

void Reporter::report_conditions(const std::array<bool, kConditionCount>& status,
                                 const std::array<bool, kConditionCount>& flipped) {
  push(Task{Task::Kind::Conditions, {}, status, flipped});
}

bool Reporter::drain(Duration timeout) {
  std::unique_lock lk(mu_);
  return cv_.wait_for(lk, timeout, [this] { return queue_.empty() && !busy_; });
}

void Reporter::run() {
  while (true) {
    Task t;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      t = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    execute(t);
    {
      std::lock_guard lk(mu_);
      busy_ = false;
    }
    cv_.notify_all();
  }
}

bool Reporter::wait_interruptible(Duration d) {
  std::unique_lock lk(mu_);
  return !cv_.wait_for(lk, d, [this] { return stopping_; });
}

std::optional<HttpResponse> Reporter::with_retries(ApiAction action, const std::string& what,
                                                   const std::function<Result<HttpResponse>()>& call,
                                                   bool retry_429_500) {
  Duration backoff = opts_.initial_backoff;
  for (int attempt = 1; attempt <= opts_.max_attempts; ++attempt) {
    auto r = call();
    const ApiOutcome outcome = r ? api_outcome_from_http_status(static_cast<int>(r->status))
                                 : (r.error().code == ETIMEDOUT ? ApiOutcome::Timeout : ApiOutcome::Unreachable);
    if (metrics_) metrics_->api_request(action, outcome);
    if (hook_) hook_(action, outcome);
    long wait_ms = -1;
    if (r) {
      bool retryable = r->status == 429 || r->status >= 500;
      if (!retryable || (!retry_429_500 && (r->status == 429 || r->status == 500))) return *r;
      wait_ms = retry_after_ms(*r);
      spdlog::warn("k8s: {}: HTTP {} (attempt {}/{})", what, r->status, attempt, opts_.max_attempts);
    } else {
      spdlog::warn("k8s: {}: {} (attempt {}/{})", what, r.error().message, attempt, opts_.max_attempts);
    }
    if (attempt == opts_.max_attempts) break;
    ++stats_.retries;
    Duration d = wait_ms >= 0 ? Duration(std::chrono::milliseconds(wait_ms)) : backoff;
    if (!wait_interruptible(std::min(d, opts_.max_backoff))) return std::nullopt;
    backoff = std::min(backoff * 2, opts_.max_backoff);
  }
  ++stats_.failures;
  spdlog::error("k8s: {}: giving up after {} attempts", what, opts_.max_attempts);
  return std::nullopt;
}

void Reporter::execute(const Task& t) {
  switch (t.kind) {
    case Task::Kind::Evict: {
      const EvictionResult r = evict(t.eviction);
      bool answer_now = !t.event_follows;
      EvictionResult answer = r;
      if (t.event_follows) {
        std::lock_guard lk(mu_);
        if (event_dropped_.erase(t.eviction.id) != 0) {
          answer_now = true;
          answer = EvictionResult::Dropped;
        } else {
          awaiting_event_[t.eviction.id] = r;
        }
      }
      if (answer_now) eviction_done(t.eviction.id, answer);
      return;
    }
    case Task::Kind::End: {
      // The record's Event was sent with it: no second one.
      const auto& e = t.eviction;
      const std::string what = "end of " + e.namespace_ + "/" + e.name + " after its record was undone";
      EvictionResult r = EvictionResult::NotNeeded;
      if (auto done = already_done(e, what, /*terminal_done=*/false)) {
        r = *done;  // ended already (by the run before a restart, or someone else)
      } else {
        ++(t.undone == RecordUndone::PhaseReverted ? stats_.records_undone_phase : stats_.records_undone_restart);
        r = evict_through_api(e, what);
      }
      eviction_done(e.id, r);
      return;
    }
    case Task::Kind::Event: {
      const auto& e = t.eviction;
      std::optional<HttpResponse> r;
      // Only about a pod read on this node (its Eviction's read, or its own).
      if (event_on_node(e)) {
        r = with_retries(ApiAction::Event, "event for " + e.namespace_ + "/" + e.name, [&] {
          return client_.request("POST", "/api/v1/namespaces/" + e.namespace_ + "/events",
                                 event_body(e, opts_.node_name, rfc3339_now()));
        });
      }
      if (r && r->status == 409) {
        // Stored by an earlier attempt whose answer was lost, or by the run
        // before a restart that resumed this eviction: recorded once.
        spdlog::debug("k8s: event for {}/{} already recorded", e.namespace_, e.name);
      } else if (r && r->status != 200 && r->status != 201) {
        ++stats_.failures;
      }
      // The Eviction's answer waited for its Event (a failed Event is
      // counted above; what matters for the pod is the Eviction's).
      std::optional<EvictionResult> done;
      {
        std::lock_guard lk(mu_);
        if (auto it = awaiting_event_.find(e.id); it != awaiting_event_.end()) {
          done = it->second;
          awaiting_event_.erase(it);
        }
        event_dropped_.erase(e.id);
      }
      if (done) eviction_done(e.id, *done);
      return;
    }
    case Task::Kind::NodeEvent: {
      auto body = threshold_met_event_body(t.eviction, opts_.node_name, rfc3339_now());
      if (!body) return;
      auto r = with_retries(ApiAction::NodeEvent, "node event for " + opts_.node_name,
                            [&] { return client_.request("POST", "/api/v1/namespaces/default/events", *body); });
      if (r && r->status != 200 && r->status != 201 && r->status != 409) ++stats_.failures;
      return;
    }
    case Task::Kind::Conditions: {
      auto r = with_retries(ApiAction::NodeStatus, "node conditions", [&] {
        return client_.request("PATCH", "/api/v1/nodes/" + opts_.node_name + "/status",
                               conditions_patch(opts_.condition_prefix, t.status, t.flipped, rfc3339_now()),
                               "application/strategic-merge-patch+json");
      });
      if (r && r->status == 200) {
        ++stats_.conditions_patched;
      } else {
        if (r) {
          ++stats_.failures;
          spdlog::error("k8s: node conditions: HTTP {}: {}", r->status, printable_excerpt(r->body));
        }
      }
      if (opts_.taint_nodes) sync_taints(t.status);
      return;
    }
  }
}

EvictionResult Reporter::evict(const Eviction& e) {
  std::string what = "eviction of " + e.namespace_ + "/" + e.name;
  std::optional<int64_t> generation;
  if (auto done = already_done(e, what, opts_.mark_failed, /*count_fate=*/true, &generation)) return *done;
  if (opts_.mark_failed) {
    if (auto r = mark_failed(e, what, generation)) return *r;
  }
  return evict_through_api(e, what);
}

void Reporter::refuse_write(const std::string& what, bool other_node, const std::string& why) {
  ++(other_node ? stats_.writes_refused_other_node : stats_.writes_refused_node_unknown);
  spdlog::warn("k8s: {}: not sent: {}; pressured writes only about pods on its node {}", what, why, opts_.node_name);
}

std::optional<EvictionResult> Reporter::already_done(const Eviction& e, const std::string& what, bool terminal_done,
                                                     bool count_fate, std::optional<int64_t>* generation) {
  using R = EvictionResult;
  // A pod's spec.nodeName never changes once set, and every write carries
  // the uid read here (status patch, Eviction and DELETE preconditions, the
  // Event's involvedObject): what this read shows on this node is what the
  // write reaches. Until it says so, the Event waits for it too.
  on_node_[e.id] = false;
  if (on_node_.size() > 4 * opts_.queue_capacity) {
    // Verdicts whose Event was dropped: an Event without one reads the pod itself.
    on_node_.clear();
    on_node_[e.id] = false;
  }
  // Read the pod first: a pod already gone or recreated under the same
  // name needs no eviction at all, and API servers before 1.22 retry a
  // failed uid precondition inside the Eviction for ~10 s before they
  // answer 409 (longer than the request timeout). The precondition still
  // guards the race between this read and the eviction.
  auto current = with_retries(ApiAction::ListPods, "get pod " + e.namespace_ + "/" + e.name,
                              [&] { return client_.request("GET", pod_path(e)); });
  if (!current) {
    refuse_write(what, false, "the pod could not be read");
    return R::GaveUp;  // counted by with_retries
  }
  if (current->status == 404) {
    if (count_fate) {
      ++stats_.pods_not_found;
    } else {
      refuse_write(what, false, "the pod is gone");
    }
    return R::NotNeeded;
  }
  if (current->status != 200) {
    ++stats_.failures;
    refuse_write(what, false, fmt::format("GET pod: HTTP {}: {}", current->status, printable_excerpt(current->body)));
    return R::GaveUp;
  }
  auto pod = parse_bounded_json(current->body);
  if (!pod) {
    refuse_write(what, false, "GET pod: " + pod.error().message);
    return R::GaveUp;
  }
  // Whatever the answer's shape, a uid that is not a string is no uid:
  // the eviction's own uid precondition still guards it.
  const json* meta = member(*pod, "metadata");
  const std::string uid = meta != nullptr ? string_member(*meta, "uid").value_or("") : "";
  // Server capability: a server that tracks a pod's generation (1.34+,
  // PodObservedGenerationTracking) serves conditions' observedGeneration;
  // one that does not (1.20) leaves metadata.generation out.
  if (const json* g = meta != nullptr ? member(*meta, "generation") : nullptr;
      generation != nullptr && g != nullptr && g->is_number_integer() && g->get<int64_t>() > 0) {
    *generation = g->get<int64_t>();
  }
  if (!e.uid.empty() && !uid.empty() && uid != e.uid) {
    if (count_fate) {
      ++stats_.uid_conflicts;
      spdlog::info("k8s: {}: the pod now has uid {} (recreated), not {}: not evicted", what, uid, e.uid);
    } else {
      refuse_write(what, false, "the pod under that name is another one now (uid " + uid + ")");
    }
    return R::NotNeeded;
  }
  const json* spec = member(*pod, "spec");
  const std::string node = spec != nullptr ? string_member(*spec, "nodeName").value_or("") : "";
  if (node.empty()) {
    refuse_write(what, false, "the pod has no spec.nodeName");
    return R::GaveUp;
  }
  if (node != opts_.node_name) {
    refuse_write(what, true, "the pod runs on node " + node);
    return R::NotNeeded;
  }
  on_node_[e.id] = true;
  // Already terminating: evicted by the run before a restart (whose answer
  // was lost with it), or deleted by someone else. A second Eviction would
  // change nothing but be counted twice.
  const json* deleting = meta != nullptr ? member(*meta, "deletionTimestamp") : nullptr;
  if (deleting != nullptr && !deleting->is_null()) {
    if (count_fate) spdlog::info("k8s: {}: the pod is already terminating: not evicted again", what);
    return R::NotNeeded;
  }
  // Already terminal: recorded by the run before a restart, or ended on
  // its own meanwhile. Its status stays as it is.
  const json* status = member(*pod, "status");
  const std::string phase = status != nullptr ? string_member(*status, "phase").value_or("") : "";
  if (terminal_done && (phase == "Failed" || phase == "Succeeded")) {
    spdlog::info("k8s: {}: the pod is already {}: its status is left as it is", what, phase);
    // An eviction record there already (the run before a restart wrote
    // it; its answer was lost): answered as a record, so that it is
    // watched like one the kubelet may undo.
    const bool evicted = phase == "Failed" && string_member(*status, "reason").value_or("") == "Evicted";
    return evicted ? R::Recorded : R::NotNeeded;
  }
  return std::nullopt;
}

bool Reporter::event_on_node(const Eviction& e) {
  if (auto it = on_node_.find(e.id); it != on_node_.end()) {
    const bool on = it->second;
    on_node_.erase(it);
    return on;
  }
  // A static pod (its mirror pod is read) or an Eviction dropped from the
  // queue: the same read and rules, without counting the pod's fate twice.
  already_done(e, "event for " + e.namespace_ + "/" + e.name, /*terminal_done=*/false, /*count_fate=*/false);
  const bool on = on_node_[e.id];
  on_node_.erase(e.id);
  return on;
}

std::optional<EvictionResult> Reporter::mark_failed(const Eviction& e, const std::string& what,
                                                    std::optional<int64_t> generation) {
  using R = EvictionResult;
  auto r = with_retries(ApiAction::PodStatus, "status of " + e.namespace_ + "/" + e.name, [&] {
    return client_.request("PATCH", pod_path(e) + "/status", pod_status_patch(e, rfc3339_now(), generation),
                           "application/strategic-merge-patch+json");
  });
  if (!r) return R::GaveUp;  // counted by with_retries
  if (r->status == 200) return R::Recorded;
  if (r->status == 404) {
    ++stats_.pods_not_found;
    return R::NotNeeded;
  }
  // The uid in the patch: a pod recreated under the name since the read.
  if (r->status == 409 || (r->status == 422 && r->body.find("metadata.uid") != std::string::npos)) {
    ++stats_.uid_conflicts;
    return R::NotNeeded;
  }
  // Refused (RBAC without pods/status, a server that will not take the
  // status): the Eviction API still stops the kubelet restarting the pod.
  ++stats_.status_refused;
  spdlog::warn("k8s: {}: status update refused with HTTP {} ({}): evicting through the Eviction API instead", what,
               r->status, printable_excerpt(r->body));
  return std::nullopt;
}

EvictionResult Reporter::evict_through_api(const Eviction& e, const std::string& what) {
  using R = EvictionResult;
  auto evict = [&] {
    return client_.request("POST", pod_path(e) + "/eviction",
                           eviction_body(e, eviction_v1beta1_ ? "policy/v1beta1" : "policy/v1"));
  };
  auto r = with_retries(ApiAction::Eviction, what, evict, /*retry_429_500=*/false);
  if (r && !eviction_v1beta1_ && eviction_version_not_served(*r)) {
    // Kubernetes < 1.22 serves policy/v1beta1 only; remembered for the
    // daemon's lifetime (a server is not downgraded under a running node).
    eviction_v1beta1_ = true;
    spdlog::warn("k8s: the API server does not serve policy/v1 Eviction; using policy/v1beta1");
    r = with_retries(ApiAction::Eviction, what, evict, /*retry_429_500=*/false);
  }
  if (!r) return R::GaveUp;
  if (eviction_v1beta1_) ++stats_.eviction_v1beta1;
  if (r->status == 200 || r->status == 201) return R::Landed;  // counted in pressured_kubernetes_api_requests_total
  if (r->status == 404) {
    ++stats_.pods_not_found;
    return R::NotNeeded;
  }
  if (r->status == 409) {
    ++stats_.uid_conflicts;
    return R::NotNeeded;
  }
  if (r->status != 429 && r->status != 500) {
    ++stats_.failures;
    spdlog::error("k8s: {}: HTTP {}: {}", what, r->status, printable_excerpt(r->body));
    return R::GaveUp;
  }
  // Refused (a disruption budget, or an error): node pressure does not
  // wait for budgets, as the kubelet does not. DELETE with the same grace.
  ++stats_.evictions_refused;
  spdlog::info("k8s: {} refused with HTTP {}: falling back to DELETE", what, r->status);
  auto d = with_retries(ApiAction::Delete, "delete of " + e.namespace_ + "/" + e.name,
                        [&] { return client_.request("DELETE", pod_path(e), delete_body(e)); });
  if (!d) return R::GaveUp;  // counted by with_retries
  if (d->status == 200 || d->status == 202) return R::Landed;  // counted as an API request
  if (d->status == 404) {
    ++stats_.pods_not_found;
    return R::NotNeeded;
  }
  if (d->status == 409) {
    ++stats_.uid_conflicts;
    return R::NotNeeded;
  }
  ++stats_.failures;
  return R::GaveUp;
}

void Reporter::sync_taints(const std::array<bool, kConditionCount>& status) {
  const std::string path = "/api/v1/nodes/" + opts_.node_name;
  // Read-modify-write on the Node's resourceVersion: a taint someone else
  // adds between the GET and the PATCH makes the PATCH fail with 409, and
  // the list is computed again from the fresh Node. Conflicts get a budget of
  // their own and a short jittered pause (this is the reporter's worker, not
  // the reactor): a controller rewriting the Node in a tight loop must not
  // starve pressured's taint after a handful of tries.
  constexpr int kConflictAttempts = 20;
  thread_local std::minstd_rand jitter(static_cast<unsigned>(std::random_device{}()));
  for (int attempt = 1; attempt <= kConflictAttempts; ++attempt) {
    auto g = with_retries(ApiAction::NodeStatus, "get node " + opts_.node_name, [&] { return client_.request("GET", path); });
    if (!g) return;
    if (g->status != 200) {
      ++stats_.failures;
      spdlog::error("k8s: node taints: GET {}: HTTP {}: {}", path, g->status, printable_excerpt(g->body));
      return;
    }
    auto node = parse_bounded_json(g->body);
    const json* meta = node ? member(*node, "metadata") : nullptr;
    const json* rv = meta != nullptr ? member(*meta, "resourceVersion") : nullptr;
    if (meta == nullptr || !meta->is_object() || (rv != nullptr && !rv->is_string())) {
      ++stats_.failures;
      spdlog::error("k8s: node taints: GET {}: not a Node{}", path,
                    node ? std::string() : ": " + node.error().message);
      return;
    }
    const json* spec = member(*node, "spec");
    const json* taints = spec != nullptr ? member(*spec, "taints") : nullptr;
    auto next = updated_taints(taints != nullptr ? *taints : json::array(), opts_.taint_key_prefix, status, rfc3339_now());
    if (!next) return;
    json patch{{"metadata", {{"resourceVersion", rv != nullptr ? rv->get<std::string>() : std::string()}}},
               {"spec", {{"taints", *next}}}};
    auto p = with_retries(ApiAction::NodeStatus, "taint node " + opts_.node_name, [&] {
      return client_.request("PATCH", path, patch.dump(), "application/merge-patch+json");
    });
    if (!p) return;
    if (p->status == 200) {
      ++stats_.taints_updated;
      spdlog::info("k8s: node {} taints now {}", opts_.node_name, next->dump());
      return;
    }
    if (p->status == 409) {
      ++stats_.taint_conflicts;
      std::this_thread::sleep_for(std::chrono::milliseconds(10 + jitter() % 40));
      continue;
    }
    ++stats_.failures;
    spdlog::error("k8s: node taints: PATCH {}: HTTP {}: {}", path, p->status, printable_excerpt(p->body));
    return;
  }
  ++stats_.failures;
  spdlog::error("k8s: node taints: the Node kept changing under {} attempts", kConflictAttempts);
}

}  // namespace pressured::k8s
