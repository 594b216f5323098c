#pragma once
// Tells the Kubernetes API what pressured did, through two writers over one
// retrying client: the eviction writer (k8s/eviction_writer.hpp: the pod's
// status record as the kubelet writes it, or the Eviction API with its
// DELETE fallback, and the pod's `Evicted` Event, as one job per eviction)
// and the node-status writer (k8s/node_status_writer.hpp: pressured's own
// node conditions, its NoSchedule taint while a pressure condition is true,
// the node's EvictionThresholdMet Event). All API work runs on one worker
// thread behind a bounded queue: the API being slow or down never delays a
// local eviction, and requests never pile up (the oldest is dropped and
// counted). See docs/kubernetes.md.

#include <array>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "k8s/api_client.hpp"
#include "k8s/api_retry.hpp"
#include "k8s/eviction_writer.hpp"
#include "k8s/node_status_writer.hpp"
#include "k8s/reporter_config.hpp"
#include "pressured/engine.hpp"
#include "pressured/metrics.hpp"
#include "pressured/policy.hpp"
#include "pressured/signals.hpp"

namespace pressured::k8s {

class Reporter {
 public:
  explicit Reporter(ApiClient client, ReporterOptions options);
  ~Reporter();
  Reporter(const Reporter&) = delete;
  Reporter& operator=(const Reporter&) = delete;

  /// Starts the worker thread.
  void start();
  /// Stops the worker; what is still queued is dropped (and counted).
  void stop();

  /// Queues the API eviction of a pod plus its Event, after the node's
  /// EvictionThresholdMet Event for a node threshold. Static/mirror pods are
  /// refused (counted) and only the Events are sent. Never blocks on the API.
  void report_eviction(const Eviction& e);
  /// Queues the end of a pod whose status record the kubelet undid
  /// (`cause`, counted): the Eviction API with its DELETE fallback and the
  /// same grace, no second Event; a pod already gone, recreated or
  /// terminating is left alone (NotNeeded). Answers through the eviction hook.
  void end_pod(const Eviction& e, RecordUndone cause);
  /// Publishes the node conditions (the newest state replaces a queued one)
  /// and, with taint_nodes, sets or clears pressured's NoSchedule taints to
  /// match them.
  void report_conditions(const std::array<bool, kConditionCount>& status,
                         const std::array<bool, kConditionCount>& flipped);

  /// Blocks until the queue is empty and the worker idle, or `timeout`. Tests.
  bool drain(Duration timeout);

  const ReporterStats& stats() const { return stats_; }
  /// Counts every HTTP attempt in `metrics`
  /// (pressured_kubernetes_api_requests_total) and exports the reporter's
  /// own counters (ReporterStats). `metrics` must outlive the reporter's
  /// worker (stop()). Call before start().
  void attach_metrics(Metrics& metrics);
  /// Optional hook called once per HTTP attempt with its outcome (tests
  /// record the sequence). Set before start().
  void set_outcome_hook(std::function<void(ApiAction, ApiOutcome)> hook) { api_.set_outcome_hook(std::move(hook)); }
  /// Called once per report_eviction() with what became of the Eviction (by
  /// Eviction::id), once its Event was sent too (a daemon that hears
  /// "done" must be able to forget both), on the worker thread (on the
  /// caller's for a full queue); not for evictions still queued at stop().
  /// The daemon turns these into inputs of its eviction policy.
  /// Thread-safe; an empty function removes it.
  void set_eviction_hook(std::function<void(const std::string& id, EvictionResult)> hook);

 private:
  // An eviction's job with what the queue knows of it (under mu_): its
  // steps not yet run or dropped, and whether one was dropped (then it is
  // answered Dropped once the other is done with, so that the whole is sent
  // again).
  struct Queued {
    EvictionJob job;
    int steps = 0;
    bool dropped = false;
  };
  // One entry of the queue: a step of an eviction's job, the node's Event
  // before one, or the node's conditions.
  struct Task {
    enum class Kind { Api, Event, NodeEvent, Conditions } kind;
    std::shared_ptr<Queued> job;  // Api, Event, NodeEvent
    std::array<bool, kConditionCount> status{};
    std::array<bool, kConditionCount> flipped{};
  };
  void push(Task t);
  void run();
  void execute(const Task& t);
  // One step of `q` done or dropped (under mu_): its answer when it was the last.
  static std::optional<EvictionResult> step_done(Queued& q, bool dropped);
  void eviction_done(const std::string& id, EvictionResult result);
  bool wait_interruptible(Duration d);

  ApiClient client_;
  ReporterOptions opts_;
  ReporterStats stats_;
  StatsExport stats_export_;  // after stats_: released first
  RetryingApi api_;
  EvictionWriter evictions_;
  NodeStatusWriter node_;
  std::mutex eviction_hook_mu_;
  std::function<void(const std::string&, EvictionResult)> eviction_hook_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace pressured::k8s
