#include "k8s/reporter.hpp"

#include <algorithm>
#include <vector>

#include <spdlog/spdlog.h>

namespace pressured::k8s {

Reporter::Reporter(ApiClient client, ReporterOptions options)
    : client_(std::move(client)),
      opts_(std::move(options)),
      api_(client_, RetryOptions{opts_.max_attempts, opts_.initial_backoff, opts_.max_backoff},
           [this](Duration d) { return wait_interruptible(d); }, stats_.retries, stats_.failures),
      evictions_(WriterDeps{api_, opts_, stats_}),
      node_(WriterDeps{api_, opts_, stats_}) {
  // Never write the kubelet-owned condition types.
  if (opts_.condition_prefix.empty()) opts_.condition_prefix = "Pressured";
}

Reporter::~Reporter() { stop(); }

void Reporter::attach_metrics(Metrics& metrics) {
  api_.set_metrics(&metrics);
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
      if (q.kind != Task::Kind::Api || q.job->job.undone != RecordUndone::None) continue;
      const Eviction& e = q.job->job.eviction;
      if (n_unsent++ < 10) unsent += (unsent.empty() ? "" : ", ") + e.namespace_ + "/" + e.name;
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

std::optional<EvictionResult> Reporter::step_done(Queued& q, bool dropped) {
  q.dropped = q.dropped || dropped;
  if (--q.steps > 0) return std::nullopt;
  return q.dropped ? EvictionResult::Dropped : q.job.result;
}

void Reporter::push(Task t) {
  std::vector<std::pair<std::string, EvictionResult>> answers;
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
      return std::find_if(queue_.begin(), queue_.end(), [](const Task& q) { return q.kind != Task::Kind::Api; });
    };
    while (queue_.size() >= opts_.queue_capacity) {
      auto drop = first_other();
      if (drop == queue_.end()) drop = queue_.begin();
      if (drop->kind == Task::Kind::Api || drop->kind == Task::Kind::Event) {
        if (auto a = step_done(*drop->job, /*dropped=*/true)) answers.emplace_back(drop->job->job.eviction.id, *a);
      }
      queue_.erase(drop);
      if (stats_.dropped++ == 0) {
        spdlog::warn("k8s: API queue full ({}), dropping the oldest requests (counted)", opts_.queue_capacity);
      }
    }
    if (t.kind == Task::Kind::Api) {
      queue_.insert(first_other(), std::move(t));
    } else {
      queue_.push_back(std::move(t));
    }
  }
  cv_.notify_all();
  for (const auto& [id, result] : answers) eviction_done(id, result);
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
  auto q = std::make_shared<Queued>();
  q->job.eviction = e;
  q->job.event = !e.name.empty() && !e.namespace_.empty();
  // The kubelet records the node's EvictionThresholdMet before it evicts.
  if (opts_.threshold_met_events && e.local_storage_rule.empty()) push(Task{Task::Kind::NodeEvent, q});
  if (e.static_pod) {
    ++stats_.refused_static;
    spdlog::info("k8s: pod {}/{} is static/mirror: not evicted through the API", e.namespace_, e.name);
    q->job.api = false;
  }
  q->steps = (q->job.api ? 1 : 0) + (q->job.event ? 1 : 0);
  if (q->steps == 0) {
    eviction_done(e.id, EvictionResult::NotNeeded);
    return;
  }
  if (q->job.api) push(Task{Task::Kind::Api, q});
  if (q->job.event) push(Task{Task::Kind::Event, q});
}

void Reporter::end_pod(const Eviction& e, RecordUndone cause) {
  auto q = std::make_shared<Queued>();
  q->job.eviction = e;
  q->job.event = false;
  q->job.undone = cause;
  q->steps = 1;
  push(Task{Task::Kind::Api, q});
}

void Reporter::report_conditions(const std::array<bool, kConditionCount>& status,
                                 const std::array<bool, kConditionCount>& flipped) {
  push(Task{Task::Kind::Conditions, nullptr, status, flipped});
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

void Reporter::execute(const Task& t) {
  switch (t.kind) {
    case Task::Kind::Api:
    case Task::Kind::Event: {
      if (t.kind == Task::Kind::Api) {
        evictions_.write(t.job->job);
      } else {
        evictions_.write_event(t.job->job);
      }
      std::optional<EvictionResult> answer;
      {
        std::lock_guard lk(mu_);
        answer = step_done(*t.job, /*dropped=*/false);
      }
      if (answer) eviction_done(t.job->job.eviction.id, *answer);
      return;
    }
    case Task::Kind::NodeEvent: node_.threshold_met(t.job->job.eviction); return;
    case Task::Kind::Conditions: node_.publish(t.status, t.flipped); return;
  }
}

}  // namespace pressured::k8s
